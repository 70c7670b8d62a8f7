"""Keras models and the preprocessor of a model directory, each built on one `ModelDir` read.

Example (a directory written here, then loaded):

>>> import os, tempfile, numpy as np, bert_keras
>>> from bert_keras.model import checkpoint_names
>>> from bert_keras.modeldir.model_dir import write_model_dir
>>> config = bert_keras.BertConfig.from_preset("tiny", vocab_size=6)
>>> vocab = bert_keras.Vocabulary(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello"])
>>> weights = checkpoint_names.collect_weights(
...     checkpoint_names.encoder_weight_map(bert_keras.build_encoder(config)))
>>> path = os.path.join(tempfile.mkdtemp(), "model")
>>> write_model_dir(path, config, vocab, True, weights)
>>> encoder = load_encoder(path)
>>> inputs = load_preprocessor(path, seq_length=4)(["Hello"])
>>> inputs["input_word_ids"].numpy().tolist()
[[2, 5, 3, 0]]
>>> encoder(inputs)["pooled_output"].shape
TensorShape([1, 128])
"""

from bert_keras.model import checkpoint_names
from bert_keras.model.encoder import build_encoder
from bert_keras.model.pretraining_model import build_pretraining_model, pretraining_weight_map
from bert_keras.modeldir.model_dir import ModelDir
from bert_keras.text.preprocessor import BertPreprocessor


def load_encoder(model_dir, causal=None, dtype=None):
    """Builds the encoder of a model directory (a path or a `ModelDir`) and loads its weights.

    The attention is causal when the directory's `bert_config.json` says `causal_attention`
    (a model pre-trained left to right, and what is fine-tuned from it); `causal` overrides it.

    Raises `WeightsError` naming the file and variable when a weight is missing or has the
    wrong shape, and `VocabularyError` when `vocab.txt` does not match `vocab_size`.
    """
    model_dir = ModelDir.of(model_dir)
    encoder = build_encoder(model_dir.config, causal=causal, dtype=dtype)
    checkpoint_names.assign_weights(checkpoint_names.encoder_weight_map(encoder),
                                    model_dir.weights, source=model_dir.weights_file)
    return encoder


def load_pretraining_model(model_dir, causal=None, next_sentence=True, dtype=None,
                           require_heads=False):
    """Builds the pre-training model of a model directory and loads every weight it holds.

    The heads are taken from the directory when present; with `require_heads=False` a directory
    holding only encoder weights (e.g. converted from a checkpoint without heads) leaves the
    heads freshly initialized.
    """
    model_dir = ModelDir.of(model_dir)
    model = build_pretraining_model(model_dir.config, causal=causal,
                                    next_sentence=next_sentence, dtype=dtype)
    arrays = model_dir.weights
    variable_map = pretraining_weight_map(model)
    head_names = [name for name in variable_map if name.startswith("cls/")]
    has_heads = any(name in arrays for name in head_names)
    allow_missing = () if (require_heads or has_heads) else head_names
    checkpoint_names.assign_weights(variable_map, arrays, source=model_dir.weights_file,
                                    allow_missing=allow_missing)
    return model


def load_preprocessor(model_dir, seq_length=128):
    """The `BertPreprocessor` of a model directory (its vocab.txt and casing)."""
    model_dir = ModelDir.of(model_dir)
    return BertPreprocessor(model_dir.vocab_file, model_dir.do_lower_case, seq_length=seq_length)


__all__ = ["load_encoder", "load_pretraining_model", "load_preprocessor"]
