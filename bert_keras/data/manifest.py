"""What training reads back of a `create_pretraining_data` run split over several copies
(`--num_tasks/--task_index`, one copy a machine: see deploy/): whether every task's records are
there.

Each task writes `task-<index>-of-<tasks>-shard-*.tfrecord`, its `manifest.json` (which
records `num_tasks`) and, last, its `stats.json`. `bert_keras.data.records.check_complete_run`
checks the shards of each task; `check_all_tasks` checks that no task is missing as a whole (a
copy that never ran, or whose output was not copied to the shared storage).

Example:

>>> task_of("gs://bucket/seq128/task-00002-of-00004-shard-00000-of-00016.tfrecord")
(2, 4)
>>> task_of("data/part-00000.tfrecord") is None
True
"""

import json
import os
import re

from bert_keras.data.records import RecordsError

_TASK = re.compile(r"^task-(?P<index>\d{5})-of-(?P<total>\d{5})-")


def task_of(path):
    """(task index, number of tasks) of a file written by one task of a split data run, or
    None for any other file."""
    match = _TASK.match(os.path.basename(path))
    return (int(match["index"]), int(match["total"])) if match else None


def manifest_name(index, total):
    """The manifest file of task `index` of `total` (the data tool's name for it)."""
    return f"task-{index:05d}-of-{total:05d}-manifest.json"


def _recorded_tasks(folder, index, total):
    """`num_tasks` as the manifest of task `index` in `folder` records it (None: no manifest)."""
    import tensorflow as tf

    path = os.path.join(folder, manifest_name(index, total))
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        return int(json.load(f)["num_tasks"])


def check_all_tasks(files):
    """Refuses record files of a split data run when some of its tasks have no file among
    `files`: training would see part of the corpus without saying so. A run is the files with
    one number of tasks; the number is the manifests' (`num_tasks`), checked against the names.
    Raises `RecordsError` naming the missing task indices, the folder and the command that
    writes them; files of unsplit runs are not checked.
    """
    runs = {}  # number of tasks -> {task index: folder of its first file}
    for path in files:
        task = task_of(path)
        if task:
            runs.setdefault(task[1], {}).setdefault(task[0], os.path.dirname(path))
    for total, present in sorted(runs.items()):
        index, folder = min(present.items())
        recorded = _recorded_tasks(folder, index, total)
        if recorded is not None and recorded != total:
            raise RecordsError(
                f"{os.path.join(folder, manifest_name(index, total))} records num_tasks "
                f"{recorded}, but its files are named for {total} tasks: they were renamed or "
                "mixed with another run's")
        missing = sorted(set(range(total)) - set(present))
        if missing:
            source = (f"{manifest_name(index, total)} records num_tasks {total}" if recorded
                      else f"the file names say {total} tasks")
            indices = ", ".join(str(i) for i in missing)
            raise RecordsError(
                f"{folder}: the data run was split into {total} tasks ({source}), but no records "
                f"of task(s) {indices} are among the input files (task-{missing[0]:05d}-of-"
                f"{total:05d}-shard-*.tfrecord); run create_pretraining_data --num_tasks={total} "
                f"--task_index=<each of {indices}> with the same flags into the same "
                "--output_dir (or copy their output there) instead of training on part of the "
                "data")


__all__ = ["check_all_tasks", "task_of", "manifest_name"]
