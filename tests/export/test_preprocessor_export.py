"""The TF Hub-style preprocessor export, reloaded from a copy in a process without bert_keras."""

import shutil

import numpy as np
import pytest

from helpers.export_helpers import run_fresh, word_vocab, write_pretrained_dir

SEQ = 16
TEXTS = ["Bob lives in Paris, the capital of France.", "Unaffable CAFÉ naïve über!",
         "中国 日本 hello world", "The the THE $100% (playing)", "un\u00adaffable \u2011 \u2033",
         "Hello" * 50, "a " * 30]
TEXTS_B = ["who lives in paris?", "", "a", "the " * 40, "?", "bob", "alice"]
BAD = [b"", b"?!...,;", "\u2603\u2604 \U0001F600".encode(), b"bob \xff\xfe lives\xe2\x82",
       (" ".join(["paris is the capital of france"] * 400)).encode(), b"\x00\x01 \t\n bob"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    from bert_keras.export.preprocessor_export import build_preprocessor_module

    root = tmp_path_factory.mktemp("preprocessor_export")
    model_dir = str(root / "model")
    write_pretrained_dir(model_dir, word_vocab())
    module = build_preprocessor_module(model_dir, seq_length=SEQ)
    import tensorflow as tf

    tf.saved_model.save(module, str(root / "original"), signatures=module.signatures())
    # The vocabulary travels as an asset: a copy works once the original and the model
    # directory are gone.
    shutil.copytree(root / "original", root / "copy")
    shutil.rmtree(root / "original")
    shutil.rmtree(model_dir)
    return {"root": root, "module": module, "vocab": word_vocab()}


_CHILD = '''
import time

def numpy_dict(d):
    return {k: v.numpy() for k, v in d.items()}

start = time.perf_counter()
obj = tf.saved_model.load(EXPORT_DIR)
results["load_seconds"] = time.perf_counter() - start
texts, texts_b = tf.constant(TEXTS), tf.constant(TEXTS_B)
results["call"] = numpy_dict(obj(texts))
tokens = obj.tokenize(texts)
tokens_b = obj.tokenize(texts_b)
results["tokenize"] = tokens.to_list()
results["tokenize_type"] = (type(tokens).__name__, tokens.dtype.name, tokens.shape.rank,
                            tokens.ragged_rank)
results["special"] = {k: int(v) for k, v in obj.tokenize.get_special_tokens_dict().items()}
results["id_to_token"] = [t.decode() for t in obj.tokenize.id_to_token(tf.range(8)).numpy()]
results["pack_pair"] = numpy_dict(obj.bert_pack_inputs([tokens, tokens_b], seq_length=12))
results["pack_pair_rank1"] = numpy_dict(obj.bert_pack_inputs(
    [tokens.merge_dims(1, 2), tokens_b.merge_dims(1, 2)], seq_length=tf.constant(12)))
results["pack_single_default"] = numpy_dict(obj.bert_pack_inputs([tokens]))
traced = tf.function(lambda t: obj.bert_pack_inputs([t])).get_concrete_function(
    tf.RaggedTensorSpec([None, None, None], tf.int32, ragged_rank=2))
results["pack_default_shapes"] = sorted((k, v.shape.as_list())
                                        for k, v in traced.structured_outputs.items())
results["pack_single_rank1_long"] = numpy_dict(obj.bert_pack_inputs([tokens.merge_dims(1, 2)],
                                                                    seq_length=64))
results["longest_short"] = numpy_dict(obj.bert_pack_inputs_to_longest(
    [obj.tokenize(tf.constant(["bob", "who lives in paris?"]))], seq_length=64))
results["longest_pair"] = numpy_dict(obj.bert_pack_inputs_to_longest([tokens[:3], tokens_b[:3]],
                                                                     seq_length=64))
results["pack_pair_64"] = numpy_dict(obj.bert_pack_inputs([tokens[:3], tokens_b[:3]],
                                                          seq_length=64))
results["longest_default"] = numpy_dict(obj.bert_pack_inputs_to_longest([tokens]))
results["seq_length"] = int(obj.seq_length.numpy())
results["do_lower_case"] = bool(obj.do_lower_case.numpy())
results["assets"] = sorted(os.listdir(os.path.join(EXPORT_DIR, "assets")))
signature = obj.signatures["serving_default"]
results["signature"] = (
    sorted((k, s.dtype.name, s.shape.as_list())
           for k, s in signature.structured_input_signature[1].items()),
    sorted((k, s.dtype.name, s.shape.as_list()) for k, s in signature.structured_outputs.items()))
results["signature_call"] = numpy_dict(signature(text=texts))
results["op_types"] = graph_op_types(signature)
results["bad"] = numpy_dict(obj(tf.constant(BAD)))
results["bad_tokens"] = obj.tokenize(tf.constant(BAD)).to_list()
results["bad_pair"] = numpy_dict(obj.bert_pack_inputs(
    [obj.tokenize(tf.constant(BAD)), obj.tokenize(tf.constant(BAD[::-1]))], seq_length=8))
results["empty"] = numpy_dict(obj(tf.constant([], tf.string)))
results["empty_tokens_shape"] = obj.tokenize(tf.constant([], tf.string)).shape.as_list()
try:
    obj.bert_pack_inputs([tokens, tokens_b], seq_length=2)
    results["short_error"] = None
except tf.errors.InvalidArgumentError as error:
    results["short_error"] = error.message
'''


@pytest.fixture(scope="module")
def loaded(exported):
    return run_fresh(_CHILD, EXPORT_DIR=str(exported["root"] / "copy"), TEXTS=TEXTS,
                     TEXTS_B=TEXTS_B, BAD=BAD)


def _python_ids(vocab, texts):
    """Ids of the pure-Python reference tokenizer (the original's rules), per word."""
    from helpers.reference_tokenization import ReferenceWordTokenizer

    reference = ReferenceWordTokenizer(vocab, do_lower_case=True).reference
    return [reference.tokenize(text) for text in texts]


def test_tokenize_gives_the_original_ids(exported, loaded):
    assert loaded["tokenize_type"] == ("RaggedTensor", "int32", 3, 2)
    assert loaded["tokenize"] == _python_ids(exported["vocab"], TEXTS)
    # The same ids as the in-memory module and the project's in-graph tokenizer.
    import tensorflow as tf

    in_memory = exported["module"].tokenize(tf.constant(TEXTS)).to_list()
    assert loaded["tokenize"] == in_memory


def test_call_and_pair_packing_match_the_fine_tuning_pipeline(exported, loaded):
    from bert_keras.finetuning.tasks import encoding
    from helpers.export_helpers import finetuning_tokenizer

    tokenizer = finetuning_tokenizer(exported["vocab"], exported["root"])
    tokenizer.prepare(TEXTS + TEXTS_B)
    single = encoding.encode_texts(TEXTS, None, tokenizer.tokenize_word, exported["vocab"],
                                   max_seq_length=SEQ)
    pair = encoding.encode_texts(TEXTS, TEXTS_B, tokenizer.tokenize_word, exported["vocab"],
                                 max_seq_length=12)
    for name in single:
        np.testing.assert_array_equal(loaded["call"][name], single[name], err_msg=name)
        np.testing.assert_array_equal(loaded["signature_call"][name], single[name])
        np.testing.assert_array_equal(loaded["pack_single_default"][name], single[name])
        np.testing.assert_array_equal(loaded["pack_pair"][name], pair[name], err_msg=name)
        np.testing.assert_array_equal(loaded["pack_pair_rank1"][name], pair[name])
        assert loaded["call"][name].dtype == np.int32
    assert loaded["pack_single_rank1_long"]["input_word_ids"].shape == (len(TEXTS), 64)
    # The default length is static in a graph that calls it (a Keras input's shape).
    assert loaded["pack_default_shapes"] == [(name, [None, SEQ]) for name in sorted(single)]
    # "Hello" * 50 is one word of 250 characters: [UNK], as the original (over 200).
    assert loaded["tokenize"][5] == [[1]]


def test_packing_to_the_batch_s_longest(loaded):
    # Two short texts: 16 positions (the longest, 7, rounded up to 16) instead of 64.
    short = loaded["longest_short"]
    assert short["input_word_ids"].shape == (2, 16)
    assert short["input_mask"].sum(1).tolist() == [3, 7]
    # The same rows as the fixed length, cut where every row is padding.
    pair, fixed = loaded["longest_pair"], loaded["pack_pair_64"]
    length = pair["input_word_ids"].shape[1]
    assert length % 16 == 0 and length < 64
    assert fixed["input_mask"].sum(1).max() <= length
    for name in fixed:
        np.testing.assert_array_equal(pair[name], fixed[name][:, :length], err_msg=name)
        assert not fixed[name][:, length:].any()
    # Never longer than seq_length (the export's 16 by default here).
    assert loaded["longest_default"]["input_word_ids"].shape == (len(TEXTS), SEQ)


def test_tf_hub_names_special_ids_and_asset(exported, loaded):
    from bert_keras.text.vocab import Vocabulary

    expected = Vocabulary(exported["vocab"]).special_ids()
    expected["vocab_size"] = len(exported["vocab"])
    assert loaded["special"] == expected
    assert loaded["id_to_token"] == exported["vocab"][:8]
    assert loaded["assets"] == ["vocab.txt"]
    assert loaded["seq_length"] == SEQ and loaded["do_lower_case"] is True
    assert not {"PyFunc", "EagerPyFunc", "PyFuncStateless"} & set(loaded["op_types"])
    assert loaded["signature"] == (
        [("text", "string", [None])],
        [(name, "int32", [None, SEQ]) for name in
         ("input_mask", "input_type_ids", "input_word_ids")])


def test_bad_input(exported, loaded):
    bad = loaded["bad"]
    assert bad["input_word_ids"].shape == (len(BAD), SEQ)
    # Empty text and text the tokenizer drops entirely: just [CLS] [SEP].
    assert bad["input_word_ids"][0].tolist()[:3] == [2, 3, 0]
    assert bad["input_mask"][5].sum() >= 3  # "bob" survives the control characters
    assert bad["input_mask"][4].sum() == SEQ  # truncated, not an error
    # Unknown characters: [UNK] words, as the original.
    assert loaded["bad_tokens"][2] == _python_ids(exported["vocab"], [BAD[2].decode()])[0] \
        == [[1], [1]]
    # Invalid UTF-8 bytes are dropped (the original drops U+FFFD), the rest tokenized.
    assert loaded["bad_tokens"][3] == _python_ids(exported["vocab"], ["bob  lives"])[0]
    assert loaded["bad_pair"]["input_word_ids"].shape == (len(BAD), 8)
    assert loaded["empty"]["input_word_ids"].shape == (0, SEQ)
    assert loaded["empty_tokens_shape"][0] == 0
    assert "seq_length" in loaded["short_error"]
