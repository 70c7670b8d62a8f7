"""Writing files atomically: a reader (or a rerun after a kill) sees the old file or the whole
new one, never half of it.

Every writer of the package goes through here: the data written to a temporary file beside the
target, then renamed over it (`os.replace`, atomic on one file system). A failed write leaves
no temporary behind and the old file untouched.

A path with a scheme (`gs://bucket/run`, any `scheme://`: `is_remote`) goes through
`tf.io.gfile`, TensorFlow's file systems, by way of `file_system(path)`, the one place that
chooses: the writer writes a local temporary file, which is copied beside the target and renamed
over it (on Cloud Storage an object appears whole when its upload ends, and a rename is a copy
and a delete: a reader sees the old object or the new one). Local paths take the local functions
(`os`, `open`) exactly as before.

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
import shutil
import tempfile


def is_remote(path):
    """Whether `path` names a file system of `tf.io.gfile` rather than the local one: it has a
    scheme (`gs://`, `s3://`, `hdfs://`, TensorFlow's in-memory `ram://`)."""
    return "://" in str(path)


class _LocalFiles:
    """The local file system's functions, under the names `file_system` gives."""

    exists = staticmethod(os.path.exists)
    lexists = staticmethod(os.path.lexists)
    isdir = staticmethod(os.path.isdir)
    isfile = staticmethod(os.path.isfile)
    islink = staticmethod(os.path.islink)
    listdir = staticmethod(os.listdir)
    walk = staticmethod(os.walk)
    remove = staticmethod(os.remove)
    rmdir = staticmethod(os.rmdir)
    replace = staticmethod(os.replace)

    @staticmethod
    def makedirs(path):
        os.makedirs(path, exist_ok=True)

    @staticmethod
    def rmtree(path, ignore_errors=False):
        shutil.rmtree(path, ignore_errors=ignore_errors)

    @staticmethod
    def open(path, mode="r"):
        """`open`, UTF-8 in text modes."""
        return open(path, mode, **({} if "b" in mode else {"encoding": "utf-8"}))


class _GFiles:
    """`tf.io.gfile`'s functions, with the local ones' names and errors (`FileNotFoundError`
    for a missing file)."""

    @staticmethod
    def _gfile():
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        return tf.io.gfile

    @classmethod
    def _call(cls, name, path, *args, **kwargs):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        try:
            return getattr(cls._gfile(), name)(path, *args, **kwargs)
        except tf.errors.NotFoundError as error:
            raise FileNotFoundError(2, error.message, str(path)) from None

    @classmethod
    def exists(cls, path):
        return cls._gfile().exists(path)

    lexists = exists

    @classmethod
    def isdir(cls, path):
        return cls._gfile().isdir(path)

    @classmethod
    def isfile(cls, path):
        return cls._gfile().exists(path) and not cls._gfile().isdir(path)

    @staticmethod
    def islink(path):  # pylint: disable=unused-argument
        return False

    @classmethod
    def listdir(cls, path):
        return [name.rstrip("/") for name in cls._call("listdir", path)]

    @classmethod
    def walk(cls, top):
        for folder, folders, names in cls._gfile().walk(top):
            folders[:] = [name.rstrip("/") for name in folders]
            yield folder, folders, names

    @classmethod
    def remove(cls, path):
        cls._call("remove", path)

    @classmethod
    def rmdir(cls, path):
        if cls.listdir(path):
            raise OSError(39, "Directory not empty", str(path))
        cls._call("remove", path)

    @classmethod
    def rmtree(cls, path, ignore_errors=False):
        try:
            cls._call("rmtree", path)
        except OSError:
            if not ignore_errors:
                raise

    @classmethod
    def replace(cls, source, target):
        cls._call("rename", source, target, overwrite=True)

    @classmethod
    def makedirs(cls, path):
        cls._gfile().makedirs(path)

    @classmethod
    def open(cls, path, mode="r"):
        """A `tf.io.gfile.GFile` (UTF-8 text in text modes); reading a missing file raises
        `FileNotFoundError`."""
        if "r" in mode and not cls._gfile().exists(path):
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return cls._gfile().GFile(path, mode)

    @classmethod
    def upload(cls, local, path):
        cls._call("copy", local, path, overwrite=True)

    @classmethod
    def download(cls, path, local):
        cls._call("copy", path, local, overwrite=True)


def file_system(path):
    """The functions that reach `path`: `exists`, `lexists`, `isdir`, `isfile`, `islink`,
    `listdir`, `walk`, `remove`, `rmdir`, `rmtree`, `replace` (a rename over the target),
    `makedirs` (existing folders allowed) and `open(path, mode)` (UTF-8 text); `tf.io.gfile`'s
    for a path with a scheme (`is_remote`), else the local ones (`os`, `shutil`, `open`).

    >>> file_system("gs://bucket/run") is file_system("ram://run"), file_system("/tmp").isdir("/tmp")
    (True, True)
    """
    return _GFiles if is_remote(path) else _LocalFiles


_LOCAL_COPIES = []


def local_copy(path):
    """A path on the local disk holding the file `path`: `path` itself when it is local, else a
    copy made now in a temporary folder of this process (removed when it exits), named like
    `path`, for readers that take a local file only (a vocabulary's tokenizers)."""
    path = os.fspath(path)
    if not is_remote(path):
        return path
    if not _LOCAL_COPIES:
        import atexit  # pylint: disable=import-outside-toplevel

        _LOCAL_COPIES.append(tempfile.mkdtemp(prefix="bert_keras_copies_"))
        atexit.register(shutil.rmtree, _LOCAL_COPIES[0], ignore_errors=True)
    local = os.path.join(tempfile.mkdtemp(dir=_LOCAL_COPIES[0]), os.path.basename(path))
    _GFiles.download(path, local)
    return local


@contextlib.contextmanager
def _remote_atomic_path(path, suffix=""):
    """`atomic_path` of a `scheme://` path: the writer writes a local temporary file, which is
    copied beside `path` (`<path>.tmp-<pid>`) and renamed over it."""
    fs = _GFiles
    folder = tempfile.mkdtemp(prefix="bert_keras_upload_")
    try:
        local = os.path.join(folder, f"{os.path.basename(path)}{suffix}")
        yield local
        fs.makedirs(os.path.dirname(path))
        temporary = f"{path}.tmp-{os.getpid()}"
        try:
            fs.upload(local, temporary)
            fs.replace(temporary, path)
        finally:
            if fs.exists(temporary):
                fs.remove(temporary)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def atomic_path(path, suffix=""):
    """Yields a temporary path beside `path` (ending in `suffix`, for writers that go by the
    extension); when the block ends without an exception, the temporary replaces `path`.
    Creates the parent directory. For a `scheme://` path (`is_remote`) the temporary is a local
    file, copied beside `path` and renamed over it through `tf.io.gfile`."""
    path = os.fspath(path)
    if is_remote(path):
        with _remote_atomic_path(path, suffix) as temporary:
            yield temporary
        return
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
    fs = file_system(directory)
    isdir = lambda path: fs.isdir(path) and not fs.islink(path)  # noqa: E731
    exists, rmtree, remove = fs.lexists, fs.rmtree, fs.remove
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


__all__ = ["is_remote", "file_system", "local_copy", "atomic_path", "atomic_directory", "DirectoryInUseError", "atomic_output", "write_atomic", "write_text_atomic", "write_json_atomic",
           "remove_entries", "describe_changes"]
