"""Exports the BERT preprocessor as a TF Hub-style SavedModel ("BERT preprocessor" API).

What a consumer finds after `import tensorflow_text` and `obj = tf.saved_model.load(export_dir)`:

- `obj(strings)`: string [batch] -> dict of int32 [batch, seq_length] `input_word_ids`,
  `input_mask`, `input_type_ids` (one segment, [CLS] text [SEP], cut to seq_length - 2
  wordpieces, padded).
- `obj.tokenize(strings)`: int32 RaggedTensor [batch, (words), (wordpieces)], the ids of the
  original BERT `FullTokenizer` (`bert_keras.text.tokenizer.BertTokenizer`).
  `obj.tokenize.get_special_tokens_dict()`: int32 scalars `padding_id`, `unknown_id`,
  `start_of_sequence_id`, `end_of_segment_id`, `mask_id`, `vocab_size`.
  `obj.tokenize.id_to_token(ids)`: int32 [n] -> string [n], through the vocabulary asset.
- `obj.bert_pack_inputs(segments, seq_length=N)`: `segments` is a list of one or two int32
  RaggedTensors [batch, (words), (wordpieces)] or [batch, (wordpieces)]; returns the dict of
  the three int32 [batch, N] inputs, `[CLS] A [SEP] (B [SEP])`, type ids 0 for A and 1 for B.
  A pair too long loses wordpieces from the end of the currently longer segment (the second
  when equal), the original `_truncate_seq_pair`, as fine-tuning packs them. `seq_length`
  defaults to the export's; traced for 1 and 2 segments of ragged rank 1 and 2.
- `obj.bert_pack_inputs_to_longest(segments, seq_length=N)`: the same, then cut to the batch's
  longest sequence rounded up to a multiple of 16 (at most N): int32 [batch, L]. The encoder
  takes any length, and its outputs at the real tokens are those of the fixed length, for the
  cost of the batch's longest text instead of N (an extension of the TF Hub API, which packs to
  a fixed length).
- `obj.vocab_file` (a SavedModel asset, copied with the directory), `obj.seq_length`,
  `obj.do_lower_case` (variables), `obj.signatures["serving_default"]` (input `text`).

Example:

>>> export_preprocessor_from_model_dir("models/minilm", "exports/preprocessor")  # doctest: +SKIP
>>> import tensorflow as tf, tensorflow_text  # doctest: +SKIP
>>> preprocessor = tf.saved_model.load("exports/preprocessor")  # doctest: +SKIP
>>> tokens = [preprocessor.tokenize(tf.constant(["Who?"])),
...           preprocessor.tokenize(tf.constant(["Bob."]))]  # doctest: +SKIP
>>> preprocessor.bert_pack_inputs(tokens, seq_length=16)["input_type_ids"]  # doctest: +SKIP
"""

import os

import tensorflow as tf

from bert_keras.export.encoder_export import Exportable, save_module, tracing_as_saved
from bert_keras.export.raw_text import cut_to_longest
from bert_keras.modeldir.model_dir import ModelDir
from bert_keras.text.packing import flat_segment, pack_segments

DEFAULT_SEQ_LENGTH = 128
SPECIAL_TOKEN_NAMES = ("padding_id", "unknown_id", "start_of_sequence_id", "end_of_segment_id",
                       "mask_id")


def build_tokenizer(model_dir):
    """The in-graph `bert_keras.text.tokenizer.BertTokenizer` of a model directory (a path or a
    `ModelDir`)."""
    from bert_keras.text.tokenizer import BertTokenizer

    model_dir = ModelDir.of(model_dir)
    return BertTokenizer(model_dir.vocab_file, lower_case=model_dir.do_lower_case)


# -------------------------------------------------------------------------------- module
class TokenizeModule(Exportable):
    """`preprocessor.tokenize`: the tokenizer with the TF Hub names."""

    def __init__(self, tokenizer, special_ids, vocab_size, vocab_asset):
        super().__init__()
        self.tokenizer = tokenizer
        self.vocab_file = vocab_asset
        self._special = dict(special_ids, vocab_size=vocab_size)
        # A table read from the asset at load time: it works only if the asset is found.
        initializer = tf.lookup.TextFileInitializer(
            vocab_asset, tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER, tf.string,
            tf.lookup.TextFileIndex.WHOLE_LINE)
        self._id_to_token_table = tf.lookup.StaticHashTable(initializer, default_value="")
        with tracing_as_saved():
            self.__call__.get_concrete_function()
            self.get_special_tokens_dict.get_concrete_function()
            self.id_to_token.get_concrete_function()

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def __call__(self, strings):
        return tf.cast(self.tokenizer.tokenize(strings), tf.int32)

    @tf.function(input_signature=[], autograph=False)
    def get_special_tokens_dict(self):
        return {name: tf.constant(value, tf.int32) for name, value in self._special.items()}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32)], autograph=False)
    def id_to_token(self, ids):
        return self._id_to_token_table.lookup(tf.cast(ids, tf.int64))


class PackInputsModule(Exportable):
    """`preprocessor.bert_pack_inputs`: one or two segments, ragged rank 1 or 2.

    Given `plain`, the `__call__` of such a module, it is `preprocessor.bert_pack_inputs_to_longest`:
    the plain module's packed inputs cut to the batch's longest sequence, rounded up to a
    multiple of 16 (`bert_keras.export.raw_text.cut_to_longest`).
    """

    def __init__(self, special_ids, seq_length, plain=None):
        super().__init__()
        # Not tracked: the plain module is saved as `bert_pack_inputs`; its traced functions
        # are called here, so the packing graphs are built (and written) once.
        object.__setattr__(self, "_plain", plain)
        if plain is None:  # the packing itself; a cutting module calls the plain one's
            self._cls = special_ids["start_of_sequence_id"]
            self._sep = special_ids["end_of_segment_id"]
            self._pad = special_ids["padding_id"]
        self._default_seq_length = seq_length
        # tensorflow/hub#747: trace every form a caller may pass, so reloading never retraces.
        # The spec is named as the saved signature names it: saving then finds this trace.
        seq_length_spec = tf.TensorSpec([], tf.int32, name="seq_length")
        with tracing_as_saved():
            for ragged_rank in (1, 2):
                for num_segments in (1, 2):
                    spec = tf.RaggedTensorSpec([None] * (ragged_rank + 1), tf.int32,
                                               ragged_rank=ragged_rank)
                    self.__call__.get_concrete_function([spec] * num_segments,
                                                        seq_length=seq_length_spec)
                    self.__call__.get_concrete_function([spec] * num_segments)  # the default

    @tf.function(autograph=False)
    def __call__(self, inputs, seq_length=None):
        if seq_length is None:
            # The default length calls the form traced with a `seq_length` tensor (a call in
            # the graph, not a second packing graph: half the traces at export).
            features = self.__call__(inputs, seq_length=tf.constant(self._default_seq_length))
            if self._plain is None:
                for value in features.values():
                    value.set_shape([None, self._default_seq_length])
            return features
        if self._plain is not None:
            features, _ = cut_to_longest(self._plain(inputs, seq_length=seq_length), seq_length)
            return features
        segments = [flat_segment(segment) for segment in tf.nest.flatten(inputs)]
        checks = [tf.debugging.assert_greater_equal(
            seq_length, len(segments) + 1,
            message=f"seq_length must leave room for [CLS] and {len(segments)} [SEP]")]
        with tf.control_dependencies(checks):
            seq_length = tf.identity(seq_length)
        return pack_segments(segments, seq_length, self._cls, self._sep, self._pad)


class PreprocessorModule(Exportable):
    """The object written by `export_preprocessor`, callable in memory as after loading.

    Args:
      tokenizer: a `bert_keras.text.tokenizer.BertTokenizer`.
      vocab_file: the vocab.txt to copy into the SavedModel's assets.
      seq_length: the length `__call__` packs to and `bert_pack_inputs`' default.
    """

    def __init__(self, tokenizer, vocab_file, seq_length=DEFAULT_SEQ_LENGTH):
        super().__init__()
        special_ids = {name: int(tokenizer.special_ids[name]) for name in SPECIAL_TOKEN_NAMES}
        self._seq_length = int(seq_length)
        if self._seq_length < 3:
            raise ValueError(f"seq_length must be at least 3, got {seq_length}")
        self.vocab_file = tf.saved_model.Asset(vocab_file)
        self.tokenize = TokenizeModule(tokenizer, special_ids, int(tokenizer.vocab_size),
                                       self.vocab_file)
        self.bert_pack_inputs = PackInputsModule(special_ids, self._seq_length)
        self.bert_pack_inputs_to_longest = PackInputsModule(
            special_ids, self._seq_length, plain=self.bert_pack_inputs.__call__)
        self.seq_length = tf.Variable(self._seq_length, trainable=False, name="seq_length")
        self.do_lower_case = tf.Variable(bool(tokenizer.lower_case), trainable=False,
                                         name="do_lower_case")
        with tracing_as_saved():
            self.__call__.get_concrete_function()

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def __call__(self, strings):
        segment = flat_segment(self.tokenize(strings))
        special = self.bert_pack_inputs
        return pack_segments([segment], self._seq_length, special._cls, special._sep,
                             special._pad)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")],
                 autograph=False)
    def serving_default(self, text):
        return self.__call__(text)

    def signatures(self):
        return {"serving_default": self.serving_default.get_concrete_function()}


def build_preprocessor_module(model_dir, seq_length=DEFAULT_SEQ_LENGTH, tokenizer=None):
    """The exportable preprocessor of a model directory (a path or a `ModelDir`)."""
    model_dir = ModelDir.of(model_dir)
    tokenizer = tokenizer or build_tokenizer(model_dir)
    return PreprocessorModule(tokenizer, os.path.abspath(model_dir.vocab_file), seq_length)


def export_preprocessor_from_model_dir(model_dir, export_dir, seq_length=DEFAULT_SEQ_LENGTH):
    """Writes the TF Hub-style preprocessor SavedModel of a model directory; returns export_dir."""
    return save_module(build_preprocessor_module(model_dir, seq_length), export_dir)


__all__ = ["PreprocessorModule", "TokenizeModule", "PackInputsModule", "build_tokenizer",
           "build_preprocessor_module", "export_preprocessor_from_model_dir", "DEFAULT_SEQ_LENGTH"]
