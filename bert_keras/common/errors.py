"""The base of every error that means "bad input": a file, a line, a flag or a setting that
the user can fix. The command-line tools print these as `tool: error: message` (no traceback)
and exit 1; anything else is a bug and keeps its traceback.
"""


class BertKerasError(ValueError):
    """Bad input, with a message that names the file, line, flag or setting at fault."""


__all__ = ["BertKerasError"]
