"""The encoder against an independent NumPy BERT, on random and on real (MiniLM) weights."""

import dataclasses
import json
import os

import numpy as np
import pytest

import bert_keras
from bert_keras.model import checkpoint_names
from bert_keras.model.config import BertConfig
from bert_keras.model.layers import BertEmbeddings, Pooler, SelfAttention, TransformerBlock
from bert_keras.modeldir import convert
from bert_keras.modeldir import model_dir as model_dir_lib
from bert_keras.text.vocab import Vocabulary
from helpers.model_fixtures import minilm_hf_dir, numpy_bert, random_weights, tiny_vocab_tokens


def _batch_with_padding(vocab_size, lengths, seq_length, seed=0, pairs=True):
    rng = np.random.default_rng(seed)
    ids = np.zeros((len(lengths), seq_length), np.int32)
    types = np.zeros_like(ids)
    for row, length in enumerate(lengths):
        ids[row, :length] = rng.integers(5, vocab_size, length)
        ids[row, 0], ids[row, length - 1] = 2, 3
        if pairs:
            types[row, length // 2:length] = 1
    return ids, (ids > 0).astype(np.int32), types


def _run(encoder, ids, mask, types, training=False):
    return encoder({"input_word_ids": ids, "input_mask": mask, "input_type_ids": types},
                   training=training)


def test_random_weights_match_numpy_reference():
    config = BertConfig.from_preset("tiny", vocab_size=60, max_position_embeddings=32)
    encoder = bert_keras.build_encoder(config)
    arrays = random_weights(checkpoint_names.encoder_weight_shapes(config), seed=1, scale=0.2)
    checkpoint_names.assign_weights(checkpoint_names.encoder_weight_map(encoder), arrays)
    ids, mask, types = _batch_with_padding(config.vocab_size, [9, 4, 12], seq_length=12)

    outputs = _run(encoder, ids, mask, types)
    sequence, pooled, layers = numpy_bert(arrays, config, ids, mask, types)

    np.testing.assert_allclose(outputs["sequence_output"], sequence, atol=1e-4)
    np.testing.assert_allclose(outputs["pooled_output"], pooled, atol=1e-4)
    assert len(outputs["encoder_outputs"]) == config.num_hidden_layers
    for ours, reference in zip(outputs["encoder_outputs"], layers):
        np.testing.assert_allclose(ours, reference, atol=1e-4)


def test_minilm_checkpoint_matches_numpy_reference(tmp_path):
    model_dir = str(tmp_path / "minilm")
    config = convert.convert_hf_checkpoint(minilm_hf_dir(), model_dir)
    encoder = bert_keras.load_encoder(model_dir)
    ids, mask, types = _batch_with_padding(config.vocab_size, [16, 7, 11, 3], seq_length=16, seed=3)

    outputs = _run(encoder, ids, mask, types)
    weights = bert_keras.modeldir.model_dir.read_weights(model_dir)
    sequence, pooled, _ = numpy_bert(weights, config, ids, mask, types)

    difference = np.abs(outputs["sequence_output"].numpy() - sequence).max()
    assert difference <= 1e-4, difference
    np.testing.assert_allclose(outputs["pooled_output"], pooled, atol=1e-4)


def test_padding_does_not_change_real_positions():
    config = BertConfig.from_preset("tiny", vocab_size=40)
    encoder = bert_keras.build_encoder(config)
    ids, mask, types = _batch_with_padding(config.vocab_size, [6], seq_length=6)
    padded = [np.pad(array, ((0, 0), (0, 10))) for array in (ids, mask, types)]
    short = _run(encoder, ids, mask, types)["sequence_output"].numpy()
    long = _run(encoder, *padded)["sequence_output"].numpy()
    np.testing.assert_allclose(long[:, :6], short, atol=1e-4)


def test_dropout_only_when_training():
    config = BertConfig.from_preset("tiny", vocab_size=40)
    encoder = bert_keras.build_encoder(config)
    ids, mask, types = _batch_with_padding(config.vocab_size, [8, 5], seq_length=8)
    first = _run(encoder, ids, mask, types)["sequence_output"].numpy()
    second = _run(encoder, ids, mask, types)["sequence_output"].numpy()
    np.testing.assert_array_equal(first, second)
    trained = _run(encoder, ids, mask, types, training=True)["sequence_output"].numpy()
    assert np.abs(trained - first).max() > 1e-3


def test_causal_mask_hides_later_positions():
    config = BertConfig.from_preset("tiny", vocab_size=40)
    encoder = bert_keras.build_encoder(config, causal=True)
    ids, mask, types = _batch_with_padding(config.vocab_size, [8], seq_length=8)
    changed = ids.copy()
    changed[0, 6] = 9 if ids[0, 6] != 9 else 10
    before = _run(encoder, ids, mask, types)["sequence_output"].numpy()
    after = _run(encoder, changed, mask, types)["sequence_output"].numpy()
    np.testing.assert_allclose(before[:, :6], after[:, :6], atol=1e-6)
    assert np.abs(before[:, 6:] - after[:, 6:]).max() > 1e-4


def _earlier_positions_change(encoder, vocab_size, seq_length=8, changed_position=6):
    """Max change of sequence_output before `changed_position` when only that token changes."""
    ids, mask, types = _batch_with_padding(vocab_size, [seq_length], seq_length=seq_length)
    changed = ids.copy()
    changed[0, changed_position] = 9 if ids[0, changed_position] != 9 else 10
    before = _run(encoder, ids, mask, types)["sequence_output"].numpy()
    after = _run(encoder, changed, mask, types)["sequence_output"].numpy()
    assert np.abs(before[:, changed_position:] - after[:, changed_position:]).max() > 1e-4
    return np.abs(before[:, :changed_position] - after[:, :changed_position]).max()


def _write_encoder_dir(path, config, encoder_weights):
    model_dir_lib.write_model_dir(str(path), config, Vocabulary(tiny_vocab_tokens(config.vocab_size)),
                              True, encoder_weights)
    return str(path)


def test_a_causal_model_directory_loads_causal(tmp_path):
    """`causal_attention` in bert_config.json decides the mask of `load_encoder`."""
    config = BertConfig.from_preset("tiny", vocab_size=40, causal_attention=True)
    weights = random_weights(checkpoint_names.encoder_weight_shapes(config), seed=2, scale=0.2)
    causal_dir = _write_encoder_dir(tmp_path / "causal", config, weights)
    bidirectional = dataclasses.replace(config, causal_attention=False)
    bidirectional_dir = _write_encoder_dir(tmp_path / "bidirectional", bidirectional, weights)

    assert _earlier_positions_change(bert_keras.load_encoder(causal_dir), 40) < 1e-6
    # The same weights without the flag: earlier positions see the change, so the check can fail.
    assert _earlier_positions_change(bert_keras.load_encoder(bidirectional_dir), 40) > 1e-4
    # An explicit `causal` still overrides the directory.
    assert _earlier_positions_change(bert_keras.load_encoder(causal_dir, causal=False), 40) > 1e-4
    # The pre-training model of the directory (the heads left fresh) shares the mask.
    pretraining = bert_keras.load_pretraining_model(causal_dir)
    assert _earlier_positions_change(pretraining.encoder, 40) < 1e-6


def test_an_older_left_to_right_directory_is_read_as_causal(tmp_path):
    """Before the field, pre-training wrote left_to_right only in pretraining_options.json."""
    config = BertConfig.from_preset("tiny", vocab_size=40)
    weights = random_weights(checkpoint_names.encoder_weight_shapes(config), seed=2, scale=0.2)
    path = _write_encoder_dir(tmp_path / "ltr", config, weights)
    with open(os.path.join(path, model_dir_lib.CONFIG_NAME)) as f:
        values = json.load(f)
    del values["causal_attention"]
    with open(os.path.join(path, model_dir_lib.CONFIG_NAME), "w") as f:
        json.dump(values, f)
    assert model_dir_lib.read_config(path).causal_attention is False
    with open(os.path.join(path, model_dir_lib.PRETRAINING_OPTIONS_NAME), "w") as f:
        json.dump({"left_to_right": True, "next_sentence": True}, f)
    assert model_dir_lib.read_config(path).causal_attention is True
    assert _earlier_positions_change(bert_keras.load_encoder(path), 40) < 1e-6
    # A written field wins over the options file.
    with open(os.path.join(path, model_dir_lib.CONFIG_NAME), "w") as f:
        json.dump(dict(values, causal_attention=False), f)
    assert model_dir_lib.read_config(path).causal_attention is False


@pytest.mark.parametrize("layer", [
    BertEmbeddings(vocab_size=11, hidden_size=8, max_position_embeddings=9, type_vocab_size=3,
                   layer_norm_eps=1e-6, dropout_rate=0.2),
    SelfAttention(num_heads=2, hidden_size=8, attention_dropout_rate=0.3),
    SelfAttention(num_heads=2, hidden_size=8, attention_dropout_rate=0.0,
                  attention_implementation="fused"),
    TransformerBlock(num_heads=2, hidden_size=8, intermediate_size=16, hidden_act="relu"),
    TransformerBlock(num_heads=2, hidden_size=8, intermediate_size=16, attention_dropout_rate=0.0,
                     attention_implementation="fused"),
    Pooler(hidden_size=8, initializer_range=0.5),
])
def test_layers_round_trip_through_get_config(layer):
    config = layer.get_config()
    clone = type(layer).from_config(config)
    assert clone.get_config() == config


def test_fused_attention_matches_the_numpy_reference_and_the_softmax_gradients():
    import tensorflow as tf
    # No dropout at all, so that training steps of the two compare.
    config = BertConfig.from_preset("tiny", vocab_size=60, max_position_embeddings=32,
                                    attention_probs_dropout_prob=0.0, hidden_dropout_prob=0.0)
    arrays = random_weights(checkpoint_names.encoder_weight_shapes(config), seed=2, scale=0.2)
    ids, mask, types = _batch_with_padding(config.vocab_size, [9, 4, 12], seq_length=12)
    weights = tf.constant(np.random.default_rng(0).normal(size=(3, 12, config.hidden_size)),
                          tf.float32)
    reference, _, _ = numpy_bert(arrays, config, ids, mask, types)
    real = mask.astype(bool)  # padded positions are not compared: each fills them its own way
    gradients = {}
    for implementation in ("softmax", "fused"):
        encoder = bert_keras.build_encoder(config, attention_implementation=implementation)
        checkpoint_names.assign_weights(checkpoint_names.encoder_weight_map(encoder), arrays)
        with tf.GradientTape() as tape:
            sequence = _run(encoder, ids, mask, types, training=True)["sequence_output"]
            loss = tf.reduce_sum(sequence * weights * mask[:, :, None])
        gradients[implementation] = [  # None: the pooler, which the loss does not read
            None if g is None else tf.convert_to_tensor(g).numpy()
            for g in tape.gradient(loss, encoder.trainable_variables)]
        np.testing.assert_allclose(_run(encoder, ids, mask, types)["sequence_output"].numpy()[real],
                                   reference[real], atol=1e-4)
    assert sum(g is not None for g in gradients["fused"]) > 10
    for fused, softmax in zip(gradients["fused"], gradients["softmax"]):
        assert (fused is None) == (softmax is None)
        if fused is not None:
            np.testing.assert_allclose(fused, softmax, atol=1e-4)
    assert _earlier_positions_change(
        bert_keras.build_encoder(dataclasses.replace(config, causal_attention=True),
                                 attention_implementation="fused"), 60) < 1e-6


def test_fused_attention_refuses_attention_dropout():
    config = BertConfig.from_preset("tiny", vocab_size=60)
    with pytest.raises(ValueError, match="attention_probs_dropout_prob to 0"):
        bert_keras.build_encoder(config, attention_implementation="fused")
    with pytest.raises(ValueError, match="must be one of"):
        bert_keras.build_encoder(config, attention_implementation="flash")


def test_mixed_bfloat16_encoder_stays_close_to_float32():
    config = BertConfig.from_preset("tiny", vocab_size=40)
    encoder = bert_keras.build_encoder(config)
    mixed = bert_keras.build_encoder(config, dtype="mixed_bfloat16")
    checkpoint_names.assign_weights(
        checkpoint_names.encoder_weight_map(mixed),
        checkpoint_names.collect_weights(checkpoint_names.encoder_weight_map(encoder)))
    ids, mask, types = _batch_with_padding(config.vocab_size, [8, 5], seq_length=8)
    reference = _run(encoder, ids, mask, types)["sequence_output"].numpy()
    output = _run(mixed, ids, mask, types)["sequence_output"]
    assert output.dtype.name == "bfloat16"
    assert all(variable.dtype == "float32" for variable in mixed.weights)
    assert np.abs(output.numpy().astype(np.float32) - reference).max() < 0.1


def test_token_type_gradient_is_the_sum_over_each_type_s_positions():
    # Token types go through a one-hot matmul. Each position has its own word id here, so the
    # word table's gradient row of a position is that position's gradient, and the token-type
    # table's row t must be the sum of those rows over the positions of type t.
    import tensorflow as tf
    rng = np.random.default_rng(3)
    layer = BertEmbeddings(vocab_size=40, hidden_size=8, max_position_embeddings=8,
                           type_vocab_size=3, dropout_rate=0.0)
    ids = rng.permutation(np.arange(5, 40))[:16].reshape(2, 8).astype(np.int32)
    types = rng.integers(0, 3, (2, 8)).astype(np.int32)
    types[0, 0], types[0, 1], types[0, 2] = 0, 1, 2  # every type occurs
    weights = tf.constant(rng.normal(size=(2, 8, 8)), tf.float32)
    layer(ids, types)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(layer(ids, types) * weights)
    word_grad, type_grad = tape.gradient(
        loss, [layer.word_embeddings.value, layer.token_type_embeddings.value])
    word_grad = tf.convert_to_tensor(word_grad).numpy()
    for token_type in range(3):
        expected = word_grad[ids[types == token_type]].sum(axis=0)
        # float32 sums of up to 16 rows in another order: relative, not absolute, rounding
        # (a missed or extra position would be off by whole units).
        np.testing.assert_allclose(type_grad.numpy()[token_type], expected, rtol=1e-5, atol=1e-5)
    assert np.abs(type_grad.numpy()).max() > 1e-3  # the check is not of zeros
