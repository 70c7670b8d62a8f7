"""Model directories: the currency between every step of the pipeline.

A model directory holds

- `bert_config.json`: the original BERT config fields (see `BertConfig`), plus
  `layer_norm_eps` and `causal_attention` (true for a left-to-right model: every encoder built
  from the directory then attends only to earlier positions);
- `vocab.txt`: the WordPiece vocabulary, one token per line;
- `tokenizer_config.json`: `{"do_lower_case": true|false}`, the casing the vocabulary needs;
- `model.safetensors`: the weights, named with the original BERT checkpoint names
  (`bert/embeddings/word_embeddings`, `bert/encoder/layer_0/attention/self/query/kernel`,
  `cls/predictions/output_bias`, ...), so that a directory can be read without this package;
- optionally `task_config.json`, written by fine-tuning (task name, label names, head kind).

A directory may be on a bucket (`gs://bucket/model`, any `scheme://` path of `tf.io.gfile`):
it is written and read through `tf.io.gfile` (`bert_keras.common.files.file_system`); the
vocabulary's tokenizers read a local file, so `ModelDir.vocab_file` of such a directory is a
local copy of its `vocab.txt`.

Example:

>>> import os, tempfile, numpy as np
>>> from bert_keras.model.config import BertConfig
>>> from bert_keras.text.vocab import Vocabulary
>>> config = BertConfig.from_preset("tiny", vocab_size=6)
>>> vocab = Vocabulary(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello"])
>>> path = os.path.join(tempfile.mkdtemp(), "model")
>>> write_model_dir(path, config, vocab, True, {"bert/pooler/dense/bias": np.zeros(128, "float32")})
>>> model = ModelDir(path)
>>> model.config.num_hidden_layers, len(model.vocab), model.do_lower_case, model.task_config
(2, 6, True, None)
>>> sorted(model.weights)
['bert/pooler/dense/bias']
"""

import functools
import json
import os

import numpy as np

from bert_keras.common.errors import BertKerasError
from bert_keras.common.files import (atomic_path, file_system, is_remote, local_copy,
                                     write_json_atomic)
from bert_keras.model.config import BertConfig, ConfigError
from bert_keras.text.vocab import Vocabulary, VocabularyError

CONFIG_NAME = "bert_config.json"
VOCAB_NAME = "vocab.txt"
TOKENIZER_CONFIG_NAME = "tokenizer_config.json"
WEIGHTS_NAME = "model.safetensors"
TASK_CONFIG_NAME = "task_config.json"
# Written by pre-training (`bert_keras.pretraining.run`): the options of the run.
PRETRAINING_OPTIONS_NAME = "pretraining_options.json"


class ModelDirError(BertKerasError):
    """A model directory is incomplete or inconsistent."""


def _require(model_dir, name):
    path = os.path.join(model_dir, name)
    if not file_system(path).exists(path):
        raise ModelDirError(f"{model_dir}: missing {name}")
    return path


def read_config(model_dir):
    """The `BertConfig` of a model directory.

    A directory pre-trained left to right before `bert_config.json` had `causal_attention`
    says so only in `pretraining_options.json` (`"left_to_right": true`); it is read as causal.
    """
    path = _require(model_dir, CONFIG_NAME)
    if is_remote(path):
        config = BertConfig.from_dict(_read_json(path, ConfigError), source=path)
    else:
        config = BertConfig.from_json_file(path)
    if (not config.causal_attention and _pretrained_left_to_right(model_dir)
            and "causal_attention" not in _read_optional_json(path)):
        config.causal_attention = True
    return config


def _read_optional_json(path):
    """The JSON value of `path`, or None when there is no such file."""
    if not file_system(path).exists(path):
        return None
    return _read_json(path)


def _read_json(path, error_class=None):
    try:
        with file_system(path).open(path) as f:
            return json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise (error_class or ModelDirError)(f"{path}: malformed JSON ({error})") from error


def _pretrained_left_to_right(model_dir):
    options = _read_optional_json(os.path.join(model_dir, PRETRAINING_OPTIONS_NAME))
    return isinstance(options, dict) and options.get("left_to_right") is True


def read_do_lower_case(model_dir, vocab=None):
    """Whether the vocabulary of a model directory expects lower-cased, accent-stripped text;
    `ModelDirError` when tokenizer_config.json says another casing than the vocabulary has
    (`vocab`: the directory's `Vocabulary`, when read already)."""
    path = _require(model_dir, TOKENIZER_CONFIG_NAME)
    try:
        with file_system(path).open(path) as f:
            values = json.load(f)
        value = values["do_lower_case"]
    except (json.JSONDecodeError, KeyError, TypeError) as error:
        raise ModelDirError(f"{path}: expected {{\"do_lower_case\": true|false}} ({error})") from error
    if not isinstance(value, bool):
        raise ModelDirError(f"{path}: do_lower_case must be true or false, got {value!r}")
    if vocab is None and file_system(model_dir).exists(os.path.join(model_dir, VOCAB_NAME)):
        vocab = _read_vocab_file(os.path.join(model_dir, VOCAB_NAME))
    if vocab is not None and value != vocab.is_uncased():
        # An uncased vocabulary read without lower-casing maps every capitalized word to [UNK]
        # or pieces; a cased one read with it never sees its capitalized tokens.
        kind = "an uncased" if vocab.is_uncased() else "a cased"
        raise ModelDirError(
            f"{path}: do_lower_case is {str(value).lower()}, but "
            f"{os.path.join(model_dir, VOCAB_NAME)} is {kind} vocabulary; set it to "
            f"{str(vocab.is_uncased()).lower()} (or rebuild the model directory with the right "
            "casing)")
    return value


def vocab_path(model_dir):
    return _require(model_dir, VOCAB_NAME)


def _read_vocab_file(path):
    """`Vocabulary.from_file`, of a local copy for a `scheme://` path (errors name `path`)."""
    if not is_remote(path):
        return Vocabulary.from_file(path)
    local = local_copy(path)
    try:
        vocab = Vocabulary.from_file(local)
    except VocabularyError as error:
        raise VocabularyError(str(error).replace(local, path)) from None
    vocab.path = path
    return vocab


def read_vocab(model_dir, config=None):
    """The `Vocabulary` of a model directory, checked against the config's vocab_size."""
    vocab = _read_vocab_file(vocab_path(model_dir))
    config = config or read_config(model_dir)
    vocab.check_size(config.vocab_size, os.path.join(model_dir, CONFIG_NAME))
    return vocab


def read_task_config(model_dir):
    """The fine-tuning task description of a model directory, or None."""
    return _read_optional_json(os.path.join(model_dir, TASK_CONFIG_NAME))


def read_weights(model_dir):
    """All weights of a model directory as {original name: np.ndarray}."""
    from safetensors.numpy import load_file

    path = _require(model_dir, WEIGHTS_NAME)
    try:
        if is_remote(path):
            from safetensors.numpy import load  # pylint: disable=import-outside-toplevel

            with file_system(path).open(path, "rb") as f:
                return load(f.read())
        return load_file(path)
    except Exception as error:
        raise ModelDirError(f"{path}: cannot read safetensors weights ({error})") from error


def check_seq_length(config, seq_length, flag="--max_seq_length", source=None, error=None):
    """Refuses a sequence length longer than the positions of `config`, the one such check.

    `flag` names the setting at fault, `source` where the config comes from (a model directory,
    a config file or a preset), `error` the error class to raise (`ModelDirError` by default).
    """
    if seq_length > config.max_position_embeddings:
        where = f" ({source})" if source else ""
        raise (error or ModelDirError)(
            f"{flag}: {seq_length} is longer than the model's max_position_embeddings "
            f"{config.max_position_embeddings}{where}; lower {flag} or pick a model with more "
            "positions")


class ModelDir:
    """A model directory read once: `config` (`BertConfig`), `vocab` (`Vocabulary`, checked
    against the config's vocab_size), `do_lower_case`, `task_config` (dict or None) and, read on
    first use, `weights` ({original name: np.ndarray}) and `pretraining_options` (dict or None).

    Every step reads a model directory through one `ModelDir` and hands it down as a value.
    Raises `ModelDirError` (or `ConfigError` / `VocabularyError`) naming the file at fault.
    """

    _vocab_copy = None  # vocab_file of a scheme:// directory

    def __init__(self, path):
        self.path = os.fspath(path)
        self.config = read_config(self.path)
        self.vocab = read_vocab(self.path, self.config)
        self.do_lower_case = read_do_lower_case(self.path, self.vocab)
        self.task_config = read_task_config(self.path)

    @classmethod
    def of(cls, model_dir):
        """`model_dir` itself when it is a `ModelDir`, else the `ModelDir` of that path."""
        return model_dir if isinstance(model_dir, cls) else cls(model_dir)

    @property
    def vocab_file(self):
        """`vocab.txt`'s path; of a `scheme://` directory, a local copy (the tokenizers read
        local files)."""
        path = os.path.join(self.path, VOCAB_NAME)
        if is_remote(path):
            if self._vocab_copy is None:
                self._vocab_copy = local_copy(path)
            return self._vocab_copy
        return path

    @property
    def config_file(self):
        return os.path.join(self.path, CONFIG_NAME)

    @property
    def weights_file(self):
        """The weights' path, as errors name it."""
        return os.path.join(self.path, WEIGHTS_NAME)

    @functools.cached_property
    def weights(self):
        return read_weights(self.path)

    @functools.cached_property
    def pretraining_options(self):
        """The options of the pre-training run that wrote the directory, or None."""
        return _read_optional_json(os.path.join(self.path, PRETRAINING_OPTIONS_NAME))

    def check_seq_length(self, seq_length, flag="--max_seq_length", error=None):
        """Refuses a sequence length longer than the directory's positions (`check_seq_length`)."""
        check_seq_length(self.config, seq_length, flag, self.config_file, error)

    def __repr__(self):
        return f"ModelDir({self.path!r})"


def write_model_dir(output_dir, config, vocab, do_lower_case, weights=None, task_config=None):
    """Writes a model directory, the only writer of one; each file is written atomically.

    Args:
      output_dir: directory to create or update.
      config: a `BertConfig`.
      vocab: a `Vocabulary` or a path to a vocab file; its size must equal `config.vocab_size`.
      do_lower_case: the casing the vocabulary expects.
      weights: {original checkpoint name: array}; None writes the description only (config,
        vocabulary, casing), as pre-training does before its first weights.
      task_config: optional JSON-serializable dict written to `task_config.json`.
    """
    from safetensors.numpy import save_file

    if not isinstance(vocab, Vocabulary):
        vocab = Vocabulary.from_file(vocab)
    vocab.check_size(config.vocab_size)
    file_system(output_dir).makedirs(output_dir)
    config.to_json_file(os.path.join(output_dir, CONFIG_NAME))
    vocab.write(os.path.join(output_dir, VOCAB_NAME))
    write_json_atomic(os.path.join(output_dir, TOKENIZER_CONFIG_NAME),
                      {"do_lower_case": bool(do_lower_case)})
    if task_config is not None:
        write_json_atomic(os.path.join(output_dir, TASK_CONFIG_NAME), task_config, sort_keys=True)
    if weights is None:
        return
    arrays = {name: np.ascontiguousarray(np.asarray(value)) for name, value in weights.items()}
    with atomic_path(os.path.join(output_dir, WEIGHTS_NAME)) as temporary:
        save_file(arrays, temporary, metadata={"format": "bert_keras", "names": "original_bert"})
        os.chmod(temporary, 0o644)


__all__ = [
    "CONFIG_NAME", "VOCAB_NAME", "TOKENIZER_CONFIG_NAME", "WEIGHTS_NAME", "TASK_CONFIG_NAME",
    "PRETRAINING_OPTIONS_NAME",
    "ModelDir", "ModelDirError", "ConfigError", "check_seq_length", "read_config", "read_do_lower_case", "read_vocab", "vocab_path",
    "read_task_config", "read_weights", "write_model_dir",
]
