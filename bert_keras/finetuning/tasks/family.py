"""What a task family declares: its task, the heads it trains, and how each head is served.

A family folder (`finetuning/glue/`, `squad/`, `swag/`, `conll/`) holds its reader, its
`FinetuningTask`, its heads (`head.py`), its raw-text serving and lite mapping (`serving.py`)
and, in `family.py`, one `Family` naming them; `bert_keras.finetuning.catalog` lists the
families. A fine-tuned model directory names its head in task_config.json ("head": a
`Head.kind`), and everything else (rebuilding the model, serving it from raw text, the lite
export) follows from the family that declares that head.

Example:

>>> head = Head("classification", layer_name="classifier", outputs=("logits",),
...             rebuild=lambda encoder, task_config, dtype: None)
>>> Family("news", task=object, heads=(head,)).head_kinds
('classification',)
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Head:
    """One kind of fine-tuned head, as task_config.json's "head" names it.

    kind: the "head" field; layer_name: the head layer's name (its weights are stored as
    "task/<layer_name>/<var>"); outputs: the model's output names; rebuild:
    `(encoder_or_config, task_config, dtype) -> keras.Model`, the model again from the fields
    task_config.json recorded.
    """

    kind: str
    layer_name: str
    outputs: tuple
    rebuild: object


@dataclasses.dataclass(frozen=True)
class Family:
    """A task family: the task class, its heads, their raw-text serving and lite outputs.

    task: the `FinetuningTask` subclass, called as `task(name, data_dir, model_dir, options)`;
    heads: its `Head`s; serving: {head kind: a `bert_keras.finetuning.tasks.serving.Serving`
    subclass} for the heads served from raw text; lite: {head kind: `(task_config, model) ->
    dict`, the fields lite_config.json records for the head: "outputs" (the TensorFlow Lite
    model's output names), "text_pair", and the family's own} for the heads with a lite
    export (`bert_keras.export.lite`).
    """

    name: str
    task: type
    heads: tuple
    serving: dict = dataclasses.field(default_factory=dict)
    lite: dict = dataclasses.field(default_factory=dict)

    @property
    def head_kinds(self):
        return tuple(head.kind for head in self.heads)


__all__ = ["Family", "Head"]
