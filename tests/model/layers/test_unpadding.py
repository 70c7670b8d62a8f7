"""Unpadded inference (`bert_keras.model.layers.unpadding`): the whole encoder computing only
the real tokens gives the padded encoder's outputs at every real position, zeros at padding,
and changes nothing outside its scope, in training or under XLA."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import bert_keras
from bert_keras.model.layers import attention_mask_from_input_mask
from bert_keras.model.layers.unpadding import RealTokens, takes_unpadded_path, unpadded_inference

VOCAB = 64


def _batch(seed=0, lengths=(9, 3, 1, 12), seq_length=12, prefix=True):
    rng = np.random.default_rng(seed)
    mask = np.zeros((len(lengths), seq_length), np.int32)
    for row, length in enumerate(lengths):
        if prefix:
            mask[row, :length] = 1
        else:  # real tokens anywhere (a padding mask need not be a prefix)
            mask[row, rng.choice(seq_length, length, replace=False)] = 1
    ids = rng.integers(5, VOCAB, mask.shape).astype(np.int32) * mask
    types = (rng.random(mask.shape) < 0.4).astype(np.int32) * mask
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}


def _encoder(dtype=None, **overrides):
    config = bert_keras.BertConfig.from_preset("tiny", vocab_size=VOCAB, **overrides)
    keras.utils.set_random_seed(3)
    return bert_keras.build_encoder(config, dtype=dtype)


def _both(encoder, features, compiled=True):
    """(padded outputs, unpadded outputs) of inference, as NumPy."""
    def run(unpadded):
        def call(inputs):
            with unpadded_inference(unpadded):
                return encoder(inputs, training=False)
        call = tf.function(call, autograph=False) if compiled else call
        outputs = call({name: tf.constant(value) for name, value in features.items()})
        return tf.nest.map_structure(lambda x: np.asarray(tf.cast(x, tf.float32)), outputs)
    return run(False), run(True)


@pytest.mark.parametrize("dtype, tolerance", [("float32", 1e-5), ("mixed_bfloat16", 0.05)])
def test_real_positions_equal_the_padded_encoder_and_padding_is_zero(dtype, tolerance):
    features = _batch()
    padded, unpadded = _both(_encoder(dtype), features)
    real = features["input_mask"].astype(bool)
    assert np.abs(unpadded["pooled_output"] - padded["pooled_output"]).max() <= tolerance
    for want, got in zip(padded["encoder_outputs"], unpadded["encoder_outputs"]):
        assert np.abs(got[real] - want[real]).max() <= tolerance
        assert not got[~real].any()
        assert np.abs(want[~real]).max() > 0.1  # the padded encoder computed them
    np.testing.assert_array_equal(unpadded["sequence_output"], unpadded["encoder_outputs"][-1])


def test_masks_that_are_not_a_prefix_causal_attention_and_the_fused_implementation():
    features = _batch(seed=1, prefix=False)
    real = features["input_mask"].astype(bool)
    for encoder in (_encoder(), _encoder(causal_attention=True),
                    _encoder(attention_probs_dropout_prob=0.0)):
        padded, unpadded = _both(encoder, features)
        assert np.abs(unpadded["sequence_output"][real]
                      - padded["sequence_output"][real]).max() <= 1e-5
    config = bert_keras.BertConfig.from_preset("tiny", vocab_size=VOCAB,
                                               attention_probs_dropout_prob=0.0)
    fused = bert_keras.build_encoder(config, attention_implementation="fused")
    padded, unpadded = _both(fused, features)
    assert np.abs(unpadded["sequence_output"][real] - padded["sequence_output"][real]).max() <= 1e-5


def test_eager_calls_and_batches_with_little_or_no_padding():
    """Above `MAX_REAL_SHARE` real positions every row is computed, and padding still zeroed."""
    encoder = _encoder()
    for lengths in ((12, 12), (12, 12, 12, 11), (12, 3)):
        features = _batch(lengths=lengths, seed=2)
        real = features["input_mask"].astype(bool)
        for compiled in (False, True):
            padded, unpadded = _both(encoder, features, compiled=compiled)
            got, want = unpadded["sequence_output"], padded["sequence_output"]
            assert np.abs(got[real] - want[real]).max() <= 1e-5
            assert not got[~real].any()


def test_a_row_of_padding_only():
    features = _batch(lengths=(5, 0), seed=4)
    padded, unpadded = _both(_encoder(), features)
    np.testing.assert_allclose(unpadded["sequence_output"][0, :5], padded["sequence_output"][0, :5],
                               atol=1e-5)
    assert not unpadded["sequence_output"][1].any()
    features = _batch(lengths=(0, 0), seed=4)  # no real token at all
    _, unpadded = _both(_encoder(), features)
    assert not unpadded["sequence_output"].any()


def test_training_and_outside_the_scope_compute_every_position():
    assert not takes_unpadded_path(False)
    with unpadded_inference():
        assert takes_unpadded_path(False) and takes_unpadded_path(None)
        assert not takes_unpadded_path(True)
        with unpadded_inference(False):
            assert not takes_unpadded_path(False)
        assert takes_unpadded_path(False)
    assert not takes_unpadded_path(False)
    encoder = _encoder(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    features = {name: tf.constant(value) for name, value in _batch().items()}
    with unpadded_inference():
        trained = encoder(features, training=True)["sequence_output"].numpy()
    padding = ~features["input_mask"].numpy().astype(bool)
    assert np.abs(trained[padding]).min() > 0  # computed, not zeroed


def test_real_tokens_gather_and_scatter_rows():
    mask = attention_mask_from_input_mask(np.array([[1, 0, 1], [0, 1, 0]], "int32"))
    tokens = RealTokens(mask)
    assert tokens.indices.numpy().ravel().tolist() == [0, 2, 4]
    assert bool(tokens.worthwhile)  # 3 of 6 positions
    rows = tf.reshape(tf.range(12, dtype=tf.float32), [6, 2])
    gathered = tokens.gather(rows)
    assert gathered.numpy().tolist() == [[0, 1], [4, 5], [8, 9]]
    assert tokens.scatter(gathered).numpy().tolist() == [[0, 1], [0, 0], [4, 5], [0, 0],
                                                         [8, 9], [0, 0]]
    assert tokens.zero_padding(rows).numpy().tolist() == tokens.scatter(gathered).numpy().tolist()


def test_xla_compiled_calls_that_leave_the_scope_off_match():
    encoder = _encoder()
    features = {name: tf.constant(value) for name, value in _batch(seed=5).items()}

    @tf.function(jit_compile=True, autograph=False)
    def compiled(inputs):
        with unpadded_inference(False):
            return encoder(inputs, training=False)["sequence_output"]

    with unpadded_inference():
        got = compiled(features).numpy()
    want = encoder(features, training=False)["sequence_output"].numpy()
    assert np.abs(got - want).max() <= 1e-5
