"""BertConfig: presets, the original JSON layout and Hugging Face configs."""

import json

import pytest

from bert_keras.model.config import BertConfig, ConfigError


@pytest.mark.parametrize("name,layers,hidden", [
    ("tiny", 2, 128), ("mini", 4, 256), ("small", 4, 512), ("medium", 8, 512), ("base", 12, 768),
    ("large", 24, 1024), ("L6_H256", 6, 256), ("L12_H128", 12, 128)])
def test_presets_follow_the_release(name, layers, hidden):
    config = BertConfig.from_preset(name)
    assert (config.num_hidden_layers, config.hidden_size) == (layers, hidden)
    assert config.num_attention_heads == hidden // 64
    assert config.intermediate_size == 4 * hidden


def test_the_grid_has_the_24_small_models():
    grid = [name for name in BertConfig.preset_names() if name.startswith("L")]
    assert len(grid) == 24
    for name in grid:
        BertConfig.from_preset(name)


def test_unknown_preset():
    with pytest.raises(ConfigError, match="unknown preset 'L3_H128'"):
        BertConfig.from_preset("L3_H128")


def test_original_json_round_trip(tmp_path):
    # The config of the original BERT-Base release, as published in bert_config.json.
    original = {"attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
                "hidden_size": 768, "initializer_range": 0.02, "intermediate_size": 3072,
                "max_position_embeddings": 512, "num_attention_heads": 12, "num_hidden_layers": 12,
                "type_vocab_size": 2, "vocab_size": 30522}
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(original))
    config = BertConfig.from_json_file(str(path))
    assert config == BertConfig.from_preset("base")
    assert config.layer_norm_eps == 1e-12
    config.to_json_file(str(tmp_path / "copy.json"))
    written = json.loads((tmp_path / "copy.json").read_text())
    assert {k: written[k] for k in original} == original


def test_hf_config(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "bert", "hidden_size": 384, "num_hidden_layers": 6,
                                "num_attention_heads": 12, "intermediate_size": 1536,
                                "vocab_size": 30522, "layer_norm_eps": 1e-7, "hidden_act": "gelu",
                                "position_embedding_type": "absolute", "use_cache": True}))
    config = BertConfig.from_hf_config(str(path))
    assert (config.hidden_size, config.layer_norm_eps, config.head_size) == (384, 1e-7, 32)


@pytest.mark.parametrize("change,message", [
    ({"hidden_size": 129}, "not a multiple of num_attention_heads"),
    ({"num_hidden_layers": 0}, "'num_hidden_layers' must be a positive integer"),
    ({"hidden_act": "mish"}, "'hidden_act'"),
    ({"hidden_dropout_prob": 1.5}, "'hidden_dropout_prob'"),
])
def test_bad_fields_are_named_with_the_file(tmp_path, change, message):
    values = dict(BertConfig.from_preset("tiny").to_dict(), **change)
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(values))
    with pytest.raises(ConfigError, match=message) as error:
        BertConfig.from_json_file(str(path))
    assert str(path) in str(error.value)


def test_missing_field_and_bad_model_type(tmp_path):
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps({"hidden_size": 128}))
    with pytest.raises(ConfigError, match=r"missing required field\(s\).*vocab_size"):
        BertConfig.from_json_file(str(path))
    path.write_text(json.dumps(dict(BertConfig().to_dict(), model_type="roberta")))
    with pytest.raises(ConfigError, match="model_type is 'roberta'"):
        BertConfig.from_hf_config(str(path))


def test_causal_attention_is_written_and_defaults_to_bidirectional(tmp_path):
    path = tmp_path / "bert_config.json"
    BertConfig.from_preset("tiny", causal_attention=True).to_json_file(str(path))
    assert json.loads(path.read_text())["causal_attention"] is True
    assert BertConfig.from_json_file(str(path)).causal_attention is True
    # The original files (and this project's older ones) have no such field: bidirectional.
    values = BertConfig.from_preset("tiny").to_dict()
    del values["causal_attention"]
    path.write_text(json.dumps(values))
    assert BertConfig.from_json_file(str(path)).causal_attention is False
    path.write_text(json.dumps(dict(values, causal_attention="yes")))
    with pytest.raises(ConfigError, match="'causal_attention' must be true or false"):
        BertConfig.from_json_file(str(path))
