"""The `bert-keras` command: one sub-command per step of the pipeline, listed once here.

    bert-keras vocab      raw text -> vocab.txt
    bert-keras data       raw text -> pre-training TFRecords
    bert-keras pretrain   TFRecords -> a pre-trained model directory
    bert-keras finetune   a model directory -> a fine-tuned model directory, evaluated
    bert-keras export     a model directory -> a SavedModel (or a TensorFlow Lite model)
    bert-keras convert    a published checkpoint -> a model directory
    bert-keras main       all of it on the bundled data (also `bert-keras-main`)

`COMMANDS` maps each name to its `Command`: a one-line summary, the module whose `main()` runs
it, and the options dataclasses whose fields become its flags (`bert_keras.common.cli`
generates them). The options are named here as "module:Class" and imported when
`Command.options` is read, because several of their modules load TensorFlow; listing the
commands (`bert-keras --help`) does not.

Example:

>>> from bert_keras.commands import COMMANDS
>>> list(COMMANDS)
['vocab', 'data', 'pretrain', 'finetune', 'export', 'convert', 'main']
>>> COMMANDS["export"].summary
'Export a model directory as a SavedModel or a TensorFlow Lite model.'
>>> [options.__name__ for options in COMMANDS["export"].options]
['ExportOptions']
"""

import dataclasses
import importlib
import os
import sys

PROGRAM = "bert-keras"


@dataclasses.dataclass(frozen=True)
class Command:
    """One sub-command of `bert-keras`.

    Attributes:
      name: the sub-command, as in `bert-keras NAME`.
      summary: one line, listed by `bert-keras --help`.
      module: the dotted module whose `main()` runs the sub-command; `main` reads its options
        from the parsed flags and returns the exit status.
      option_paths: the options dataclasses whose fields become the flags, in order, as
        "module:Class".
    """

    name: str
    summary: str
    module: str
    option_paths: tuple

    @property
    def options(self):
        """The options dataclasses whose fields become the flags, in order (importing them may
        load TensorFlow)."""
        classes = []
        for path in self.option_paths:
            module, _, name = path.partition(":")
            classes.append(getattr(importlib.import_module(module), name))
        return tuple(classes)


COMMANDS = {command.name: command for command in (
    Command("vocab", "Learn a WordPiece vocabulary (vocab.txt) from raw text.",
            "bert_keras.data.vocab_cli",
            ("bert_keras.data.vocab_cli:BuildVocabOptions",)),
    Command("data", "Write pre-training TFRecords (masked LM and next sentence) from raw text.",
            "bert_keras.data.cli",
            ("bert_keras.data.instances:InstanceOptions",
             "bert_keras.data.pipeline:PipelineConfig")),
    Command("pretrain", "Pre-train BERT on TFRecords into a model directory.",
            "bert_keras.pretraining.cli",
            ("bert_keras.pretraining.options:PretrainingOptions",
             "bert_keras.pretraining.cli:PretrainingCommandOptions")),
    Command("finetune", "Fine-tune a model directory on a task (GLUE, SQuAD, SWAG, CoNLL-2003) "
            "and evaluate it.",
            "bert_keras.finetuning.cli",
            ("bert_keras.finetuning.run:FinetuningRunOptions",
             "bert_keras.finetuning.task:FinetuningOptions")),
    Command("export", "Export a model directory as a SavedModel or a TensorFlow Lite model.",
            "bert_keras.export.cli",
            ("bert_keras.export.options:ExportOptions",)),
    Command("convert", "Convert a published BERT checkpoint into a model directory.",
            "bert_keras.modeldir.cli",
            ("bert_keras.modeldir.convert:ConvertOptions",)),
    Command("main", "The whole pipeline on the bundled data: vocabulary, pre-training, "
            "fine-tuning, export, serving.",
            "bert_keras.main_job.cli",
            ("bert_keras.main_job.options:MainJobOptions",)),
)}


def usage():
    """The text of `bert-keras --help`: the sub-commands and their summaries."""
    from bert_keras import __version__

    width = max(len(name) for name in COMMANDS)
    lines = [f"usage: {PROGRAM} COMMAND [flags]", "",
             f"BERT in Keras 3 on TensorFlow, from raw text to a served model ({__version__}).",
             "", "commands:"]
    lines += [f"  {name:<{width}}  {command.summary}" for name, command in COMMANDS.items()]
    lines += ["", f"`{PROGRAM} COMMAND --help` lists the flags of a command."]
    return "\n".join(lines) + "\n"


def run(name, args=None, program=None):
    """Runs the sub-command `name` on the flags `args` (default: the command line after the
    program) and exits with its status: 0, 2 for bad input, 1 for a failure of the tool.

    `program` names the tool in messages (`program: error: ...`); by default the script that
    runs, without ".py" (the tools/ aliases keep their names).
    """
    from bert_keras.common import cli

    command = COMMANDS[name]
    args = list(sys.argv[1:] if args is None else args)
    program = program or os.path.basename(sys.argv[0]).removesuffix(".py")
    # absl takes the program's flags and its --help from argv[0], and the usage text from the
    # main module's docstring: make both the sub-command's.
    sys.argv[:] = [program, *args]
    module = importlib.import_module(command.module)
    main_module = sys.modules.get("__main__")
    if main_module is not None:
        main_module.__doc__ = module.__doc__
    for options in command.options:
        cli.define_flags(options)
    cli.run_tool(program, module.main)


def main(argv=None):
    """Entry point of the `bert-keras` console script."""
    from bert_keras.common.cli import BAD_INPUT

    argv = list(sys.argv if argv is None else argv)
    if len(argv) < 2:
        sys.stderr.write(usage())
        sys.exit(BAD_INPUT)
    name, args = argv[1], argv[2:]
    if name in ("-h", "--help", "-help", "help"):
        sys.stdout.write(usage())
        sys.exit(0)
    if name == "--version":
        from bert_keras import __version__

        print(f"{PROGRAM} {__version__}")
        sys.exit(0)
    if name not in COMMANDS:
        print(f"{PROGRAM}: error: no command {name!r}; the commands: {', '.join(COMMANDS)}\n"
              f"Pass --help for what each does.", file=sys.stderr)
        sys.exit(BAD_INPUT)
    run(name, args, program=f"{PROGRAM} {name}")


__all__ = ["COMMANDS", "Command", "PROGRAM", "main", "run", "usage"]
