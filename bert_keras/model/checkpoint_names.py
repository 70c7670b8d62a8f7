"""The original BERT checkpoint names of every weight, and loading and saving by those names.

Weights are stored under the names of the original TF1 release (`bert/embeddings/word_embeddings`,
`bert/encoder/layer_3/attention/self/query/kernel`, `cls/predictions/output_bias`, ...) with the
original shapes, so a model directory reads like an original checkpoint.
"""

import numpy as np

from bert_keras.common.errors import BertKerasError


class WeightsError(BertKerasError):
    """A checkpoint is missing a weight or holds one of the wrong shape."""


def _dense(prefix, layer):
    return {f"{prefix}/kernel": layer.kernel, f"{prefix}/bias": layer.bias}


def _layer_norm(prefix, layer):
    return {f"{prefix}/gamma": layer.gamma, f"{prefix}/beta": layer.beta}


def encoder_weight_map(encoder):
    """{original name: keras variable} for every weight of an encoder from `build_encoder`."""
    names = {}
    embeddings = encoder.get_layer("embeddings")
    names["bert/embeddings/word_embeddings"] = embeddings.word_embeddings
    names["bert/embeddings/position_embeddings"] = embeddings.position_embeddings
    names["bert/embeddings/token_type_embeddings"] = embeddings.token_type_embeddings
    names.update(_layer_norm("bert/embeddings/LayerNorm", embeddings.layer_norm))
    index = 0
    while True:
        try:
            block = encoder.get_layer(f"transformer_layer_{index}")
        except ValueError:
            break
        prefix = f"bert/encoder/layer_{index}"
        names.update(_dense(f"{prefix}/attention/self/query", block.attention.query))
        names.update(_dense(f"{prefix}/attention/self/key", block.attention.key))
        names.update(_dense(f"{prefix}/attention/self/value", block.attention.value))
        names.update(_dense(f"{prefix}/attention/output/dense", block.attention_output))
        names.update(_layer_norm(f"{prefix}/attention/output/LayerNorm", block.attention_layer_norm))
        names.update(_dense(f"{prefix}/intermediate/dense", block.intermediate))
        names.update(_dense(f"{prefix}/output/dense", block.output_dense))
        names.update(_layer_norm(f"{prefix}/output/LayerNorm", block.output_layer_norm))
        index += 1
    names.update(_dense("bert/pooler/dense", encoder.get_layer("pooler").dense))
    return names


def masked_lm_weight_map(head):
    """{original name: variable} of a `MaskedLMHead` (the tied word embeddings excluded)."""
    names = _dense("cls/predictions/transform/dense", head.transform)
    names.update(_layer_norm("cls/predictions/transform/LayerNorm", head.layer_norm))
    names["cls/predictions/output_bias"] = head.output_bias
    return names


def next_sentence_weight_map(head):
    """{original name: variable} of a `NextSentenceHead`; the kernel is stored [2, hidden]."""
    return {"cls/seq_relationship/output_weights": head.output_weights,
            "cls/seq_relationship/output_bias": head.output_bias}


def assign_weights(variable_map, arrays, source="checkpoint", allow_missing=()):
    """Assigns `arrays[name]` to each variable of `variable_map`, all or nothing.

    Args:
      variable_map: {original name: keras variable}.
      arrays: {original name: array}; names not in `variable_map` are ignored.
      source: the file name used in error messages.
      allow_missing: names that may be absent (left at their initial values).
    Raises:
      WeightsError naming `source` and the variable, before any variable is changed.
    """
    missing = [name for name in variable_map if name not in arrays and name not in allow_missing]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise WeightsError(f"{source}: missing variable(s) {shown}")
    for name, variable in variable_map.items():
        if name in arrays and tuple(np.shape(arrays[name])) != tuple(variable.shape):
            raise WeightsError(
                f"{source}: variable {name} has shape {tuple(np.shape(arrays[name]))}, the model "
                f"expects {tuple(variable.shape)}")
    for name, variable in variable_map.items():
        if name in arrays:
            variable.assign(np.asarray(arrays[name], dtype=variable.dtype))


def collect_weights(variable_map):
    """{original name: np.ndarray} of the current values, e.g. for `write_model_dir`."""
    return {name: np.asarray(variable.numpy()) for name, variable in variable_map.items()}


def encoder_weight_shapes(config):
    """{original name: shape} of every encoder weight for a `BertConfig`, without building a model."""
    hidden, intermediate = config.hidden_size, config.intermediate_size
    shapes = {
        "bert/embeddings/word_embeddings": (config.vocab_size, hidden),
        "bert/embeddings/position_embeddings": (config.max_position_embeddings, hidden),
        "bert/embeddings/token_type_embeddings": (config.type_vocab_size, hidden),
        "bert/embeddings/LayerNorm/gamma": (hidden,),
        "bert/embeddings/LayerNorm/beta": (hidden,),
    }
    for index in range(config.num_hidden_layers):
        prefix = f"bert/encoder/layer_{index}"
        for dense, (fan_in, fan_out) in (("attention/self/query", (hidden, hidden)),
                                         ("attention/self/key", (hidden, hidden)),
                                         ("attention/self/value", (hidden, hidden)),
                                         ("attention/output/dense", (hidden, hidden)),
                                         ("intermediate/dense", (hidden, intermediate)),
                                         ("output/dense", (intermediate, hidden))):
            shapes[f"{prefix}/{dense}/kernel"] = (fan_in, fan_out)
            shapes[f"{prefix}/{dense}/bias"] = (fan_out,)
        for norm in ("attention/output/LayerNorm", "output/LayerNorm"):
            shapes[f"{prefix}/{norm}/gamma"] = (hidden,)
            shapes[f"{prefix}/{norm}/beta"] = (hidden,)
    shapes["bert/pooler/dense/kernel"] = (hidden, hidden)
    shapes["bert/pooler/dense/bias"] = (hidden,)
    return shapes


def pretraining_head_shapes(config):
    """{original name: shape} of the masked LM and next-sentence head weights."""
    hidden = config.hidden_size
    return {
        "cls/predictions/transform/dense/kernel": (hidden, hidden),
        "cls/predictions/transform/dense/bias": (hidden,),
        "cls/predictions/transform/LayerNorm/gamma": (hidden,),
        "cls/predictions/transform/LayerNorm/beta": (hidden,),
        "cls/predictions/output_bias": (config.vocab_size,),
        "cls/seq_relationship/output_weights": (2, hidden),
        "cls/seq_relationship/output_bias": (2,),
    }


def check_shapes(arrays, expected, source, required=True):
    """Checks `arrays` against {name: shape}; raises WeightsError naming `source` and the variable."""
    missing = [name for name in expected if name not in arrays]
    if required and missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise WeightsError(f"{source}: missing variable(s) {shown}")
    for name, shape in expected.items():
        if name in arrays and tuple(np.shape(arrays[name])) != tuple(shape):
            raise WeightsError(f"{source}: variable {name} has shape {tuple(np.shape(arrays[name]))}, "
                               f"the config implies {tuple(shape)}")
