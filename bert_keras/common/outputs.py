"""What every tool that writes a directory shares, so that no run loses a user's data:

- `check_not_over_inputs`: the output is never one of the inputs, nor a folder that holds one
  (checked before any work, naming both flags);
- `check_no_foreign_files`: an output directory that holds a model or another tool's outputs
  is refused, not overwritten;
- `output_lock`: one run at a time writes a directory (the lock names the holder's pid; a lock
  left by a killed run is taken over);
- `recording_outputs` and `remove_recorded_outputs`: the tool lists what it wrote in a manifest
  (`bert_keras_outputs.json`) kept in the directory, and `--start_over` removes those files,
  and nothing else.

On a `scheme://` directory (`gs://bucket/run`: `files.is_remote`) the manifest is kept through
`tf.io.gfile` the same way; there is no lock there (`output_lock` says so in a warning): an
object store has no atomic create, and a lock left by a preempted machine would stop the run
that resumes it on another.

Example:

>>> import tempfile
>>> out = tempfile.mkdtemp()
>>> write_text_atomic(os.path.join(out, "notes.txt"), "mine")
>>> with output_lock(out), recording_outputs(out, "example"):
...     write_text_atomic(os.path.join(out, "logs", "train.txt"), "loss 1.0")
>>> recorded_outputs(out)
['logs/train.txt']
>>> remove_recorded_outputs(out, "example"), sorted(os.listdir(out))
(['logs/train.txt'], ['notes.txt'])
>>> check_not_over_inputs(out, "output_dir", [("init_model_dir", out)])
Traceback (most recent call last):
bert_keras.common.outputs.OutputOverInputError: --output_dir=... is --init_model_dir=...: ...
"""

import contextlib
import fnmatch
import json
import os
import socket
import sys

from bert_keras.common.errors import BertKerasError
from bert_keras.common.files import file_system, is_remote, write_json_atomic, write_text_atomic

MANIFEST_NAME = "bert_keras_outputs.json"
# While a tool runs: what was in the directory when it started (so that the next run can list
# what a killed run wrote).
RUNNING_NAME = "bert_keras_outputs.running.json"
LOCK_NAME = "bert_keras.lock"
# Files of a model directory (bert_keras's and Hugging Face's) and of a TensorFlow checkpoint:
# an output directory that holds one of these, not written there by the same tool, is refused.
MODEL_FILES = ("bert_config.json", "config.json", "model.safetensors", "vocab.txt",
               "task_config.json", "pytorch_model.bin", "tf_model.h5", "saved_model.pb",
               "checkpoints", "checkpoint")
# The files of a checkpoints/ folder that are a checkpoint (a note of the user's there is not).
CHECKPOINT_PATTERNS = ("checkpoint", "ckpt-*", "*.index", "*.data-*", "*.h5", "*.npz",
                       "*.weights.*", "training_metadata.json*", "run.json")


class OutputOverInputError(BertKerasError):
    """An output that would write over an input, or over files another writer left."""


class OutputInUseError(BertKerasError):
    """An output directory that another running process is writing."""


def _real(path):
    return os.path.realpath(os.path.abspath(os.fspath(path)))


def _inside(path, directory):
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def _paths(value):
    if value is None or value == "":
        return []
    if isinstance(value, (str, os.PathLike)):
        return [value]
    return [path for path in value if path]


def check_not_over_inputs(output, output_flag, inputs, writes=None):
    """Refuses (`OutputOverInputError`, naming both flags) an output that is one of the inputs,
    or an output directory that holds one: the tool would write over it.

    Args:
      output: the output file or directory.
      output_flag: its flag, e.g. "output_dir".
      inputs: [(flag, path or list of paths)]; empty values and `scheme://` paths are skipped.
      writes: the names (relative to `output`) the tool writes in it, when it writes only those:
        an input inside `output` is then refused only when it lies under one of them and is not
        a file the tool recorded there itself (`recorded_outputs`). None: the tool may write
        anywhere in `output` (it replaces the directory), so any input inside it is refused.
    """
    if not output or "://" in str(output):
        return
    out = _real(output)
    own = set(recorded_outputs(output)) if writes is not None else set()
    for flag, value in inputs:
        for path in _paths(value):
            if "://" in str(path):
                continue
            source = _real(path)
            if source == out or (os.path.isfile(source) and os.path.isfile(out)
                                 and os.path.samefile(source, out)):  # a hard link
                raise OutputOverInputError(
                    f"--{output_flag}={output} is --{flag}={path}: writing there would replace "
                    f"the input; choose another --{output_flag}")
            if not _inside(source, out):
                continue
            relative = os.path.relpath(source, out)
            if writes is not None and (relative.replace(os.sep, "/") in own or not any(
                    _inside(source, os.path.join(out, name)) for name in writes)):
                continue
            raise OutputOverInputError(
                f"--{output_flag}={output} holds --{flag}={path}: writing there would replace "
                f"the input; choose another --{output_flag} (a new or empty directory)")


def check_no_foreign_files(output, output_flag, tool, names=MODEL_FILES):
    """Refuses an output directory that holds any of `names` not written there by `tool` (a
    pre-trained model's files, another run's), or the outputs of another tool (its manifest)."""
    if not output or "://" in str(output) or not os.path.isdir(output):
        return
    manifest = _read_manifest(output)
    if manifest is None and os.path.exists(_running_path(output)):
        manifest = {"files": [], "folders": []}  # a first run that was killed
    if manifest is not None and manifest.get("tool") not in (None, tool):
        raise OutputOverInputError(
            f"--{output_flag}={output} holds the outputs of {manifest['tool']} ({MANIFEST_NAME}); "
            f"{tool} would write over them: choose another --{output_flag}")
    if manifest is not None:
        _claim_new(manifest, output)  # what a killed run of the tool wrote is the tool's too
    own = set((manifest or {}).get("files", ()))
    for name in names:
        path = os.path.join(output, name)
        if not os.path.lexists(path):
            continue
        if os.path.isdir(path):
            theirs = [os.path.join(name, entry) for entry in _files(path)
                      if os.path.join(name, entry).replace(os.sep, "/") not in own
                      and any(fnmatch.fnmatch(os.path.basename(entry), pattern)
                              for pattern in CHECKPOINT_PATTERNS)]
        else:
            theirs = [] if name in own else [name]
        if theirs:
            raise OutputOverInputError(
                f"--{output_flag}={output} holds {theirs[0]} that {tool} did not write there (a "
                f"pre-trained model's or another run's files); writing there would replace them: "
                f"choose another --{output_flag} (a new or empty directory)")


# ------------------------------------------------------------------------------- the lock
def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def acquire_lock(path, what, error=OutputInUseError):
    """Takes the lock file `path` (the pid and host of this process) for `what` (e.g. the
    directory it guards): a second writer stops with `error` naming the lock and its holder; a
    lock left by a process that is gone (killed) is taken over."""
    host = socket.gethostname()
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                with open(path, encoding="utf-8") as f:
                    holder = json.load(f)
            except (OSError, ValueError):
                holder = {}
            pid, holder_host = holder.get("pid"), holder.get("host")
            if isinstance(pid, int) and (holder_host != host or _pid_alive(pid)):
                raise error(
                    f"{what} is being written by another run (pid {pid} on {holder_host}, lock "
                    f"file {path}); wait for it to finish, or stop it and rerun to resume") from None
            print(f"{path}: taking over the lock of a run that is gone "
                  f"(pid {pid} on {holder_host})", file=sys.stderr)
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"pid": os.getpid(), "host": host}, f)
        return
    raise error(f"could not take the lock {path}")


def release_lock(path):
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)


@contextlib.contextmanager
def output_lock(directory, name=LOCK_NAME, flag="--output_dir"):
    """Holds `directory/name` while the block runs (creating `directory`); a lock this process
    already holds is held again without a second file (a tool run inside another, as the main
    job's stages). A file where the directory should be is refused (`OutputInUseError` naming
    `flag`), untouched.

    `scheme://` directories are not locked (a warning says so): an object store (Cloud Storage)
    has no atomic create, and a lock left by a preempted machine would refuse the rerun that
    resumes the run on another; one run at a time there is the user's to keep."""
    if is_remote(directory):
        if str(directory) not in _UNLOCKED:
            _UNLOCKED.add(str(directory))
            from absl import logging  # pylint: disable=import-outside-toplevel

            logging.warning("%s is not locked (an object store has no atomic create): make sure "
                            "no other run writes there at the same time", directory)
        yield
        return
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise OutputInUseError(f"{flag}={directory} is a file, not a directory")
    os.makedirs(directory, exist_ok=True)
    with _holding(os.path.join(directory, name), directory):
        yield


@contextlib.contextmanager
def lock_beside(path):
    """Holds `<path>.lock`, beside an output that is replaced whole (an export directory, whose
    own files go with it)."""
    if "://" in str(path):
        yield
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with _holding(f"{os.path.abspath(path).rstrip(os.sep)}.lock", path):
        yield


_HELD = set()
_UNLOCKED = set()  # the scheme:// directories warned about


@contextlib.contextmanager
def _holding(path, what):
    key = _real(path)
    if key in _HELD:
        yield
        return
    acquire_lock(path, what)
    _HELD.add(key)
    try:
        yield
    finally:
        _HELD.discard(key)
        release_lock(path)


# ---------------------------------------------------------------------------- the manifest
def _files(directory):
    """The files under `directory`, relative, with "/" separators (the manifest and lock files
    left out)."""
    found = []
    for folder, dirs, names in file_system(directory).walk(directory):
        dirs.sort()
        for name in sorted(names):
            if name in (MANIFEST_NAME, RUNNING_NAME, LOCK_NAME) or name.endswith(".lock"):
                continue
            found.append(os.path.relpath(os.path.join(folder, name), directory)
                         .replace(os.sep, "/"))
    return found


def _folders(directory):
    return [os.path.relpath(os.path.join(folder, name), directory).replace(os.sep, "/")
            for folder, dirs, _ in file_system(directory).walk(directory) for name in dirs]


def _read_manifest(directory):
    path = os.path.join(directory, MANIFEST_NAME)
    fs = file_system(path)
    if not fs.exists(path):
        return None
    try:
        with fs.open(path) as f:
            manifest = json.load(f)
    except ValueError as error:
        raise OutputOverInputError(f"{path}: not a manifest of bert_keras ({error}); remove it "
                                   "if it is not yours") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files", []), list):
        raise OutputOverInputError(f"{path}: not a manifest of bert_keras")
    return manifest


def _write_manifest(directory, manifest):
    write_json_atomic(os.path.join(directory, MANIFEST_NAME), manifest, sort_keys=True)


def recorded_outputs(directory):
    """The files (relative paths, "/" separators) the manifest of `directory` lists."""
    if not directory or not file_system(directory).isdir(directory):
        return []
    manifest = _read_manifest(directory) or {}
    return sorted(manifest.get("files", []))


def _running_path(directory):
    return os.path.join(directory, RUNNING_NAME)


def _claim_new(manifest, directory, running=None):
    """Adds to `manifest` the files and folders new since a run started (`running`: what was
    there then; by default the record a killed run left, `RUNNING_NAME`)."""
    if running is None:
        path = _running_path(directory)
        fs = file_system(path)
        if not fs.exists(path):
            return
        try:
            with fs.open(path) as f:
                running = json.load(f)
        except ValueError:
            return  # killed while writing it: nothing was written after it
    # A listed file that is gone (removed by --start_over) is no longer the tool's: a file of
    # the user's may take its name.
    files, folders = set(_files(directory)), set(_folders(directory))
    manifest["files"] = sorted((set(manifest.get("files", ())) & files)
                               | (files - set(running.get("files", ()))))
    manifest["folders"] = sorted((set(manifest.get("folders", ())) & folders)
                                 | (folders - set(running.get("folders", ()))))


@contextlib.contextmanager
def recording_outputs(directory, tool):
    """Lists in `directory`'s manifest every file and folder that appears there while the block
    runs: they are `tool`'s (take `output_lock` first). What was there before is not listed;
    if the process is killed, the next run lists what this one wrote (from `RUNNING_NAME`, what
    was there when it started). A run that writes nothing leaves the manifest as it was.
    A `scheme://` directory goes through `tf.io.gfile` (`files.file_system`)."""
    fs = file_system(directory)
    fs.makedirs(directory)
    earlier = _read_manifest(directory)
    manifest = dict(earlier or {"tool": tool, "files": [], "folders": []})
    _claim_new(manifest, directory)
    manifest["tool"] = manifest.get("tool") or tool
    running = {"pid": os.getpid(), "files": _files(directory), "folders": _folders(directory)}
    write_json_atomic(_running_path(directory), running)
    try:
        yield
    finally:
        if fs.isdir(directory):
            _claim_new(manifest, directory, running)
            if manifest != earlier and (earlier is not None or manifest["files"]
                                        or manifest["folders"]):
                _write_manifest(directory, manifest)
            with contextlib.suppress(FileNotFoundError):
                fs.remove(_running_path(directory))


def record_outputs(directory, tool, names):
    """Lists `names` (relative to `directory`, written by `tool`) in its manifest."""
    manifest = _read_manifest(directory) or {"tool": tool, "files": [], "folders": []}
    manifest["files"] = sorted(set(manifest.get("files", ()))
                               | {name.replace(os.sep, "/") for name in names})
    _write_manifest(directory, manifest)


def remove_recorded_outputs(directory, tool, fallback=()):
    """`--start_over`: removes the files `directory`'s manifest lists (those `tool` wrote), the
    folders it created once they are empty, and the manifest; nothing else. Without a manifest
    (a directory written before there was one), the names in `fallback` that are files.
    Returns the relative paths of the files removed."""
    fs = file_system(directory or "")
    if not directory or not fs.isdir(directory):
        return []
    manifest = _read_manifest(directory)
    if manifest is None:
        names = [name for name in fallback if fs.isfile(os.path.join(directory, name))]
        manifest = {"files": names, "folders": []}  # and what a killed first run wrote
    elif manifest.get("tool") not in (None, tool):
        raise OutputOverInputError(f"{directory} holds the outputs of {manifest['tool']} "
                                   f"({MANIFEST_NAME}), not of {tool}: --start_over removes only "
                                   f"{tool}'s; choose another output directory")
    _claim_new(manifest, directory)
    removed = []
    for name in manifest.get("files", ()):
        path = os.path.join(directory, *name.split("/"))
        if fs.isfile(path) or fs.islink(path):
            fs.remove(path)
            removed.append(name)
    for name in sorted(manifest.get("folders", ()), key=lambda name: -name.count("/")):
        path = os.path.join(directory, *name.split("/"))
        if fs.isdir(path) and not fs.islink(path) and not fs.listdir(path):
            fs.rmdir(path)
    for name in (MANIFEST_NAME, RUNNING_NAME):
        with contextlib.suppress(FileNotFoundError):
            fs.remove(os.path.join(directory, name))
    return removed


__all__ = ["MANIFEST_NAME", "RUNNING_NAME", "LOCK_NAME", "MODEL_FILES", "CHECKPOINT_PATTERNS",
           "OutputOverInputError", "OutputInUseError",
           "check_not_over_inputs", "check_no_foreign_files", "acquire_lock", "release_lock",
           "output_lock", "lock_beside", "recorded_outputs", "recording_outputs", "record_outputs",
           "remove_recorded_outputs"]
