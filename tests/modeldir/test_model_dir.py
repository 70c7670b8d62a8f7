import doctest
import json
import os

import numpy as np
import pytest

import bert_keras
from bert_keras.modeldir import loading, model_dir as model_dir_lib
from bert_keras.modeldir.model_dir import ModelDir, ModelDirError, write_model_dir

TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world"]


def test_docstring_examples():
    assert doctest.testmod(model_dir_lib).failed == 0
    assert doctest.testmod(loading).failed == 0


def _write(path, weights=None, task_config=None):
    config = bert_keras.BertConfig.from_preset("tiny", vocab_size=len(TOKENS))
    write_model_dir(path, config, bert_keras.Vocabulary(TOKENS), True, weights, task_config)
    return config


def test_model_dir_reads_everything_once_and_weights_on_first_use(tmp_path, monkeypatch):
    path = tmp_path / "model"
    _write(path, {"bert/pooler/dense/bias": np.arange(128, dtype="float32")},
           {"task": "glue/sst2"})
    model = ModelDir(path)
    assert (model.config.hidden_size, list(model.vocab.tokens), model.do_lower_case,
            model.task_config) == (128, TOKENS, True, {"task": "glue/sst2"})
    reads = []
    real = model_dir_lib.read_weights
    monkeypatch.setattr(model_dir_lib, "read_weights", lambda p: reads.append(p) or real(p))
    np.testing.assert_array_equal(model.weights["bert/pooler/dense/bias"], np.arange(128))
    assert model.weights is model.weights and len(reads) == 1
    assert model.weights_file == os.path.join(str(path), "model.safetensors")


def test_description_only_then_weights(tmp_path):
    """Pre-training writes config, vocabulary and casing first, the weights later."""
    path = tmp_path / "model"
    _write(path)
    assert sorted(os.listdir(path)) == ["bert_config.json", "tokenizer_config.json", "vocab.txt"]
    with pytest.raises(ModelDirError, match="missing model.safetensors"):
        ModelDir(path).weights
    _write(path, {"bert/pooler/dense/bias": np.zeros(128, "float32")})
    assert list(ModelDir(path).weights) == ["bert/pooler/dense/bias"]
    assert not [name for name in os.listdir(path) if ".tmp" in name]


def test_errors_name_the_file(tmp_path):
    path = tmp_path / "model"
    _write(path)
    with open(path / "tokenizer_config.json", "w") as f:
        json.dump({"do_lower_case": False}, f)
    with pytest.raises(ModelDirError, match="tokenizer_config.json: do_lower_case is false, but "
                       ".*vocab.txt is an uncased vocabulary; set it to true"):
        ModelDir(path)
    with open(path / "tokenizer_config.json", "w") as f:
        json.dump({"do_lower_case": "yes"}, f)
    with pytest.raises(ModelDirError, match="tokenizer_config.json: do_lower_case must be"):
        ModelDir(path)
    os.remove(path / "vocab.txt")
    with pytest.raises(ModelDirError, match="missing vocab.txt"):
        ModelDir(path)


def test_a_model_dir_on_a_bucket_is_written_and_read_through_tf_io_gfile(tmp_path, monkeypatch):
    # TensorFlow's in-memory ram:// file system stands in for a bucket (gs://).
    import tensorflow as tf

    from bert_keras.text.vocab import VocabularyError

    monkeypatch.chdir(tmp_path)
    path = "ram://bucket/test_model_dir/model"
    _write(path, {"bert/pooler/dense/bias": np.arange(128, dtype="float32")},
           {"task": "glue/sst2"})
    _write(tmp_path / "local", {"bert/pooler/dense/bias": np.arange(128, dtype="float32")},
           {"task": "glue/sst2"})
    assert os.listdir(tmp_path) == ["local"]  # nothing under a local "ram:" folder
    assert sorted(tf.io.gfile.listdir(path)) == sorted(os.listdir(tmp_path / "local"))
    for name in ("bert_config.json", "vocab.txt", "tokenizer_config.json", "task_config.json"):
        with tf.io.gfile.GFile(f"{path}/{name}", "rb") as f:
            assert f.read() == (tmp_path / "local" / name).read_bytes(), name
    model = ModelDir(path)
    assert (model.config.hidden_size, list(model.vocab.tokens), model.do_lower_case,
            model.task_config) == (128, TOKENS, True, {"task": "glue/sst2"})
    np.testing.assert_array_equal(model.weights["bert/pooler/dense/bias"], np.arange(128))
    assert model.vocab.path == f"{path}/vocab.txt" and model.config_file == f"{path}/bert_config.json"
    assert "://" not in model.vocab_file and open(model.vocab_file).read().split() == TOKENS
    assert loading.load_preprocessor(path, seq_length=4)(["hello"])["input_word_ids"].numpy() \
        .tolist() == [[2, 5, 3, 0]]
    # Errors name the file on the bucket. (ram://'s GFile "w" appends to a file that is there:
    # remove it first.)
    tf.io.gfile.remove(f"{path}/vocab.txt")
    with tf.io.gfile.GFile(f"{path}/vocab.txt", "w") as f:
        f.write("[PAD]\n\n")
    with pytest.raises(VocabularyError, match=rf"^{path}/vocab.txt: line 2: empty token"):
        ModelDir(path)
    tf.io.gfile.remove(f"{path}/bert_config.json")
    with tf.io.gfile.GFile(f"{path}/bert_config.json", "w") as f:
        f.write("{")
    with pytest.raises(model_dir_lib.ConfigError, match=rf"{path}/bert_config.json: malformed"):
        ModelDir(path)
    tf.io.gfile.remove(f"{path}/bert_config.json")
    with pytest.raises(ModelDirError, match=rf"{path}: missing bert_config.json"):
        ModelDir(path)


def test_loaders_accept_a_model_dir_value(tmp_path):
    path = tmp_path / "model"
    config = bert_keras.BertConfig.from_preset("tiny", vocab_size=len(TOKENS))
    encoder = bert_keras.build_encoder(config)
    from bert_keras.model import checkpoint_names
    weights = checkpoint_names.collect_weights(checkpoint_names.encoder_weight_map(encoder))
    _write(path, weights)
    model = ModelDir(path)
    loaded = loading.load_encoder(model)
    pre = loading.load_preprocessor(model, seq_length=5)(["Hello world"])
    # The directory says uncased, as its vocabulary is: "Hello" is read as "hello".
    assert pre["input_word_ids"].numpy().tolist() == [[2, 5, 6, 3, 0]]
    np.testing.assert_allclose(loaded(pre)["pooled_output"], encoder(pre)["pooled_output"],
                               atol=1e-6)


def test_the_sequence_length_is_checked_against_the_positions_once(tmp_path):
    path = tmp_path / "model"
    _write(path, {"bert/pooler/dense/bias": np.zeros(128, "float32")}, {"task": "glue/sst2"})
    model = ModelDir(path)
    positions = model.config.max_position_embeddings
    model.check_seq_length(positions)  # as long as the positions: fine
    with pytest.raises(ModelDirError) as raised:
        model.check_seq_length(positions + 1, "--seq_length")
    assert str(raised.value) == (
        f"--seq_length: {positions + 1} is longer than the model's max_position_embeddings "
        f"{positions} ({path / 'bert_config.json'}); lower --seq_length or pick a model with "
        "more positions")

    class ExportError(ValueError):
        pass

    with pytest.raises(ExportError, match="--max_seq_length: 9 is longer than .* 8; lower"):
        model_dir_lib.check_seq_length(bert_keras.BertConfig.from_preset(
            "tiny", vocab_size=7, max_position_embeddings=8), 9, error=ExportError)
    assert ModelDir.of(model) is model
    assert ModelDir.of(str(path)).task_config == {"task": "glue/sst2"}
    assert model.pretraining_options is None
