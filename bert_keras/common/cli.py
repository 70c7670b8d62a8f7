"""The command-line layer shared by every tool: flags generated from the options dataclasses,
one expansion of file globs, and one error policy.

An option is declared once, as a dataclass field with `option(...)`: its default, help, choices
and earlier spellings live there, and every tool that uses the dataclass gets the same flag.

Example:

>>> import dataclasses
>>> from absl import flags
>>> @dataclasses.dataclass
... class VocabOptions:
...     vocab_size: int = option(30522, "Tokens in the vocabulary.")
...     do_lower_case: bool = option(True, "Uncased vocabulary.", aliases=("lower_case",))
...     mixed_precision: str = option("float32", "Compute dtype.", flag="dtype",
...                                   choices=("float32", "bfloat16"), flag_default="bfloat16",
...                                   from_flag=lambda value: "mixed_" + value)
...     cache: dict = None   # not an option: no flag
>>> flag_values = flags.FlagValues()
>>> define_flags(VocabOptions, flag_values)
>>> _ = flag_values(["tool", "--vocab_size=8", "--nolower_case"])
>>> options_from_flags(VocabOptions, flag_values)
VocabOptions(vocab_size=8, do_lower_case=False, mixed_precision='mixed_bfloat16', cache=None)
"""

import dataclasses
import errno
import glob
import os
import sys

from bert_keras.common.errors import BertKerasError

_KEY = "bert_keras_option"


def option(default, help, *, flag=None, choices=None, aliases=(), flag_default=dataclasses.MISSING,
           from_flag=None, required=False):
    """A dataclass field that is also a command-line flag.

    Args:
      default: the library default (also the flag's, unless `flag_default`).
      help: the flag's help.
      flag: the flag's name when it differs from the field's (e.g. "dtype").
      choices: the allowed values (an enum flag).
      aliases: earlier spellings, still accepted.
      flag_default: the command line's default when it differs from the library's (e.g. "auto").
      from_flag: converts the flag's value into the field's (e.g. "bfloat16" -> "mixed_bfloat16").
      required: the flag must be given.
    """
    metadata = {_KEY: dict(help=help, flag=flag, choices=tuple(choices) if choices else None,
                           aliases=tuple(aliases), flag_default=flag_default,
                           from_flag=from_flag, required=required)}
    if isinstance(default, (list, dict, set)):
        raise TypeError("use a tuple as the default of a list option")
    return dataclasses.field(default=default, metadata=metadata)


def options_of(options_class):
    """[(field, spec)] of the fields of `options_class` declared with `option`."""
    return [(field, field.metadata[_KEY]) for field in dataclasses.fields(options_class)
            if _KEY in field.metadata]


# Options that several tools share, declared here once (their owners declare the rest:
# `distribution.strategy_option`, `optimization.dtype_option`).
def do_lower_case_option(help="Lower-case and strip accents: an uncased vocabulary, as the "
                              "original's default; --nodo_lower_case for a cased one."):
    return option(True, help, aliases=("lower_case",))


def max_seq_length_option(default=128, help="Wordpieces per sequence, [CLS] and [SEP] included."):
    return option(default, help)


def input_encoding_option():
    return option("utf-8", "Encoding of the input text files (e.g. latin-1, cp1252); the "
                  "model's text is Unicode either way.")


def start_over_option(what):
    return option(False, f"Remove the earlier run's {what} and start again (a rerun without it "
                  "resumes, and stops when a setting changed).")


def seed_option(default=12345, help="Random seed."):
    return option(default, help, aliases=("random_seed",))


def _flag_name(field, spec):
    return spec["flag"] or field.name


def define_flags(options_class, flag_values=None, skip=(), defaults=None):
    """Defines an absl flag for each option of `options_class` (not those named in `skip`);
    `defaults` ({field name: value}) replace the declared defaults for this tool."""
    from absl import flags

    flag_values = flag_values if flag_values is not None else flags.FLAGS
    # The flags belong to the program that runs (absl's name for the main module), so that its
    # --help lists them.
    module_name = sys.argv[0] if sys.argv else "__main__"
    for field, spec in options_of(options_class):
        if field.name in skip:
            continue
        name = _flag_name(field, spec)
        default = (defaults or {}).get(field.name, field.default)
        if spec["flag_default"] is not dataclasses.MISSING and field.name not in (defaults or {}):
            default = spec["flag_default"]
        kind = field.type if isinstance(field.type, type) else type(default)
        common = dict(flag_values=flag_values, required=spec["required"], module_name=module_name)
        if spec["required"]:
            default = None
        if spec["choices"]:
            flags.DEFINE_enum(name, default, list(spec["choices"]), spec["help"], **common)
        elif kind is bool or isinstance(default, bool):
            flags.DEFINE_bool(name, default, spec["help"], **common)
        elif kind is int and not isinstance(default, float):
            flags.DEFINE_integer(name, default, spec["help"], **common)
        elif kind is float or isinstance(default, float):
            flags.DEFINE_float(name, default, spec["help"], **common)
        elif kind is tuple or isinstance(default, tuple):
            flags.DEFINE_list(name, [f"{value:g}" if isinstance(value, float) else str(value)
                                     for value in default], spec["help"], **common)
        else:
            flags.DEFINE_string(name, default, spec["help"], **common)
        for alias in spec["aliases"]:
            flags.DEFINE_alias(alias, name, flag_values=flag_values)


def _list_value(field, name, values):
    declared = field.default if isinstance(field.default, tuple) and field.default else ()
    kind = type(declared[0]) if declared else str
    try:
        return tuple(kind(value) for value in values)
    except ValueError:
        raise BertKerasError(f"--{name}: not a list of {kind.__name__}s: "
                             f"{','.join(values)}") from None


def flag_values_of(options_class, flag_values=None, skip=()):
    """{field name: value} of the options of `options_class` as the command line set them."""
    from absl import flags

    flag_values = flag_values if flag_values is not None else flags.FLAGS
    values = {}
    for field, spec in options_of(options_class):
        name = _flag_name(field, spec)
        if field.name in skip or name not in flag_values:
            continue
        value = flag_values[name].value
        if isinstance(value, list):
            value = _list_value(field, name, value)
        if spec["from_flag"] is not None:
            value = spec["from_flag"](value)
        values[field.name] = value
    return values


def options_from_flags(options_class, flag_values=None, skip=(), **overrides):
    """An `options_class` instance from the command line; `overrides` set other fields."""
    values = flag_values_of(options_class, flag_values, skip)
    values.update(overrides)
    return options_class(**values)


def expand_files(patterns, flag="input_files"):
    """The sorted files of a comma-separated list of paths and globs; BertKerasError naming
    `--flag` and the pattern when one matches nothing."""
    files = []
    for pattern in str(patterns or "").split(","):
        pattern = pattern.strip()
        if not pattern:
            continue
        matched = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else (
            [pattern] if os.path.isfile(pattern) else [])
        if not matched and os.path.isdir(pattern):
            raise BertKerasError(f"--{flag}: {pattern} is a directory; name the files in it "
                                 f"(e.g. {os.path.join(pattern, '*.txt')})")
        if not matched:
            raise BertKerasError(f"--{flag}: nothing matches {pattern!r}")
        files.extend(matched)
    if not files:
        raise BertKerasError(f"--{flag}: no input files given")
    return files


BAD_INPUT = 2  # exit status for bad input (a flag, a file, a setting the user can fix)
INTERNAL_ERROR = 1  # exit status for a failure of the tool itself (its traceback is logged)
# Exit status for a failure of the machine, not of the input: a full disk, a permission denied,
# a read-only file system (the same command succeeds once that is fixed).
ENVIRONMENT_FAILURE = 3
_ENVIRONMENT_ERRNOS = {errno.ENOSPC, errno.EACCES, errno.EPERM, errno.EROFS, errno.EDQUOT}
_ENVIRONMENT_HINTS = {errno.ENOSPC: "the disk is full: free some space and run again",
                      errno.EDQUOT: "the disk quota is exceeded: free some space and run again",
                      errno.EROFS: "the file system is read-only: write somewhere else",
                      errno.EACCES: "permission denied: write somewhere else or change the "
                                    "permissions",
                      errno.EPERM: "operation not permitted: write somewhere else or change "
                                   "the permissions"}
# TensorFlow's errors (classes named as in `tf.errors`) that mean the same.
_ENVIRONMENT_TF_ERRORS = ("PermissionDeniedError", "ResourceExhaustedError")


def _internal_error_log(tool):
    """Where the traceback of an internal failure is written: `$BERT_KERAS_LOG_DIR` or the
    system's temporary directory."""
    import tempfile

    directory = os.environ.get("BERT_KERAS_LOG_DIR") or tempfile.gettempdir()
    return os.path.join(directory, f"{tool}-{os.getpid()}-traceback.log")


def report_errors(tool, main):
    """Runs `main()` and returns its exit status, with one error policy for every tool.

    Bad input (`BertKerasError`, ValueError, a missing file, a TensorFlow data error) is
    printed as `tool: error: message`, without a traceback, and gives exit status 2
    (`BAD_INPUT`). A failure of the machine (a full disk, a permission denied, a read-only
    file system: the input is fine) is printed the same way, with what to do, and gives exit
    status 3 (`ENVIRONMENT_FAILURE`). Anything else is a failure of the tool itself: one line
    `tool: internal error: ...` naming a log file that holds the traceback, and exit status 1
    (`INTERNAL_ERROR`).

    Example:

    >>> def main():
    ...     raise BertKerasError("corpus.txt, line 3: a NUL byte")
    >>> report_errors("build_vocab", main)
    2
    """
    try:
        return main()
    except (ValueError, OSError) as error:
        message = str(error)
        if isinstance(error, OSError) and error.filename and (
                error.strerror and message.startswith("[Errno")
                or str(error.filename) not in message):
            message = f"{error.filename}: {error.strerror or message}"
        elif isinstance(error, OSError) and error.strerror and message.startswith("[Errno"):
            message = error.strerror
        if isinstance(error, OSError) and error.errno in _ENVIRONMENT_ERRNOS:
            print(f"{tool}: error: {message} ({_ENVIRONMENT_HINTS[error.errno]})",
                  file=sys.stderr)
            return ENVIRONMENT_FAILURE
        print(f"{tool}: error: {message}", file=sys.stderr)
        return BAD_INPUT
    except Exception as error:  # noqa: BLE001 (the policy: every failure gets a message)
        # TensorFlow's OpError (not imported here: it loads TensorFlow) is bad input too, or
        # a failure of the machine.
        if type(error).__module__.startswith("tensorflow") and hasattr(error, "message"):
            print(f"{tool}: error: {error.message}", file=sys.stderr)
            return (ENVIRONMENT_FAILURE if type(error).__name__ in _ENVIRONMENT_TF_ERRORS
                    else BAD_INPUT)
        import traceback

        text = traceback.format_exc()
        log = _internal_error_log(tool)
        try:
            with open(log, "w", encoding="utf-8") as f:
                f.write(text)
            where = f"traceback in {log}"
        except OSError:
            sys.stderr.write(text)
            where = "traceback above"
        print(f"{tool}: internal error: {type(error).__name__}: {error} ({where}; please "
              "report it)", file=sys.stderr)
        return INTERNAL_ERROR


_HELP_FLAGS = {"--help", "-help", "-h", "-?", "--helpshort", "--helpfull", "--helpxml"}


def _parse_flags(tool):
    """absl's flag parser with the tools' error policy: a bad or unknown flag is
    `tool: error: ...` and exit status 2 (absl's own parser exits 1)."""
    from absl import flags

    def parse(argv):
        try:
            return flags.FLAGS(argv)
        except flags.Error as error:
            print(f"{tool}: error: {error}\nPass --help for the flags.", file=sys.stderr)
            sys.exit(BAD_INPUT)
        except SystemExit as exit:
            # absl exits 1 after printing --help; asking for help is not a failure.
            if exit.code == 1 and set(argv[1:]) & _HELP_FLAGS:
                sys.exit(0)
            raise

    return parse


def run_tool(tool, main):
    """The `if __name__ == "__main__"` of a tool: parses the flags (absl) and exits with
    `report_errors(tool, main)`: 0, `BAD_INPUT` (2), `ENVIRONMENT_FAILURE` (3) or
    `INTERNAL_ERROR` (1)."""
    from absl import app

    app.run(lambda argv: sys.exit(report_errors(tool, main)), flags_parser=_parse_flags(tool))


__all__ = ["option", "do_lower_case_option", "input_encoding_option", "start_over_option", "max_seq_length_option", "seed_option", "options_of", "define_flags", "flag_values_of", "options_from_flags",
           "expand_files", "report_errors", "run_tool", "BAD_INPUT", "INTERNAL_ERROR",
           "ENVIRONMENT_FAILURE"]
