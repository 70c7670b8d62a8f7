"""`bert-keras-main` (and tools/run_main_job.py): the flags are `MainJobOptions`' own."""

from bert_keras.common import cli
from bert_keras.main_job.options import MainJobOptions

TOOL = "bert-keras-main"


def _main():
    from bert_keras.main_job.job import run_main_job

    run_main_job(cli.options_from_flags(MainJobOptions))
    return 0


def cli_main():
    """Entry point of the `bert-keras-main` console script and of tools/run_main_job.py."""
    cli.define_flags(MainJobOptions)
    cli.run_tool(TOOL, _main)


__all__ = ["cli_main"]
