"""Writing files atomically: a reader (or a rerun after a kill) sees the old file or the whole
new one, never half of it.

Every writer of the package goes through here: the data written to a temporary file beside the
target, then renamed over it (`os.replace`, atomic on one file system). A failed write leaves
no temporary behind and the old file untouched.

Example:

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "out", "results.json")
>>> write_json_atomic(path, {"accuracy": 0.5})
>>> open(path).read()
'{\\n  "accuracy": 0.5\\n}\\n'
>>> with atomic_output(path, "w") as f:
...     _ = f.write("half")
...     raise ValueError("interrupted")
Traceback (most recent call last):
ValueError: interrupted
>>> open(path).read()[:14], sorted(os.listdir(os.path.dirname(path)))
('{\\n  "accuracy"', ['results.json'])
"""

import contextlib
import json
import os


@contextlib.contextmanager
def atomic_path(path, suffix=""):
    """Yields a temporary path beside `path` (ending in `suffix`, for writers that go by the
    extension); when the block ends without an exception, the temporary replaces `path`.
    Creates the parent directory."""
    path = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    temporary = f"{path}.tmp-{os.getpid()}{suffix}"
    try:
        try:
            yield temporary
            os.replace(temporary, path)
        except OSError as error:
            if error.filename or not error.errno:
                raise
            # A failed write (e.g. a full disk) names no file: name the one being written.
            raise OSError(error.errno, error.strerror, path) from error
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


class DirectoryInUseError(FileExistsError):
    """An output directory that holds files of another writer (`atomic_directory`)."""


@contextlib.contextmanager
def atomic_directory(path, replaceable=lambda path: False):
    """Yields an empty temporary directory beside `path`; when the block ends without an
    exception it becomes `path`. An existing `path` is replaced only when it is empty or
    `replaceable(path)` says so (e.g. an earlier output of the same writer); otherwise
    `DirectoryInUseError` before the block runs, so that nothing of the user's is overwritten. On an
    exception (or a kill) the temporary is all that is left, never a half-written `path`.

    >>> import os, tempfile
    >>> root = tempfile.mkdtemp()
    >>> with atomic_directory(os.path.join(root, "export")) as temporary:
    ...     _ = open(os.path.join(temporary, "saved_model.pb"), "w").write("graph")
    >>> sorted(os.listdir(root)), os.listdir(os.path.join(root, "export"))
    (['export'], ['saved_model.pb'])
    >>> try:
    ...     with atomic_directory(os.path.join(root, "export")) as temporary:
    ...         pass
    ... except DirectoryInUseError as error:
    ...     print(str(error).split(" already ")[1])
    holds saved_model.pb; choose a new or empty directory
    """
    import shutil

    path = os.path.abspath(os.fspath(path))
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise DirectoryInUseError(f"{path} is a file, not a directory")
        held = sorted(os.listdir(path))
        if held and not replaceable(path):
            raise DirectoryInUseError(f"{path} already holds {', '.join(held[:5])}"
                                  f"{', ...' if len(held) > 5 else ''}; choose a new or empty "
                                  "directory")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    temporary = f"{path}.tmp-{os.getpid()}"
    shutil.rmtree(temporary, ignore_errors=True)
    os.makedirs(temporary)
    try:
        yield temporary
        old = f"{path}.old-{os.getpid()}"
        if os.path.exists(path):
            os.replace(path, old)
        os.replace(temporary, path)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


@contextlib.contextmanager
def atomic_output(path, mode="wb"):
    """Yields a file open for writing (`mode` "wb" or "w", UTF-8) that replaces `path` when the
    block ends without an exception."""
    if mode not in ("wb", "w"):
        raise ValueError(f"mode must be 'wb' or 'w', got {mode!r}")
    with atomic_path(path) as temporary:
        with open(temporary, mode, **({} if mode == "wb" else {"encoding": "utf-8"})) as f:
            yield f


def write_atomic(path, data):
    """Writes `data` (bytes, or an iterable of bytes written one after the other) to `path`."""
    with atomic_output(path) as f:
        for part in [data] if isinstance(data, bytes) else data:
            f.write(part)


def write_text_atomic(path, text):
    """Writes `text` (UTF-8) to `path`."""
    with atomic_output(path, "w") as f:
        f.write(text)


def write_json_atomic(path, value, indent=2, **dump_options):
    """Writes `value` as JSON (and a final newline) to `path`; `dump_options` go to `json.dumps`
    (`sort_keys`, `default`, `ensure_ascii`)."""
    write_text_atomic(path, json.dumps(value, indent=indent, **dump_options) + "\n")


def remove_entries(directory, names):
    """Removes the files and folders `names` of `directory`, nothing else there (`--start_over`
    of a tool whose outputs are known by name); returns the names it found and removed. A
    `gs://` (any `scheme://`) directory goes through `tf.io.gfile`.

    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> os.makedirs(os.path.join(folder, "checkpoints"))
    >>> write_text_atomic(os.path.join(folder, "notes.txt"), "mine")
    >>> remove_entries(folder, ["checkpoints", "model.safetensors"]), os.listdir(folder)
    (['checkpoints'], ['notes.txt'])
    """
    if "://" in str(directory):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        isdir, exists, rmtree, remove = (tf.io.gfile.isdir, tf.io.gfile.exists,
                                         tf.io.gfile.rmtree, tf.io.gfile.remove)
    else:
        import shutil  # pylint: disable=import-outside-toplevel

        isdir = lambda path: os.path.isdir(path) and not os.path.islink(path)  # noqa: E731
        exists, rmtree, remove = os.path.lexists, shutil.rmtree, os.remove
    removed = []
    for name in names:
        path = os.path.join(directory, name)
        if isdir(path):
            rmtree(path)
        elif exists(path):
            remove(path)
        else:
            continue
        removed.append(name)
    return removed


def describe_changes(recorded, current, recorded_as="recorded", current_as="now"):
    """Names every setting that differs between two records (nested dicts by dotted name), for
    a rerun that must stop and say what changed.

    >>> describe_changes({"seed": 1, "options": {"max_seq_length": 128, "dupe_factor": 5}},
    ...                  {"seed": 1, "options": {"max_seq_length": 64, "dupe_factor": 5}})
    'options.max_seq_length: 128 recorded, 64 now'
    """

    def walk(old, new, prefix):
        if isinstance(old, dict) and isinstance(new, dict):
            for key in sorted(set(old) | set(new), key=str):
                yield from walk(old.get(key), new.get(key), f"{prefix}{key}.")
        elif old != new:
            yield f"{prefix[:-1]}: {old!r} {recorded_as}, {new!r} {current_as}"

    return "; ".join(walk(recorded, current, ""))


__all__ = ["atomic_path", "atomic_directory", "DirectoryInUseError", "atomic_output", "write_atomic", "write_text_atomic", "write_json_atomic",
           "remove_entries", "describe_changes"]
