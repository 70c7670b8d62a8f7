"""Exports the BERT preprocessor as a TF Hub-style SavedModel ("BERT preprocessor" API).

(Work in progress: the packing part waits for `bert_keras.packing`.)
"""

import tensorflow as tf

from bert_keras import model_dir as model_dir_lib


def build_tokenizer(model_dir):
    """The in-graph `bert_keras.tokenizer.BertTokenizer` of a model directory."""
    from bert_keras.tokenizer import BertTokenizer

    return BertTokenizer(model_dir_lib.vocab_path(model_dir),
                         lower_case=model_dir_lib.read_do_lower_case(model_dir))
