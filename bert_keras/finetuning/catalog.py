"""The task catalog: the one place that reads a task name.

Task names: `glue/<cola|sst2|mrpc|stsb|qqp|mnli|qnli|rte|wnli>` (case-insensitive; `glue/SST-2`
also works), `squad_v1`, `squad_v2`, `swag`, `conll2003` (or `conll`). A name belongs to one
*family* (`glue`, `squad`, `swag`, `conll`), the word used for the kind of a task everywhere.

Example:

>>> parse_task_name("GLUE/SST-2")
TaskName(name='glue/sst2', family='glue', glue_task='sst2')
>>> parse_task_name("squad_v2").family, parse_task_name("conll").name
('squad', 'conll2003')
>>> parse_task_name("glue/sst5")
Traceback (most recent call last):
ValueError: unknown GLUE task 'sst5'; known: cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli
"""

import dataclasses

from bert_keras.finetuning.glue import data as glue

FAMILIES = ("glue", "squad", "swag", "conll")
_OTHER_TASKS = {"squad_v1": "squad", "squad_v2": "squad", "swag": "swag",
                "conll2003": "conll", "conll": "conll"}


@dataclasses.dataclass(frozen=True)
class TaskName:
    """A parsed task name: `name` (canonical), `family`, and for GLUE the `glue_task`."""

    name: str
    family: str
    glue_task: str = None


def parse_task_name(name):
    """The `TaskName` of a task name; ValueError naming the known tasks for an unknown one."""
    key = str(name).strip().lower()
    if key.startswith("glue/"):
        spec = glue.task_spec(key.split("/", 1)[1])
        return TaskName(f"glue/{spec.name}", "glue", spec.name)
    if key in _OTHER_TASKS:
        return TaskName("conll2003" if key == "conll" else key, _OTHER_TASKS[key])
    raise ValueError(f"unknown task {name!r}; use glue/<{'|'.join(glue.TASKS)}>, squad_v1, "
                     "squad_v2, swag or conll2003")


def is_pair_task(name):
    """Whether a GLUE task takes two texts (False for a name of another family)."""
    task = parse_task_name(name)
    return task.family == "glue" and glue.task_spec(task.glue_task).text_b is not None


__all__ = ["FAMILIES", "TaskName", "parse_task_name", "is_pair_task"]
