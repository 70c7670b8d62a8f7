"""Prediction targets made on the fly in `tf.data`: dynamic masking and left-to-right targets.

Dynamic masking (as in RoBERTa) draws a new mask every time a sequence is read, so every epoch
sees different masks; the masking rule is the paper's:

- `num_to_predict = min(max_predictions_per_seq, max(1, round(num_tokens * masked_lm_prob)))`,
  where `num_tokens` counts [CLS] and [SEP] (half rounds to even, as Python's `round`);
- the positions are drawn uniformly among the real tokens other than [CLS] and [SEP];
- each chosen token becomes [MASK] (80%), stays itself (10%) or becomes a token drawn uniformly
  from the whole vocabulary (10%); positions are sorted, unused slots are 0 with weight 0.

The draws are stateless: the random stream of a batch is a function of `seed` and the index of
its first record in the (repeated, shuffled) record stream, so a resumed run draws exactly the
masks an uninterrupted one would have drawn.

Input records can be

- *unmasked* records (`UNMASKED_FEATURES`): `input_ids`, `input_mask`, `segment_ids` int64
  [max_seq_length] and `next_sentence_labels` int64 [1], no `masked_lm_*` features;
- ordinary pre-training records: their masked tokens are first put back
  (`restore_masked_tokens`), then masked anew.

The left-to-right ablation ("LTR & No NSP" in the paper) uses `next_token_targets`: the original
tokens as input under a causal attention mask, and at every position the next token as target.

Example:

>>> import numpy as np
>>> ids = np.array([[2, 10, 11, 12, 13, 3, 0, 0]], "int32")
>>> out = mask_tokens({"input_ids": ids, "input_mask": (ids > 0).astype("int32")},
...                   seed=(1, 0), max_predictions_per_seq=3, vocab_size=20, cls_id=2, sep_id=3,
...                   mask_id=4)
>>> int(out["masked_lm_weights"].numpy().sum())  # round(6 * 0.15) = 1
1
"""

import numpy as np
import tensorflow as tf

from bert_keras.data import masking

UNMASKED_FEATURES = ("input_ids", "input_mask", "segment_ids", "next_sentence_labels")


def unmasked_feature_spec(max_seq_length):
    """The `tf.io.parse_example` spec of unmasked records."""
    return {"input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
            "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
            "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
            "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64)}


def serialize_unmasked(input_ids, input_mask, segment_ids, next_sentence_labels):
    """Serialized unmasked `tf.train.Example`s, one per row of the int arrays [n, seq] / [n]."""
    def int_feature(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))

    records = []
    for ids, mask, segments, label in zip(input_ids, input_mask, segment_ids,
                                          np.reshape(next_sentence_labels, [-1])):
        features = {"input_ids": int_feature(ids), "input_mask": int_feature(mask),
                    "segment_ids": int_feature(segments), "next_sentence_labels": int_feature([label])}
        records.append(tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString())
    return records


def restore_masked_tokens(features):
    """`input_ids` with the original tokens put back at the weighted `masked_lm_positions`.

    Args:
      features: batch dict with `input_ids` [batch, seq] and `masked_lm_positions`,
        `masked_lm_ids`, `masked_lm_weights` [batch, predictions].
    Returns:
      int32 [batch, seq].
    """
    input_ids = tf.cast(features["input_ids"], tf.int32)
    positions = tf.cast(features["masked_lm_positions"], tf.int32)
    masked_ids = tf.cast(features["masked_lm_ids"], tf.int32)
    real = tf.cast(features["masked_lm_weights"], tf.float32) > 0
    current = tf.gather(input_ids, positions, batch_dims=1)  # [batch, predictions]
    # Padding slots (position 0, weight 0) write back the value already there.
    updates = tf.where(real, masked_ids, current)
    batch = tf.shape(positions)[0]
    rows = tf.broadcast_to(tf.range(batch)[:, None], tf.shape(positions))
    indices = tf.stack([rows, positions], axis=-1)  # [batch, predictions, 2]
    return tf.tensor_scatter_nd_update(input_ids, indices, updates)


def mask_tokens(features, seed, max_predictions_per_seq, vocab_size, cls_id, sep_id, mask_id,
                masked_lm_prob=0.15):
    """Draws masked-LM targets for a batch of unmasked sequences.

    Args:
      features: batch dict with `input_ids`, `input_mask` int [batch, seq] (other entries pass
        through unchanged).
      seed: int32/int64 pair for the stateless random ops, e.g. (run seed, first record index).
    Returns:
      The dict with masked `input_ids` int32 [batch, seq] and `masked_lm_positions`,
      `masked_lm_ids` int32 and `masked_lm_weights` float32 [batch, max_predictions_per_seq].
    """
    original = tf.cast(features["input_ids"], tf.int32)
    input_mask = tf.cast(features["input_mask"], tf.int32)
    shape = tf.shape(original)
    batch, seq_length = shape[0], shape[1]
    seeds = tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), num=4)

    candidate = (input_mask > 0) & (original != cls_id) & (original != sep_id)
    num_tokens = tf.reduce_sum(input_mask, axis=1)  # [batch], [CLS] and [SEP] included
    num_to_predict = tf.cast(masking.num_to_predict(tf.cast(num_tokens, tf.float32), masked_lm_prob,
                                                    max_predictions_per_seq, xp=tf), tf.int32)
    num_to_predict = tf.minimum(num_to_predict, tf.reduce_sum(tf.cast(candidate, tf.int32), axis=1))

    # A uniformly random subset of the candidates: the top scores of uniform noise.
    noise = tf.random.stateless_uniform(shape, seeds[0])
    scores = tf.where(candidate, noise, -1.0)
    # Static sizes keep the shapes static (TPUs).
    static_length = original.shape[1]
    k = max_predictions_per_seq if static_length is None else min(max_predictions_per_seq, static_length)
    _, order = tf.math.top_k(scores, k=k)  # [batch, k], random order
    slot = tf.range(k)[None, :]
    chosen = slot < num_to_predict[:, None]  # [batch, k]
    # Sort the chosen positions; unused slots sort last and become position 0.
    positions = tf.sort(tf.where(chosen, order, seq_length), axis=1)
    chosen = positions < seq_length
    positions = tf.where(chosen, positions, 0)
    pad = max_predictions_per_seq - k
    positions = tf.pad(positions, [[0, 0], [0, pad]])
    chosen = tf.pad(chosen, [[0, 0], [0, pad]])

    labels = tf.where(chosen, tf.gather(original, positions, batch_dims=1), 0)
    draw = tf.random.stateless_uniform(tf.shape(positions), seeds[1])
    keep_draw = tf.random.stateless_uniform(tf.shape(positions), seeds[3])
    random_ids = tf.random.stateless_uniform(tf.shape(positions), seeds[2], minval=0,
                                             maxval=vocab_size, dtype=tf.int32)
    replacement, _, _ = masking.replacement(labels, mask_id, random_ids, draw, keep_draw, xp=tf)
    rows = tf.broadcast_to(tf.range(batch)[:, None], tf.shape(positions))
    indices = tf.stack([rows, positions], axis=-1)
    # Unused slots write the token already at position 0 ([CLS]) back.
    current = tf.gather(original, positions, batch_dims=1)
    masked = tf.tensor_scatter_nd_update(original, indices, tf.where(chosen, replacement, current))

    out = dict(features)
    out.update(input_ids=masked, masked_lm_positions=positions, masked_lm_ids=labels,
               masked_lm_weights=tf.cast(chosen, tf.float32))
    return out


def next_token_targets(features):
    """Left-to-right LM targets: predict token i + 1 at every position i of the original tokens.

    Args:
      features: batch dict with `input_ids` (original tokens), `input_mask` [batch, seq].
    Returns:
      The dict with `masked_lm_positions` = 0..seq-2, `masked_lm_ids` = the next tokens and
      `masked_lm_weights` = 1 where the next token is real ([batch, seq - 1]).
    """
    input_ids = tf.cast(features["input_ids"], tf.int32)
    input_mask = tf.cast(features["input_mask"], tf.int32)
    out = dict(features)
    out["input_ids"] = input_ids
    next_ids = input_ids[:, 1:]  # [batch, seq - 1]
    out["masked_lm_positions"] = tf.cumsum(tf.ones_like(next_ids), axis=1) - 1  # 0..seq-2 per row
    out["masked_lm_ids"] = next_ids
    out["masked_lm_weights"] = tf.cast(input_mask[:, 1:], tf.float32)
    return out


__all__ = ["UNMASKED_FEATURES", "unmasked_feature_spec", "serialize_unmasked", "restore_masked_tokens",
           "mask_tokens", "next_token_targets"]
