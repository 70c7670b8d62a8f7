"""The masked LM and next-sentence heads against the original computation in NumPy."""

import dataclasses
import math

import numpy as np
import pytest

import bert_keras
from bert_keras.model import checkpoint_names
from bert_keras.model.config import BertConfig
from bert_keras.model.pretraining_model import pretraining_weight_map
from helpers.model_fixtures import numpy_bert, random_weights

CONFIG = BertConfig.from_preset("tiny", vocab_size=50, max_position_embeddings=16)


def _gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def _with_random_weights(config, seed, **kwargs):
    """A pre-training model and the random weights (by original name) it was given."""
    model = bert_keras.build_pretraining_model(config, **kwargs)
    shapes = dict(checkpoint_names.encoder_weight_shapes(config))
    shapes.update(checkpoint_names.pretraining_head_shapes(config))
    arrays = random_weights(shapes, seed=seed, scale=0.2)
    checkpoint_names.assign_weights(pretraining_weight_map(model), arrays)
    return model, arrays


def test_heads_match_the_original_computation():
    model, arrays = _with_random_weights(CONFIG, seed=7)

    rng = np.random.default_rng(0)
    ids = rng.integers(5, 50, (2, 12)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[1, 8:] = 0
    types = np.zeros_like(ids)
    positions = np.array([[1, 4, 7], [2, 3, 0]], np.int32)
    outputs = model({"input_word_ids": ids, "input_mask": mask, "input_type_ids": types,
                     "masked_lm_positions": positions})

    sequence, pooled, _ = numpy_bert(arrays, CONFIG, ids, mask, types)
    gathered = np.stack([sequence[row, positions[row]] for row in range(2)])  # [2, 3, hidden]
    hidden = _gelu(gathered @ arrays["cls/predictions/transform/dense/kernel"]
                   + arrays["cls/predictions/transform/dense/bias"])
    mean = hidden.mean(-1, keepdims=True)
    variance = hidden.var(-1, keepdims=True)
    hidden = ((hidden - mean) / np.sqrt(variance + 1e-12) * arrays["cls/predictions/transform/LayerNorm/gamma"]
              + arrays["cls/predictions/transform/LayerNorm/beta"])
    mlm_logits = hidden @ arrays["bert/embeddings/word_embeddings"].T + arrays["cls/predictions/output_bias"]
    nsp_logits = pooled @ arrays["cls/seq_relationship/output_weights"].T + arrays["cls/seq_relationship/output_bias"]

    assert outputs["mlm_logits"].shape == (2, 3, 50)
    np.testing.assert_allclose(outputs["mlm_logits"], mlm_logits, atol=1e-4)
    np.testing.assert_allclose(outputs["next_sentence_logits"], nsp_logits, atol=1e-4)


def test_output_projection_is_tied_to_the_word_embeddings():
    model = bert_keras.build_pretraining_model(CONFIG)
    embeddings = model.encoder.get_layer("embeddings").word_embeddings
    assert model.get_layer("masked_lm").embeddings.word_embeddings is embeddings
    # One variable, counted once among the trainable weights.
    assert sum(w is embeddings for w in model.trainable_weights) == 1


def test_no_next_sentence_ablation():
    model = bert_keras.build_pretraining_model(CONFIG, next_sentence=False, causal=True)
    assert list(model.output) == ["mlm_logits"]
    assert not any(name.startswith("cls/seq_relationship") for name in pretraining_weight_map(model))


@pytest.mark.parametrize("next_sentence,causal,implementation", [
    (True, False, "softmax"), (False, True, "softmax"), (True, True, "fused")])
def test_the_last_layer_at_the_read_positions_trains_as_the_whole_encoder(
        next_sentence, causal, implementation):
    # The pre-training model computes its last layer at the masked positions (and the first)
    # only: the same logits and the same gradients for every weight as the whole encoder's
    # sequence output gathered there (dropout off, so that the two compare).
    import tensorflow as tf
    config = dataclasses.replace(CONFIG, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model, _ = _with_random_weights(config, seed=3, causal=causal, next_sentence=next_sentence,
                                    attention_implementation=implementation)
    rng = np.random.default_rng(1)
    ids = rng.integers(5, 50, (3, 12)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[1, 7:] = 0
    inputs = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": (ids % 2).astype(np.int32),
              "masked_lm_positions": np.array([[1, 4, 11], [2, 6, 0], [9, 3, 5]], np.int32)}
    upstream = {"mlm_logits": rng.normal(size=(3, 3, 50)), "next_sentence_logits": rng.normal(size=(3, 2))}

    def whole_encoder(training):
        encoder_outputs = model.encoder({name: inputs[name] for name in model.encoder.input},
                                        training=training)
        outputs = {"mlm_logits": model.get_layer("masked_lm")(
            encoder_outputs["sequence_output"], inputs["masked_lm_positions"])}
        if next_sentence:
            outputs["next_sentence_logits"] = model.get_layer("next_sentence")(
                encoder_outputs["pooled_output"])
        return outputs

    results = {}
    for name, forward in (("at positions", lambda training: model(inputs, training=training)),
                          ("whole", whole_encoder)):
        with tf.GradientTape() as tape:
            outputs = forward(True)
            loss = sum(tf.reduce_sum(outputs[key] * upstream[key]) for key in outputs)
        gradients = tape.gradient(loss, model.trainable_variables)
        results[name] = ({key: np.asarray(value) for key, value in forward(False).items()},
                         [None if g is None else tf.convert_to_tensor(g).numpy() for g in gradients])
    (outputs, gradients), (reference, reference_gradients) = results["at positions"], results["whole"]
    assert sorted(outputs) == sorted(reference) == sorted(upstream)[:1 + next_sentence]
    for key in outputs:
        np.testing.assert_allclose(outputs[key], reference[key], atol=1e-5, err_msg=key)
    assert sum(g is not None for g in gradients) >= 30
    for variable, ours, theirs in zip(model.trainable_variables, gradients, reference_gradients):
        assert (ours is None) == (theirs is None), variable.path
        if ours is not None:
            np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4, err_msg=variable.path)
