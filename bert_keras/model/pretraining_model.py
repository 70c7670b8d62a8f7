"""The BERT pre-training model: encoder + masked LM head + next-sentence head."""

import keras

from bert_keras.model import checkpoint_names
from bert_keras.model.encoder import build_encoder, encoder_inputs
from bert_keras.model.pretraining_heads import MaskedLMHead, NextSentenceHead


def build_pretraining_model(config, encoder=None, causal=None, next_sentence=True, dtype=None,
                            attention_implementation="softmax"):
    """The pre-training model on top of an encoder.

    Inputs: the encoder's three int32 [batch, seq_length] inputs and `masked_lm_positions`
    int32 [batch, max_predictions_per_seq].
    Outputs: `mlm_logits` float32 [batch, max_predictions_per_seq, vocab_size] and, unless
    `next_sentence=False` (the paper's "No NSP" ablation), `next_sentence_logits` float32 [batch, 2].
    `causal`: the encoder's attention mask (see `build_encoder`; None: the config's).
    `attention_implementation`: "softmax" or "fused", see `build_encoder`.

    Example:

    >>> import bert_keras
    >>> model = build_pretraining_model(bert_keras.BertConfig.from_preset("tiny", vocab_size=50))
    >>> sorted(model.output)
    ['mlm_logits', 'next_sentence_logits']
    """
    encoder = encoder or build_encoder(config, causal=causal, dtype=dtype,
                                       attention_implementation=attention_implementation)
    inputs = encoder_inputs()
    inputs["masked_lm_positions"] = keras.Input(shape=(None,), dtype="int32",
                                                name="masked_lm_positions")
    encoder_outputs = encoder({name: inputs[name] for name in encoder.input})
    mlm_head = MaskedLMHead(encoder.get_layer("embeddings"), hidden_act=config.hidden_act,
                            initializer_range=config.initializer_range,
                            layer_norm_eps=config.layer_norm_eps, name="masked_lm", dtype=dtype)
    outputs = {"mlm_logits": mlm_head(encoder_outputs["sequence_output"], inputs["masked_lm_positions"])}
    if next_sentence:
        nsp_head = NextSentenceHead(config.hidden_size, config.initializer_range,
                                    name="next_sentence", dtype=dtype)
        outputs["next_sentence_logits"] = nsp_head(encoder_outputs["pooled_output"])
    model = keras.Model(inputs, outputs, name="bert_pretraining")
    model.encoder = encoder
    return model


def pretraining_weight_map(model):
    """{original name: variable} for the encoder and the heads of a pre-training model."""
    names = checkpoint_names.encoder_weight_map(model.encoder)
    names.update(checkpoint_names.masked_lm_weight_map(model.get_layer("masked_lm")))
    try:
        names.update(checkpoint_names.next_sentence_weight_map(model.get_layer("next_sentence")))
    except ValueError:
        pass
    return names
