"""Shared helpers for the fine-tuning tests: a tiny random model directory whose vocabulary
covers the words of the fixture files, and task data folders built from tests/fixtures."""

import os
import shutil

import keras

from bert_keras.finetuning.tasks.words import basic_tokenize
from bert_keras.model import checkpoint_names
from bert_keras.model.config import BertConfig
from bert_keras.model.encoder import build_encoder
from bert_keras.modeldir import model_dir
from bert_keras.text.vocab import SPECIAL_TOKENS, Vocabulary
from helpers.support import TESTS_DIR

FIXTURES = os.path.join(TESTS_DIR, "fixtures")


def fixture(*parts):
    return os.path.join(FIXTURES, *parts)


def data_dir(tmp_path, files):
    """A folder holding copies of fixture files: {name in the folder: fixture path}."""
    folder = tmp_path / "data"
    folder.mkdir(exist_ok=True)
    for name, source in files.items():
        shutil.copyfile(source, folder / name)
    return str(folder)


def vocab_tokens(paths):
    """The special tokens and every lower-cased basic token of the files, sorted."""
    words = set()
    for path in paths:
        with open(path, encoding="utf-8") as f:
            words.update(basic_tokenize(f.read(), do_lower_case=True))
    return list(SPECIAL_TOKENS) + sorted(words - set(SPECIAL_TOKENS))


def tiny_model_dir(tmp_path, paths, seed=0, name="init_model", causal_attention=False):
    """A model directory of the "tiny" preset (2 layers, hidden 128) with random weights;
    `causal_attention=True` makes it a left-to-right model's."""
    tokens = vocab_tokens(paths)
    config = BertConfig.from_preset("tiny", vocab_size=len(tokens), max_position_embeddings=128,
                                    causal_attention=causal_attention)
    keras.utils.set_random_seed(seed)
    encoder = build_encoder(config)
    out = str(tmp_path / name)
    model_dir.write_model_dir(out, config, Vocabulary(tokens), True,
                              checkpoint_names.collect_weights(
                                  checkpoint_names.encoder_weight_map(encoder)))
    return out


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()
