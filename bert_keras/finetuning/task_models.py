"""Fine-tuning models (encoder + task head), and fine-tuned model directories.

Each family builds its models beside its heads (`glue/head.py`: `build_classifier`,
`squad/head.py`: `build_span_model`, `swag/head.py`: `build_multiple_choice_model`,
`conll/head.py`: `build_token_tagger`); a builder takes a `BertConfig` (a fresh encoder is
built) or an encoder from `build_encoder` / `load_encoder`, and returns a functional
`keras.Model` whose inputs are the encoder's (`input_word_ids`, `input_mask`, `input_type_ids`,
int32) and whose outputs are float32 logits. The model carries `model.encoder`, `model.head`
and `model.head_spec` (what `task_config.json` records to rebuild it). This module holds what
every family's model shares: its weight names, and writing and reading it.

A fine-tuned model directory is an ordinary model directory (see `bert_keras.modeldir.model_dir`) whose
`model.safetensors` also holds the head's weights under "task/<head name>/<var>" and whose
`task_config.json` says how to rebuild the head:

    {"task": "glue/mrpc", "head": "classification", "head_name": "classifier",
     "head_config": {"num_classes": 2, "dropout_rate": 0.1, "initializer_range": 0.02},
     "label_names": ["0", "1"], "max_seq_length": 128, "outputs": ["logits"], ...}

`docs/finetuning.md` lists every head's variables and outputs.

Example:

>>> import bert_keras
>>> from bert_keras.finetuning.glue.head import build_classifier
>>> model = build_classifier(bert_keras.BertConfig.from_preset("tiny", vocab_size=50), num_labels=3)
>>> model.output.shape
(None, 3)
>>> [name for name in task_weight_map(model) if name.startswith("task/")]
['task/classifier/kernel', 'task/classifier/bias']
"""

import keras

from bert_keras.finetuning.conll.head import build_token_tagger
from bert_keras.finetuning.glue.head import POOLING_DESCRIPTIONS, POOLINGS, build_classifier
from bert_keras.finetuning.squad.head import build_span_model
from bert_keras.finetuning.swag.head import build_multiple_choice_model
from bert_keras.finetuning.tasks.models import TASK_PREFIX, TaskModelError
from bert_keras.model import checkpoint_names
from bert_keras.model.encoder import build_encoder
from bert_keras.modeldir import model_dir as model_dir_lib


def build_task_model(encoder_or_config, head_spec, dtype=None):
    """Rebuilds a model from a `head_spec` (the head fields of `task_config.json`), through the
    family that declares its head (`bert_keras.finetuning.catalog.head`)."""
    from bert_keras.finetuning import catalog  # the families' serving: TensorFlow

    return catalog.head(head_spec.get("head")).rebuild(encoder_or_config, head_spec, dtype)


def task_weight_map(model):
    """{name: variable}: the encoder under its original BERT names, the head under task/<head>/."""
    names = checkpoint_names.encoder_weight_map(model.encoder)
    prefix = f"{TASK_PREFIX}{model.head.name}/"
    names.update({prefix + name: variable for name, variable in model.head.weight_map().items()})
    return names


def random_encoder_weights(config, seed):
    """{original BERT name: array} of a freshly initialized encoder for `config` (BERT's
    truncated normal with standard deviation `initializer_range`, zero biases, unit LayerNorm
    gains), drawn from `seed`: what "no pre-training" starts from."""
    keras.utils.set_random_seed(seed)
    encoder = build_encoder(config)
    return checkpoint_names.collect_weights(checkpoint_names.encoder_weight_map(encoder))


def initial_head_weights(variable_map, initializer_range, seed):
    """{name: array} of a fresh task head for the `task/...` entries of `variable_map`
    (`task_weight_map`): kernels from a normal distribution of standard deviation
    `initializer_range` (the heads' initializer, `tasks.models.initializer`), biases zero, drawn
    in the map's order from `seed`.

    >>> import bert_keras
    >>> model = build_classifier(bert_keras.BertConfig.from_preset("tiny", vocab_size=50))
    >>> {k: v.shape for k, v in initial_head_weights(task_weight_map(model), 0.02, 1).items()}
    {'task/classifier/kernel': (128, 2), 'task/classifier/bias': (2,)}
    """
    import numpy as np  # pylint: disable=import-outside-toplevel

    rng = np.random.RandomState(seed)
    arrays = {}
    for name, variable in variable_map.items():
        if not name.startswith(TASK_PREFIX):
            continue
        shape = tuple(variable.shape)
        if name.endswith("kernel"):
            arrays[name] = (rng.standard_normal(shape) * initializer_range).astype("float32")
        else:
            arrays[name] = np.zeros(shape, "float32")
    return arrays


def save_task_model_dir(model, output_dir, config, vocab, do_lower_case, task_config):
    """Writes a fine-tuned model directory: encoder + head weights and `task_config.json`.

    `task_config` holds the task's own fields ("task", "label_names", "max_seq_length", ...);
    the head fields of `model.head_spec` are added to it.
    """
    full_config = dict(task_config)
    full_config.update(model.head_spec)
    full_config.setdefault("format_version", 1)
    model_dir_lib.write_model_dir(output_dir, config, vocab, do_lower_case,
                                  checkpoint_names.collect_weights(task_weight_map(model)),
                                  task_config=full_config)
    return full_config


def load_task_model(model_dir, dtype=None):
    """The fine-tuned model of a directory written by `save_task_model_dir` (a path or a
    `ModelDir`).

    Returns (model, task_config). Raises TaskModelError when the directory has no
    task_config.json, and WeightsError naming the variable when a weight is missing.
    """
    from bert_keras.modeldir.loading import load_encoder  # reads the vocabulary: TensorFlow

    model_dir = model_dir_lib.ModelDir.of(model_dir)
    task_config = model_dir.task_config
    if task_config is None:
        raise TaskModelError(f"{model_dir.path}: no {model_dir_lib.TASK_CONFIG_NAME}; this is not "
                             "a fine-tuned model directory (load_encoder reads pre-trained ones)")
    encoder = load_encoder(model_dir, dtype=dtype)
    model = build_task_model(encoder, task_config, dtype=dtype)
    checkpoint_names.assign_weights(task_weight_map(model), model_dir.weights,
                                    source=model_dir.weights_file)
    return model, task_config


__all__ = ["POOLINGS", "POOLING_DESCRIPTIONS", "build_classifier", "build_span_model",
           "build_multiple_choice_model", "build_token_tagger", "build_task_model",
           "task_weight_map", "save_task_model_dir", "load_task_model", "TaskModelError",
           "TASK_PREFIX", "random_encoder_weights", "initial_head_weights"]
