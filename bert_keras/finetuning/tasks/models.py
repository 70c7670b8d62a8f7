"""What every family's model builder shares: the encoder (built from a `BertConfig` or given),
BERT's initializer, and the model's record of its head (`head_spec`).

A task model is a functional `keras.Model` over the encoder's inputs (`input_word_ids`,
`input_mask`, `input_type_ids`, int32) with float32 logits as outputs, carrying
`model.encoder`, `model.head` and `model.head_spec`: the head fields of task_config.json
("head", "head_name", "outputs", "head_config", and the family's own).
"""

import keras

from bert_keras.common.errors import BertKerasError
from bert_keras.model.config import BertConfig
from bert_keras.model.encoder import build_encoder

TASK_PREFIX = "task/"


class TaskModelError(BertKerasError):
    """A fine-tuned model directory or a model request is inconsistent."""


def initializer(initializer_range):
    """The task heads' kernel initializer: a normal distribution of standard deviation
    `initializer_range`, as Hugging Face's heads.

    The original release draws heads from a truncated normal (`stddev=initializer_range`, cut at
    two standard deviations), whose standard deviation is 0.88 x `initializer_range`. In
    fine-tuning a head hardly moves (at learning rate 5e-5, 94 steps of CoNLL-2003-shaped
    tagging took its kernel's standard deviation from 0.0176 to 0.0179), so its initial scale
    is the logits' scale for the whole run, and the smaller one learns more slowly: training
    loss 0.94-0.96 after the first epoch against Hugging Face's 0.85-0.87 on 3 of 3 seeds, and
    0.850 with this initializer (`docs/benchmarks.md`, token tagging on the CoNLL-shaped set).
    The encoder's own weights keep the original's truncated normal.
    """
    return keras.initializers.RandomNormal(stddev=initializer_range)


def dense_weights(prefix, layer):
    """{"<prefix>kernel", "<prefix>bias"} of a dense layer, for a head's `weight_map()`."""
    return {f"{prefix}kernel": layer.kernel, f"{prefix}bias": layer.bias}


def encoder_and_range(encoder_or_config, dtype):
    """(encoder, initializer_range) from a BertConfig or an already built encoder."""
    if isinstance(encoder_or_config, BertConfig):
        return build_encoder(encoder_or_config, dtype=dtype), encoder_or_config.initializer_range
    if isinstance(encoder_or_config, keras.Model):
        return encoder_or_config, encoder_or_config.get_layer("embeddings").initializer_range
    raise TypeError(f"expected a BertConfig or an encoder keras.Model, got "
                    f"{type(encoder_or_config).__name__}")


def task_model(inputs, outputs, encoder, head, declared, extra=None):
    """The `keras.Model` of a task, with `encoder`, `head` and `head_spec` attached.

    declared: the `Head` of the family (`bert_keras.finetuning.tasks.family`); extra: the
    family's own task_config.json fields (e.g. {"pooling": "cls"}).
    """
    model = keras.Model(inputs, outputs, name=f"bert_{declared.kind}")
    model.encoder = encoder
    model.head = head
    spec = {"head": declared.kind, "head_name": head.name, "outputs": list(declared.outputs),
            "head_config": {key: value for key, value in head.get_config().items()
                            if key not in ("name", "trainable", "dtype")}}
    spec.update(extra or {})
    model.head_spec = spec
    return model


__all__ = ["TASK_PREFIX", "TaskModelError", "initializer", "dense_weights", "encoder_and_range",
           "task_model"]
