"""The task catalog: the one place that reads a task name and lists the families.

Task names: `glue/<cola|sst2|mrpc|stsb|qqp|mnli|qnli|rte|wnli>` (case-insensitive; `glue/SST-2`
also works), `squad_v1`, `squad_v2`, `swag`, `conll2003` (or `conll`). A name belongs to one
*family* (`glue`, `squad`, `swag`, `conll`), the word used for the kind of a task everywhere.
Each family is a folder declaring its task, heads, serving and lite export
(`bert_keras.finetuning.tasks.family.Family`); a fine-tuned model directory's head
(task_config.json's "head") leads to the family that declared it (`head`, `family_of_head`).

Example:

>>> parse_task_name("GLUE/SST-2")
TaskName(name='glue/sst2', family='glue', glue_task='sst2')
>>> parse_task_name("squad_v2").family, parse_task_name("conll").name
('squad', 'conll2003')
>>> family_of_head("span").name, head("classification").layer_name
('squad', 'classifier')
>>> parse_task_name("glue/sst5")
Traceback (most recent call last):
ValueError: unknown GLUE task 'sst5'; known: cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli
"""

import dataclasses

from bert_keras.finetuning.conll.family import CONLL
from bert_keras.finetuning.glue import data as glue
from bert_keras.finetuning.glue.family import GLUE
from bert_keras.finetuning.squad.family import SQUAD
from bert_keras.finetuning.swag.family import SWAG
from bert_keras.finetuning.tasks.models import TaskModelError

# family name -> its declaration
FAMILIES = {family.name: family for family in (GLUE, SQUAD, SWAG, CONLL)}
# head kind (task_config.json's "head") -> the first family declaring it (a family may reuse
# another's head, e.g. a sentence classification task GLUE's classifier, with its serving)
_FAMILY_OF_HEAD = {}
for _family in FAMILIES.values():
    for _kind in _family.head_kinds:
        _FAMILY_OF_HEAD.setdefault(_kind, _family)
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


def family_of_head(kind):
    """The `Family` declaring the head `kind`; TaskModelError naming the known heads."""
    if kind not in _FAMILY_OF_HEAD:
        raise TaskModelError(f"unknown head {kind!r}; known: {', '.join(_FAMILY_OF_HEAD)}")
    return _FAMILY_OF_HEAD[kind]


def head(kind):
    """The `Head` of kind `kind` (task_config.json's "head")."""
    return next(head for head in family_of_head(kind).heads if head.kind == kind)


def served_heads():
    """The head kinds served from raw text (`--kind=task`), in catalog order."""
    return tuple(kind for kind, family in _FAMILY_OF_HEAD.items() if kind in family.serving)


def lite_heads():
    """The head kinds with a TensorFlow Lite export (`--kind=lite`), in catalog order."""
    return tuple(kind for kind, family in _FAMILY_OF_HEAD.items() if kind in family.lite)


__all__ = ["FAMILIES", "TaskName", "parse_task_name", "family_of_head", "head", "served_heads",
           "lite_heads"]
