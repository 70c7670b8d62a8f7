"""What a killed export leaves behind, removed by the next export into the same place.

An export is written beside its directory as `NAME.tmp-PID` and renamed into place
(`bert_keras.common.files.atomic_directory`; single files through `atomic_path`). A process
killed before the rename (SIGKILL, a lost machine) cannot remove its temporary: a lite or
encoder export left tens of MB there for good. The next export into `NAME` removes every
`NAME.tmp-PID` (a file or a directory, with or without an extension after the PID) whose
process is no longer running on this machine. A temporary of a running export, this one's
included, is left alone; so is any other name, `NAME.old-PID` too (it may hold the only copy
of an earlier export when a kill came between the two renames).

>>> import os, tempfile
>>> root = tempfile.mkdtemp()
>>> dead = 2 ** 22 + 1  # above Linux's largest process id: never running
>>> for name in (f"export.tmp-{dead}", f"export.tmp-{os.getpid()}", "export.tmp-x", "notes"):
...     os.makedirs(os.path.join(root, name))
>>> remove_stale_temporaries(os.path.join(root, "export"))
['export.tmp-4194305']
>>> sorted(os.listdir(root)) == sorted([f"export.tmp-{os.getpid()}", "export.tmp-x", "notes"])
True
"""

import logging
import os
import re
import shutil

logger = logging.getLogger("bert_keras.export")

_TEMPORARY = r"\.tmp-(\d+)(\.[^/]*)?"


def process_is_running(pid):
    """Whether process `pid` exists on this machine (one of another user's counts as running)."""
    if pid <= 0:
        return True  # not a process id: leave it alone
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # none, or beyond any process id
        return False
    except PermissionError:  # another user's
        return True
    return True


def _final_path(path):
    """The export directory a path stands for: `NAME` for `NAME` or this process's
    `NAME.tmp-PID` (what an exporter is handed while `atomic_directory` writes)."""
    path = os.path.abspath(os.fspath(path))
    match = re.fullmatch(r"(.+)" + _TEMPORARY, path)
    if match and int(match.group(2)) == os.getpid():
        return match.group(1)
    return path


def remove_stale_temporaries(path):
    """Removes the leftovers of killed exports beside `path` (the export directory, or this
    process's temporary of it): `NAME.tmp-PID[.ext]` of processes no longer running. Returns
    the names removed (each also logged)."""
    final = _final_path(path)
    parent, name = os.path.split(final)
    if not os.path.isdir(parent):
        return []
    pattern = re.compile(re.escape(name) + _TEMPORARY)
    removed = []
    for entry in sorted(os.listdir(parent)):
        match = pattern.fullmatch(entry)
        if not match or process_is_running(int(match.group(1))):
            continue
        leftover = os.path.join(parent, entry)
        try:
            if os.path.isdir(leftover) and not os.path.islink(leftover):
                shutil.rmtree(leftover)
            else:
                os.remove(leftover)
        except FileNotFoundError:  # another export removed it first
            continue
        logger.warning("removed %s, left by an export (process %s) that did not finish",
                       leftover, match.group(1))
        removed.append(entry)
    return removed


__all__ = ["remove_stale_temporaries", "process_is_running"]
