"""The BERT pre-training model: encoder + masked LM head + next-sentence head."""

import keras
from keras import ops

from bert_keras.model import checkpoint_names
from bert_keras.model.encoder import build_encoder, encoder_inputs, sequence_output_at
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
    The encoder's last layer computes only the rows the heads read (`sequence_output_at`); the
    weights are the encoder's, in `model.encoder`.

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
    # The losses read the last layer at the masked positions (and the first, for next-sentence
    # prediction): it computes only those rows (`sequence_output_at`).
    positions = inputs["masked_lm_positions"]
    if next_sentence:
        positions = ops.concatenate([ops.zeros_like(positions[:, :1]), positions], axis=1)
    sequence_output = sequence_output_at(encoder, inputs, positions)  # [b, (1 +) p, hidden]
    mlm_head = MaskedLMHead(encoder.get_layer("embeddings"), hidden_act=config.hidden_act,
                            initializer_range=config.initializer_range,
                            layer_norm_eps=config.layer_norm_eps, name="masked_lm", dtype=dtype)
    if not next_sentence:
        outputs = {"mlm_logits": mlm_head(sequence_output)}
    else:
        outputs = {"mlm_logits": mlm_head(sequence_output[:, 1:])}
        nsp_head = NextSentenceHead(config.hidden_size, config.initializer_range,
                                    name="next_sentence", dtype=dtype)
        pooled_output = encoder.get_layer("pooler")(sequence_output)  # from position 0
        outputs["next_sentence_logits"] = nsp_head(pooled_output)
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
