"""Converting original (TF1) and Hugging Face checkpoints into model directories."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import save_file

import bert_keras
from bert_keras.model import checkpoint_names
from bert_keras.model.checkpoint_names import WeightsError
from bert_keras.model.config import BertConfig, ConfigError
from bert_keras.modeldir import convert, model_dir
from bert_keras.modeldir.loading import load_pretraining_model
from bert_keras.text.vocab import Vocabulary, VocabularyError
from helpers.model_fixtures import numpy_bert, random_weights, tiny_vocab_tokens

CONFIG = BertConfig.from_preset("tiny", vocab_size=40, max_position_embeddings=24)


def _all_shapes(config):
    shapes = dict(checkpoint_names.encoder_weight_shapes(config))
    shapes.update(checkpoint_names.pretraining_head_shapes(config))
    return shapes


def _write_tf1_checkpoint(directory, arrays, config=CONFIG, vocab_tokens=None):
    """Writes an original-style checkpoint with raw variable names (as the TF1 Saver names them)."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "bert_config.json"), "w") as f:
        json.dump({k: v for k, v in config.to_dict().items() if k != "layer_norm_eps"}, f)
    with open(os.path.join(directory, "vocab.txt"), "w") as f:
        f.write("\n".join(vocab_tokens or tiny_vocab_tokens(config.vocab_size)) + "\n")
    names = sorted(arrays)
    prefix = os.path.join(directory, "bert_model.ckpt")
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(arrays[name]) for name in names])
    return prefix


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, CONFIG.vocab_size, (3, 10)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[1, 6:] = 0
    mask[2, 3:] = 0
    ids = ids * mask
    types = np.zeros_like(ids)
    types[0, 5:] = 1
    return ids, mask, types


def test_tf1_checkpoint_converts_with_heads(tmp_path):
    arrays = random_weights(_all_shapes(CONFIG), seed=4, scale=0.1)
    # Optimizer slots and the step counter of a training checkpoint are skipped.
    extra = {"bert/embeddings/word_embeddings/adam_m": np.zeros((40, 128), np.float32),
             "global_step": np.array(7, np.int64)}
    prefix = _write_tf1_checkpoint(str(tmp_path / "release"), {**arrays, **extra})
    output = str(tmp_path / "converted")
    convert.convert_tf1_checkpoint(prefix, output)

    assert model_dir.read_do_lower_case(output) is True
    encoder = bert_keras.load_encoder(output)
    ids, mask, types = _inputs()
    outputs = encoder({"input_word_ids": ids, "input_mask": mask, "input_type_ids": types})
    sequence, pooled, _ = numpy_bert(arrays, CONFIG, ids, mask, types)
    np.testing.assert_allclose(outputs["sequence_output"], sequence, atol=1e-4)
    np.testing.assert_allclose(outputs["pooled_output"], pooled, atol=1e-4)

    model = load_pretraining_model(output, require_heads=True)
    np.testing.assert_array_equal(model.get_layer("next_sentence").output_weights.numpy(),
                                  arrays["cls/seq_relationship/output_weights"])
    np.testing.assert_array_equal(model.get_layer("masked_lm").output_bias.numpy(),
                                  arrays["cls/predictions/output_bias"])


def _hf_arrays(arrays, prefix="bert.", legacy_layer_norm=False):
    """Renames original arrays to Hugging Face names, transposing dense kernels like torch.nn.Linear."""
    hf = {}
    for name, value in arrays.items():
        if name == "cls/predictions/output_bias":
            hf["cls.predictions.bias"] = value
            continue
        if name == "cls/seq_relationship/output_weights":
            hf["cls.seq_relationship.weight"] = value
            continue
        if name == "cls/seq_relationship/output_bias":
            hf["cls.seq_relationship.bias"] = value
            continue
        parts = name.split("/")
        parts = [p.replace("layer_", "layer.") if p.startswith("layer_") else p for p in parts]
        leaf = parts[-1]
        if leaf == "kernel":
            parts[-1], value = "weight", value.T
        elif leaf == "gamma" and not legacy_layer_norm:
            parts[-1] = "weight"
        elif leaf == "beta" and not legacy_layer_norm:
            parts[-1] = "bias"
        elif leaf.endswith("_embeddings"):
            parts.append("weight")
        key = ".".join(parts)
        if not key.startswith("cls."):
            key = prefix + key[len("bert."):]
        hf[key] = np.ascontiguousarray(value)
    return hf


@pytest.mark.parametrize("prefix,legacy", [("bert.", False), ("", True)])
def test_hf_directory_converts(tmp_path, prefix, legacy):
    arrays = random_weights(_all_shapes(CONFIG), seed=5, scale=0.1)
    source = tmp_path / "hf"
    source.mkdir()
    hf_config = dict(CONFIG.to_dict(), model_type="bert", architectures=["BertForPreTraining"])
    (source / "config.json").write_text(json.dumps(hf_config))
    cased = tiny_vocab_tokens(CONFIG.vocab_size - 1) + ["Paris"]  # a cased vocabulary
    (source / "vocab.txt").write_text("\n".join(cased) + "\n")
    (source / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
    save_file(_hf_arrays(arrays, prefix, legacy), str(source / "model.safetensors"))

    output = str(tmp_path / "converted")
    convert.convert_hf_checkpoint(str(source), output)
    assert model_dir.read_do_lower_case(output) is False
    # tokenizer_config.json contradicting the vocabulary is refused unless the casing is given.
    (source / "vocab.txt").write_text("\n".join(tiny_vocab_tokens(CONFIG.vocab_size)) + "\n")
    with pytest.raises(convert.ConversionError, match="tokenizer_config.json says "
                       "do_lower_case=false, but .*vocab.txt is an uncased vocabulary; pass "
                       "--do_lower_case=true"):
        convert.convert_hf_checkpoint(str(source), str(tmp_path / "refused"))
    assert not os.path.exists(tmp_path / "refused")
    converted = model_dir.read_weights(output)
    assert sorted(converted) == sorted(arrays)
    for name, value in arrays.items():
        np.testing.assert_array_equal(converted[name], value, err_msg=name)


def test_missing_variable_is_named(tmp_path):
    arrays = random_weights(checkpoint_names.encoder_weight_shapes(CONFIG))
    del arrays["bert/encoder/layer_1/output/dense/kernel"]
    prefix = _write_tf1_checkpoint(str(tmp_path / "release"), arrays)
    with pytest.raises(WeightsError, match=r"bert_model\.ckpt.*layer_1/output/dense/kernel"):
        convert.convert_tf1_checkpoint(prefix, str(tmp_path / "out"))
    assert not os.path.exists(tmp_path / "out")


def test_shape_mismatch_is_named(tmp_path):
    arrays = random_weights(checkpoint_names.encoder_weight_shapes(CONFIG))
    arrays["bert/pooler/dense/bias"] = np.zeros((7,), np.float32)
    prefix = _write_tf1_checkpoint(str(tmp_path / "release"), arrays)
    with pytest.raises(WeightsError, match=r"bert/pooler/dense/bias has shape \(7,\)"):
        convert.convert_tf1_checkpoint(prefix, str(tmp_path / "out"))


def test_incomplete_head_is_refused(tmp_path):
    arrays = random_weights(_all_shapes(CONFIG))
    del arrays["cls/predictions/output_bias"]
    prefix = _write_tf1_checkpoint(str(tmp_path / "release"), arrays)
    with pytest.raises(WeightsError, match="cls/predictions"):
        convert.convert_tf1_checkpoint(prefix, str(tmp_path / "out"))


def test_vocabulary_size_mismatch_names_both_files(tmp_path):
    arrays = random_weights(checkpoint_names.encoder_weight_shapes(CONFIG))
    prefix = _write_tf1_checkpoint(str(tmp_path / "release"), arrays,
                                   vocab_tokens=tiny_vocab_tokens(CONFIG.vocab_size - 1))
    with pytest.raises(VocabularyError, match=r"vocab\.txt has 39 tokens.*bert_config\.json.*40"):
        convert.convert_tf1_checkpoint(prefix, str(tmp_path / "out"))


def test_pytorch_bin_gets_a_clear_error(tmp_path):
    source = tmp_path / "hf"
    source.mkdir()
    (source / "config.json").write_text(json.dumps(dict(CONFIG.to_dict(), model_type="bert")))
    (source / "vocab.txt").write_text("\n".join(tiny_vocab_tokens(CONFIG.vocab_size)) + "\n")
    (source / "pytorch_model.bin").write_bytes(b"\x80\x02")
    with pytest.raises(convert.ConversionError, match="pytorch_model.bin.*safetensors"):
        convert.convert_hf_checkpoint(str(source), str(tmp_path / "out"))


def test_load_encoder_refuses_a_directory_whose_vocab_does_not_match(tmp_path):
    arrays = random_weights(checkpoint_names.encoder_weight_shapes(CONFIG))
    prefix = _write_tf1_checkpoint(str(tmp_path / "release"), arrays)
    output = tmp_path / "converted"
    convert.convert_tf1_checkpoint(prefix, str(output))
    with open(output / "vocab.txt", "a") as f:
        f.write("extra\n")
    with pytest.raises(VocabularyError, match=r"vocab\.txt has 41 tokens"):
        bert_keras.load_encoder(str(output))


def test_load_encoder_refuses_a_malformed_config(tmp_path):
    arrays = random_weights(checkpoint_names.encoder_weight_shapes(CONFIG))
    prefix = _write_tf1_checkpoint(str(tmp_path / "release"), arrays)
    output = tmp_path / "converted"
    convert.convert_tf1_checkpoint(prefix, str(output))
    (output / "bert_config.json").write_text("{\"vocab_size\": 40,")
    with pytest.raises(ConfigError, match=r"bert_config\.json: malformed JSON"):
        bert_keras.load_encoder(str(output))
    (output / "bert_config.json").unlink()
    with pytest.raises(model_dir.ModelDirError, match="missing bert_config.json"):
        bert_keras.load_encoder(str(output))


def test_a_casing_the_vocabulary_cannot_have_is_refused(tmp_path):
    """--do_lower_case=false on an uncased vocabulary would map every capitalized word to [UNK]
    in fine-tuning and in the exported preprocessor: the conversion stops before writing."""
    arrays = random_weights(_all_shapes(CONFIG), seed=5, scale=0.1)
    source = tmp_path / "hf"
    source.mkdir()
    hf_config = dict(CONFIG.to_dict(), model_type="bert", architectures=["BertForPreTraining"])
    (source / "config.json").write_text(json.dumps(hf_config))
    tokens = tiny_vocab_tokens(CONFIG.vocab_size)
    (source / "vocab.txt").write_text("\n".join(tokens) + "\n")
    save_file(_hf_arrays(arrays, "bert.", False), str(source / "model.safetensors"))
    uncased = Vocabulary(tokens).is_uncased()
    output = tmp_path / "converted"
    with pytest.raises(convert.ConversionError, match="vocabulary, but --do_lower_case="):
        convert.convert_hf_checkpoint(str(source), str(output), do_lower_case=not uncased)
    assert not output.exists()
    convert.convert_hf_checkpoint(str(source), str(output), do_lower_case=uncased)
    assert model_dir.read_do_lower_case(str(output)) is uncased


def test_a_truncated_weights_file_and_a_file_as_input_are_named(tmp_path):
    source = tmp_path / "hf"
    source.mkdir()
    (source / "config.json").write_text(json.dumps(dict(CONFIG.to_dict(), model_type="bert")))
    (source / "vocab.txt").write_text("\n".join(tiny_vocab_tokens(CONFIG.vocab_size)) + "\n")
    save_file(_hf_arrays(random_weights(_all_shapes(CONFIG), seed=5), "bert.", False),
              str(source / "model.safetensors"))
    whole = (source / "model.safetensors").read_bytes()
    for cut in (1000, len(whole) // 2):
        (source / "model.safetensors").write_bytes(whole[:cut])
        with pytest.raises(convert.ConversionError,
                           match="model.safetensors: cannot read safetensors .*the file is "
                                 "truncated or not a safetensors file") as raised:
            convert.convert_hf_checkpoint(str(source), str(tmp_path / "out"))
        assert "bfloat16" not in str(raised.value)
    assert not os.path.exists(tmp_path / "out")
    with pytest.raises(convert.ConversionError, match="config.json: not a directory; "
                       "--format=hf reads a Hugging Face BERT directory"):
        convert.convert_hf_checkpoint(str(source / "config.json"), str(tmp_path / "out"))
