"""Raw text to encoder inputs: the in-graph tokenizer followed by packing.

Example:

>>> import tensorflow as tf, bert_keras
>>> preprocessor = bert_keras.load_preprocessor("models/minilm", seq_length=128)  # doctest: +SKIP
>>> inputs = preprocessor(tf.constant(["Hello world!"]))  # doctest: +SKIP
>>> pairs = preprocessor([tf.constant(["A question?"]), tf.constant(["A context."])])  # doctest: +SKIP
"""

import tensorflow as tf

from bert_keras.text.packing import bert_pack_inputs
from bert_keras.text.tokenizer import BertTokenizer


class BertPreprocessor(tf.Module):
    """Tokenizes one or two string segments and packs them to `seq_length`.

    Calling it on a string tensor [batch] (one segment) or a list of two string tensors
    (pairs, truncated longest-first) returns the dict of `input_word_ids`, `input_mask` and
    `input_type_ids`, int32 [batch, seq_length]. Usable eagerly, in `tf.function` and in
    `tf.data` (`dataset.map(preprocessor)`).

    Args:
      vocab_file: the WordPiece `vocab.txt`.
      lower_case: whether the vocabulary is uncased.
      seq_length: the default packed length.
    """

    def __init__(self, vocab_file, lower_case, seq_length=128, name=None):
        super().__init__(name=name)
        self.tokenizer = BertTokenizer(vocab_file, lower_case)
        self.seq_length = int(seq_length)
        self.special_ids = self.tokenizer.special_ids

    def tokenize(self, strings):
        """int32 RaggedTensor [batch, (words), (wordpieces)]."""
        return self.tokenizer.tokenize(strings)

    def bert_pack_inputs(self, segments, seq_length=None):
        """Packs a list of 1 or 2 ragged segments (see `bert_keras.text.packing.bert_pack_inputs`)."""
        return bert_pack_inputs(segments, seq_length or self.seq_length, self.special_ids)

    def __call__(self, strings, seq_length=None):
        if isinstance(strings, (list, tuple)) and len(strings) and not isinstance(strings[0], str):
            segments = [self.tokenize(segment) for segment in strings]
        else:
            segments = [self.tokenize(strings)]
        if len(segments) > 2:
            raise ValueError(f"the preprocessor takes one or two segments, got {len(segments)}")
        return self.bert_pack_inputs(segments, seq_length)
