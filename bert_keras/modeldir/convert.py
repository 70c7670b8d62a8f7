"""Converting published BERT checkpoints into model directories.

Two sources:

- a Hugging Face BERT directory (`config.json`, `vocab.txt`, `model.safetensors`);
- an original release checkpoint (`bert_model.ckpt.*` with `bert_config.json` and `vocab.txt`
  beside it), read with `tf.train.load_checkpoint`.

Example:

>>> from bert_keras.modeldir.convert import convert_hf_checkpoint
>>> convert_hf_checkpoint("all-MiniLM-L6-v2/", "models/minilm")  # doctest: +SKIP
"""

import dataclasses
import json
import os
import re

import numpy as np

from bert_keras.common import outputs
from bert_keras.common.cli import option
from bert_keras.common.errors import BertKerasError
from bert_keras.modeldir import model_dir as model_dir_lib
from bert_keras.model.checkpoint_names import (WeightsError, check_shapes, encoder_weight_shapes,
                                               pretraining_head_shapes)
from bert_keras.model.config import BertConfig
from bert_keras.text.vocab import Vocabulary


class ConversionError(BertKerasError):
    """A checkpoint cannot be converted; the message names the file."""


TOOL = "convert_checkpoint"


def check_output_dir(output_dir, inputs):
    """Refuses, before reading anything, an `output_dir` that is one of `inputs` ([(flag,
    path)]) or holds one, or holds a model this tool did not write there (naming both flags)."""
    outputs.check_not_over_inputs(output_dir, "output_dir", inputs)
    outputs.check_no_foreign_files(output_dir, "output_dir", TOOL)


def _write_model_dir(output_dir, *args):
    """`model_dir.write_model_dir` under the output directory's lock, listed in its manifest."""
    with outputs.output_lock(output_dir), outputs.recording_outputs(output_dir, TOOL):
        model_dir_lib.write_model_dir(output_dir, *args)


# ---------------------------------------------------------------- Hugging Face
def _hf_candidates(name):
    """Hugging Face names that may hold the original weight `name`, and whether to transpose."""
    if name == "cls/predictions/output_bias":
        return ["cls.predictions.bias", "cls.predictions.decoder.bias"], False
    if name == "cls/seq_relationship/output_weights":
        return ["cls.seq_relationship.weight"], False
    if name == "cls/seq_relationship/output_bias":
        return ["cls.seq_relationship.bias"], False
    path = re.sub(r"layer_(\d+)", r"layer.\1", name).replace("/", ".")
    transpose = path.endswith(".kernel")
    if path.endswith("_embeddings"):
        bases = [path + ".weight"]
    elif path.endswith(".kernel"):
        bases = [path[: -len("kernel")] + "weight"]
    elif path.endswith(".gamma"):
        bases = [path[: -len("gamma")] + "weight", path]
    elif path.endswith(".beta"):
        bases = [path[: -len("beta")] + "bias", path]
    else:
        bases = [path]
    candidates = []
    for base in bases:
        candidates.append(base)
        if base.startswith("bert."):
            candidates.append(base[len("bert."):])  # a bare BertModel has no "bert." prefix
    return candidates, transpose


def _read_safetensors(path):
    from safetensors import safe_open

    arrays = {}
    try:
        with safe_open(path, framework="numpy") as f:
            for key in f.keys():
                arrays[key] = f.get_tensor(key)
    except Exception as error:
        hint = ("; bfloat16 files need to be saved as float32 or float16 first"
                if "bf16" in str(error).lower() or "bfloat16" in str(error).lower() else
                "; the file is truncated or not a safetensors file" if "header" in str(error)
                or "EOF" in str(error) or "incomplete" in str(error) else "")
        raise ConversionError(f"{path}: cannot read safetensors ({error}){hint}") from error
    return arrays


def read_hf_weights(input_dir, config):
    """{original name: float32 array} from a Hugging Face BERT directory."""
    path = os.path.join(input_dir, "model.safetensors")
    if not os.path.exists(path):
        for legacy in ("pytorch_model.bin", "tf_model.h5"):
            if os.path.exists(os.path.join(input_dir, legacy)):
                raise ConversionError(
                    f"{os.path.join(input_dir, legacy)}: only model.safetensors is read; convert the "
                    "checkpoint to safetensors first (e.g. load it with transformers and call "
                    "save_pretrained(..., safe_serialization=True))")
        raise ConversionError(f"{input_dir}: missing model.safetensors")
    hf = _read_safetensors(path)
    arrays = {}
    expected = dict(encoder_weight_shapes(config))
    expected.update(pretraining_head_shapes(config))
    for name in expected:
        candidates, transpose = _hf_candidates(name)
        found = next((key for key in candidates if key in hf), None)
        if found is None:
            continue
        value = np.asarray(hf[found], dtype=np.float32)
        arrays[name] = value.T if transpose else value
    check_shapes(arrays, encoder_weight_shapes(config), source=path)
    _check_heads(arrays, config, source=path)
    return arrays


def _check_heads(arrays, config, source):
    heads = pretraining_head_shapes(config)
    check_shapes(arrays, heads, source=source, required=False)
    for group in ("cls/predictions/", "cls/seq_relationship/"):
        names = [name for name in heads if name.startswith(group)]
        present = [name for name in names if name in arrays]
        if present and len(present) != len(names):
            missing = sorted(set(names) - set(present))
            raise WeightsError(f"{source}: head {group.rstrip('/')} is incomplete, missing {missing}")


def convert_hf_checkpoint(input_dir, output_dir, do_lower_case=None):
    """Converts a Hugging Face BERT directory into a model directory.

    Args:
      input_dir: holds `config.json`, `vocab.txt` and `model.safetensors`.
      output_dir: the model directory to write.
      do_lower_case: the vocabulary's casing; by default `tokenizer_config.json`'s
        `do_lower_case`, else inferred from the vocabulary.
    Returns:
      The `BertConfig`.
    """
    check_output_dir(output_dir, [("input", input_dir)])
    if not os.path.isdir(input_dir):
        raise ConversionError(
            f"--input={input_dir}: not a directory; --format=hf reads a Hugging Face BERT "
            "directory (config.json, vocab.txt, model.safetensors)"
            + ("; for an original checkpoint prefix pass --format=tf1"
               if os.path.exists(input_dir + ".index") else ""))
    config = BertConfig.from_hf_config(os.path.join(input_dir, "config.json"))
    vocab = Vocabulary.from_file(os.path.join(input_dir, "vocab.txt"))
    vocab.check_size(config.vocab_size, os.path.join(input_dir, "config.json"))
    _check_casing(vocab, do_lower_case)
    if do_lower_case is None:
        tokenizer_config = os.path.join(input_dir, "tokenizer_config.json")
        if os.path.exists(tokenizer_config):
            with open(tokenizer_config, encoding="utf-8") as f:
                do_lower_case = json.load(f).get("do_lower_case")
            if do_lower_case is not None and bool(do_lower_case) != vocab.is_uncased():
                kind = "an uncased" if vocab.is_uncased() else "a cased"
                raise ConversionError(
                    f"{tokenizer_config} says do_lower_case={str(bool(do_lower_case)).lower()}, "
                    f"but {vocab.path} is {kind} vocabulary; pass --do_lower_case="
                    f"{str(vocab.is_uncased()).lower()} to convert it as the vocabulary is")
        if do_lower_case is None:
            do_lower_case = vocab.is_uncased()
    arrays = read_hf_weights(input_dir, config)
    _write_model_dir(output_dir, config, vocab, do_lower_case, arrays)
    return config


# ------------------------------------------------------------- original (TF1)
def read_tf1_weights(checkpoint_path, config):
    """{original name: float32 array} from an original release checkpoint (optimizer slots skipped)."""
    import tensorflow as tf

    try:
        reader = tf.train.load_checkpoint(checkpoint_path)
    except Exception as error:
        raise ConversionError(f"{checkpoint_path}: cannot read checkpoint ({error})") from error
    available = reader.get_variable_to_shape_map()
    expected = dict(encoder_weight_shapes(config))
    expected.update(pretraining_head_shapes(config))
    arrays = {name: np.asarray(reader.get_tensor(name), dtype=np.float32)
              for name in expected if name in available}
    check_shapes(arrays, encoder_weight_shapes(config), source=checkpoint_path)
    _check_heads(arrays, config, source=checkpoint_path)
    return arrays


def _check_casing(vocab, do_lower_case):
    """Refuses a casing asked for that the vocabulary cannot have: an uncased vocabulary used
    without lower-casing maps every capitalized word to pieces or [UNK] (and the reverse)."""
    if do_lower_case is None or bool(do_lower_case) == vocab.is_uncased():
        return
    kind = "an uncased" if vocab.is_uncased() else "a cased"
    raise ConversionError(f"{vocab.path} is {kind} vocabulary, but --do_lower_case="
                          f"{str(bool(do_lower_case)).lower()}: pass --do_lower_case="
                          f"{str(vocab.is_uncased()).lower()} (or auto)")


def convert_tf1_checkpoint(checkpoint_path, output_dir, do_lower_case=None):
    """Converts `.../bert_model.ckpt` (config and vocab beside it) into a model directory."""
    directory = os.path.dirname(checkpoint_path) or "."
    check_output_dir(output_dir, [("input", checkpoint_path), ("input", directory)])
    config = BertConfig.from_json_file(os.path.join(directory, "bert_config.json"))
    vocab = Vocabulary.from_file(os.path.join(directory, "vocab.txt"))
    vocab.check_size(config.vocab_size, os.path.join(directory, "bert_config.json"))
    _check_casing(vocab, do_lower_case)
    if do_lower_case is None:
        do_lower_case = vocab.is_uncased()
    arrays = read_tf1_weights(checkpoint_path, config)
    _write_model_dir(output_dir, config, vocab, do_lower_case, arrays)
    return config


@dataclasses.dataclass
class ConvertOptions:
    """One conversion, as `tools/convert_checkpoint.py` takes it."""

    format: str = option("hf", "hf: a Hugging Face BERT directory with model.safetensors; tf1: "
                         "an original release checkpoint prefix.", choices=("hf", "tf1"))
    input: str = option(None, "The input directory (hf) or checkpoint prefix (tf1).",
                        required=True)
    output_dir: str = option(None, "The model directory to write.", required=True)
    do_lower_case: str = option("auto", "The vocabulary's casing; auto reads "
                                "tokenizer_config.json or infers it from the vocabulary.",
                                choices=("auto", "true", "false"))

    def convert(self):
        """Writes the model directory; returns its `BertConfig`."""
        lower = {"auto": None, "true": True, "false": False}[self.do_lower_case]
        convert = convert_hf_checkpoint if self.format == "hf" else convert_tf1_checkpoint
        return convert(self.input, self.output_dir, do_lower_case=lower)
