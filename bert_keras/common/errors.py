"""The base of every error that means "bad input": a file, a line, a flag or a setting that
the user can fix. The command-line tools print these as `tool: error: message` (no traceback)
and exit with status 2; anything else is a failure of the tool itself: exit status 1, its
traceback written to a log file (`bert_keras.common.cli.report_errors`).
"""


class BertKerasError(ValueError):
    """Bad input, with a message that names the file, line, flag or setting at fault."""


__all__ = ["BertKerasError"]
