"""load_preprocessor: the in-graph tokenizer and packing against the pure-Python reference."""

import os

import numpy as np
import pytest
import tensorflow as tf

import bert_keras
from bert_keras.modeldir import convert
from helpers.model_fixtures import minilm_hf_dir
from helpers.reference_tokenization import ReferenceTokenizer
from helpers.support import TESTS_DIR

FIXTURES = os.path.join(TESTS_DIR, "fixtures")


@pytest.fixture(scope="module")
def minilm_dir(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("minilm"))
    convert.convert_hf_checkpoint(minilm_hf_dir(), directory)
    return directory


def _lines(count):
    with open(os.path.join(FIXTURES, "pretraining_wikitext.txt"), encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()]
    return lines[:count]


def _reference_inputs(reference, text_a, text_b, seq_length):
    a = [piece for word in reference.tokenize(text_a) for piece in word]
    b = None if text_b is None else [piece for word in reference.tokenize(text_b) for piece in word]
    limit = seq_length - (2 if b is None else 3)
    if b is None:
        a = a[:limit]
    else:
        while len(a) + len(b) > limit:
            (a if len(a) > len(b) else b).pop()
    cls, sep = reference.token_to_id["[CLS]"], reference.token_to_id["[SEP]"]
    ids = [cls] + a + [sep] + ([] if b is None else b + [sep])
    types = [0] * (len(a) + 2) + ([] if b is None else [1] * (len(b) + 1))
    pad = seq_length - len(ids)
    return ids + [0] * pad, [1] * len(ids) + [0] * pad, types + [0] * pad


def test_single_segments_match_the_reference(minilm_dir):
    lines = _lines(60) + ["", "Ünïcödé café, 東京 — naïve", "a" * 250]
    preprocessor = bert_keras.load_preprocessor(minilm_dir, seq_length=48)
    reference = ReferenceTokenizer.from_file(os.path.join(minilm_dir, "vocab.txt"), lower_case=True)
    outputs = preprocessor(tf.constant(lines))
    for row, line in enumerate(lines):
        expected = _reference_inputs(reference, line, None, 48)
        got = [outputs[name].numpy()[row].tolist()
               for name in ("input_word_ids", "input_mask", "input_type_ids")]
        assert got == list(expected), line


def test_pairs_match_the_reference_and_work_in_tf_data(minilm_dir):
    lines = _lines(40)
    first, second = lines[:20], lines[20:]
    preprocessor = bert_keras.load_preprocessor(minilm_dir, seq_length=32)
    reference = ReferenceTokenizer.from_file(os.path.join(minilm_dir, "vocab.txt"), lower_case=True)
    dataset = tf.data.Dataset.from_tensor_slices((first, second)).batch(8).map(
        lambda a, b: preprocessor([a, b]))
    word_ids = np.concatenate([batch["input_word_ids"].numpy() for batch in dataset])
    types = np.concatenate([batch["input_type_ids"].numpy() for batch in dataset])
    for row, (a, b) in enumerate(zip(first, second)):
        expected_ids, _, expected_types = _reference_inputs(reference, a, b, 32)
        assert word_ids[row].tolist() == expected_ids
        assert types[row].tolist() == expected_types


def test_encoder_on_raw_text(minilm_dir):
    preprocessor = bert_keras.load_preprocessor(minilm_dir, seq_length=16)
    encoder = bert_keras.load_encoder(minilm_dir)
    outputs = encoder(preprocessor(tf.constant(["Hello world!", "BERT reads both directions."])))
    assert outputs["sequence_output"].shape == (2, 16, 384)
    assert outputs["pooled_output"].shape == (2, 384)


def test_vocabulary_without_special_tokens_is_refused(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\nhello\n")
    with pytest.raises(ValueError, match=r"vocab\.txt: missing special token\(s\) \['\[CLS\]'"):
        bert_keras.BertPreprocessor(str(vocab), lower_case=True)
