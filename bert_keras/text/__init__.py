"""Text to model inputs: the vocabulary, its builder, the in-graph WordPiece tokenizer (the
original `tokenization.py`'s ids), packing into `[CLS] A [SEP] B [SEP]`, the preprocessor and the
sentence splitter. (`bert_keras.load_preprocessor` reads one from a model directory.)
"""

from bert_keras import lazy_exports

__getattr__, __all__ = lazy_exports("bert_keras.text", {
    "Vocabulary": "bert_keras.text.vocab",
    "VocabularyError": "bert_keras.text.vocab",
    "BertTokenizer": "bert_keras.text.tokenizer",
    "bert_pack_inputs": "bert_keras.text.packing",
    "BertPreprocessor": "bert_keras.text.preprocessor",
    "build_vocabulary": "bert_keras.text.vocab_builder",
    "split_sentences": "bert_keras.text.sentence_splitting",
})
