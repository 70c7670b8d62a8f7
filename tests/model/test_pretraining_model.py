"""The masked LM and next-sentence heads against the original computation in NumPy."""

import math

import numpy as np

import bert_keras
from bert_keras.model import checkpoint_names
from bert_keras.model.config import BertConfig
from bert_keras.model.pretraining_model import pretraining_weight_map
from model_fixtures import numpy_bert, random_weights

CONFIG = BertConfig.from_preset("tiny", vocab_size=50, max_position_embeddings=16)


def _gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def test_heads_match_the_original_computation():
    model = bert_keras.build_pretraining_model(CONFIG)
    shapes = dict(checkpoint_names.encoder_weight_shapes(CONFIG))
    shapes.update(checkpoint_names.pretraining_head_shapes(CONFIG))
    arrays = random_weights(shapes, seed=7, scale=0.2)
    checkpoint_names.assign_weights(pretraining_weight_map(model), arrays)

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
