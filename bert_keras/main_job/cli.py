"""`bert-keras main` and `bert-keras-main` (and tools/run_main_job.py): the flags are
`MainJobOptions`' own."""

from bert_keras.common import cli
from bert_keras.main_job.options import MainJobOptions

TOOL = "bert-keras-main"


def main():
    from bert_keras.main_job.job import run_main_job

    run_main_job(cli.options_from_flags(MainJobOptions))
    return 0


def cli_main():
    """Entry point of the `bert-keras-main` console script: the same as `bert-keras main`."""
    cli.define_flags(MainJobOptions)
    cli.run_tool(TOOL, main)


__all__ = ["cli_main", "main"]
