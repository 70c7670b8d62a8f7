"""SavedModel inputs refused clearly (issue 64): what a consumer sees for inputs of the wrong
rank, dtype, kind or keys.

Inside the SavedModels (a fresh process that cannot import bert_keras, as a consumer loads
them): the signatures check shapes at run time, so a 2-D string batch or a scalar into a task
signature, 1-D ids and a [batch, 0] window are refused naming the input; int64 ids are taken by
the encoder's `__call__` and `.mlm` with the int32 results. In Python, `load_checked` names the
input and what is expected where a raw `tf.saved_model.load` can only say "Could not find
matching concrete function". No file of the exports changes (SHA-256).
"""

import os

import numpy as np
import pytest

from helpers.export_helpers import run_fresh, tiny_config, word_vocab, write_pretrained_dir
from helpers.support import file_hashes


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    import keras

    from bert_keras.export import export_from_model_dir
    from bert_keras.finetuning import task_models
    from bert_keras.text.vocab import Vocabulary

    root = tmp_path_factory.mktemp("serving_inputs")
    tokens = word_vocab()
    write_pretrained_dir(str(root / "pretrained"), tokens, seed=3)
    config = tiny_config(len(tokens))
    keras.utils.set_random_seed(0)
    model = task_models.build_classifier(config, num_labels=3)
    task_models.save_task_model_dir(model, str(root / "classifier"), config, Vocabulary(tokens),
                                    True, {"task": "glue/mnli", "max_seq_length": 16,
                                           "label_names": ["a", "b", "c"]})
    for kind, model_dir in (("encoder", "pretrained"), ("preprocessor", "pretrained"),
                            ("task", "classifier")):
        export_from_model_dir(kind, str(root / model_dir), str(root / kind))
    hashes = {kind: file_hashes(root / kind) for kind in ("encoder", "preprocessor", "task")}
    yield {"root": root, "hidden": config.hidden_size}
    assert {kind: file_hashes(root / kind) for kind in hashes} == hashes


_CONSUMER = '''
encoder = tf.saved_model.load(ROOT + "/encoder")
task = tf.saved_model.load(ROOT + "/task").signatures["serving_default"]
serve = encoder.signatures["serving_default"]
ids = tf.constant([[2, 7, 3, 0]], tf.int32)
good = {"input_word_ids": ids, "input_mask": tf.constant([[1, 1, 1, 0]]),
        "input_type_ids": tf.zeros_like(ids)}

def error_of(call):
    try:
        call()
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return None

results["refused"] = {
    "task [[a, b]]": error_of(lambda: task(text_a=tf.constant([["Bob", "Alice"]]),
                                          text_b=tf.constant([["Paris", "London"]]))),
    "task scalar": error_of(lambda: task(text_a=tf.constant("Bob"), text_b=tf.constant("Paris"))),
    "signature 1-D ids": error_of(lambda: serve(**{k: v[0] for k, v in good.items()})),
    "signature [1, 0]": error_of(lambda: serve(**{k: v[:, :0] for k, v in good.items()})),
    "__call__ [1, 0]": error_of(lambda: encoder({k: v[:, :0] for k, v in good.items()})),
}
results["task one row"] = task(text_a=tf.constant(["Bob"]), text_b=tf.constant(["Paris"]))[
    "probabilities"].numpy()
wide = {k: tf.cast(v, tf.int64) for k, v in good.items()}
results["pooled int32"] = encoder(good)["pooled_output"].numpy()
results["pooled int64"] = encoder(wide)["pooled_output"].numpy()
positions = tf.constant([[1, 2]])
results["mlm int32"] = encoder.mlm(dict(good, masked_lm_positions=positions))["mlm_logits"].numpy()
results["mlm int64"] = encoder.mlm(dict(wide, masked_lm_positions=tf.cast(positions, tf.int64)))[
    "mlm_logits"].numpy()
results["empty batch"] = encoder({k: v[:0] for k, v in good.items()})["pooled_output"].shape
results["dtypes"] = sorted({v.dtype.name for v in encoder.variables})
'''


@pytest.fixture(scope="module")
def consumer(exports):
    return run_fresh(_CONSUMER, ROOT=str(exports["root"]))


def test_signatures_refuse_inputs_of_the_wrong_shape_by_name(consumer):
    refused = consumer["refused"]
    expected = {
        # Was: 2 results for the one row.
        "task [[a, b]]": "Shape of tensor text_a [1,2] is not compatible with expected shape [?]",
        # Was: "slice index 0 of dimension 0 out of bounds".
        "task scalar": "Shape of tensor text_a [] is not compatible with expected shape [?]",
        # Was: "slice index 1 of dimension 0 out of bounds".
        "signature 1-D ids": "is not compatible with expected shape [?,?]",
        # Was: "slice index 0 of dimension 1 out of bounds" in the pooler.
        "signature [1, 0]": "input_word_ids must be [batch, seq_length] with seq_length at least 1",
        "__call__ [1, 0]": "input_word_ids must be [batch, seq_length] with seq_length at least 1",
    }
    for case, text in expected.items():
        message = refused[case]
        assert message and message.startswith("InvalidArgumentError") and text in message, (
            case, message)
    assert "Shape of tensor input_" in refused["signature 1-D ids"]
    assert len(consumer["task one row"]) == 1


def test_int64_ids_give_the_int32_results_and_the_export_stays_float32(exports, consumer):
    np.testing.assert_array_equal(consumer["pooled int64"], consumer["pooled int32"])
    np.testing.assert_array_equal(consumer["mlm int64"], consumer["mlm int32"])
    assert tuple(consumer["empty batch"]) == (0, exports["hidden"])
    assert "float32" in consumer["dtypes"] and not {"bfloat16", "float16"} & set(consumer["dtypes"])


@pytest.fixture(scope="module")
def checked(exports):
    from bert_keras.export.savedmodel_layer import load_checked

    return {kind: load_checked(str(exports["root"] / kind))
            for kind in ("encoder", "preprocessor", "task")}


def test_load_checked_names_the_input_and_what_is_expected(checked):
    import tensorflow as tf

    from bert_keras.export.savedmodel_layer import SavedModelInputError

    encoder, preprocessor = checked["encoder"], checked["preprocessor"]
    task = checked["task"].signatures["serving_default"]
    ids = tf.constant([[2, 7, 3]], tf.int32)
    good = {"input_word_ids": ids, "input_mask": tf.ones_like(ids), "input_type_ids": tf.zeros_like(ids)}
    ints = "expected an int32 tensor [batch, n] or an int64 tensor [batch, n]"
    cases = {
        "float ids": (lambda: encoder({k: tf.cast(v, tf.float32) for k, v in good.items()}),
                      f"inputs['input_mask']: got a float32 tensor of shape [1, 3]; {ints}"),
        "1-D ids": (lambda: encoder({k: v[0] for k, v in good.items()}),
                    f"inputs['input_mask']: got an int32 tensor of shape [3]; {ints}"),
        "missing key": (lambda: encoder({k: v for k, v in good.items() if k != "input_mask"}),
                        "inputs: missing input_mask; expected exactly input_mask, input_type_ids, "
                        "input_word_ids, each an int32 tensor [batch, n]"),
        "unexpected key": (lambda: encoder(dict(good, segment_ids=ids)),
                           "inputs: unexpected segment_ids; expected exactly"),
        "ragged ids": (lambda: encoder({k: tf.RaggedTensor.from_tensor(v) for k, v in good.items()}),
                       "inputs['input_mask']: a RaggedTensor; expected an int32 tensor [batch, n]"),
        "int64 into serve": (lambda: encoder.serve({k: tf.cast(v, tf.int64) for k, v in good.items()}),
                             "serve['input_mask']: got an int64 tensor of shape [1, 3]; expected "
                             "an int32 tensor [batch, n]"),
        "2-D strings": (lambda: preprocessor(tf.constant([["Bob", "Alice"]])),
                        "inputs: got a string tensor of shape [1, 2]; expected a string tensor "
                        "[batch]"),
        "dense segment": (lambda: preprocessor.bert_pack_inputs([tf.constant([[5, 6]])]),
                          "bert_pack_inputs[0]: a dense int32 value; expected a RaggedTensor of "
                          "int32"),
        "int64 segment": (lambda: preprocessor.bert_pack_inputs([tf.ragged.constant([[5, 6]], tf.int64)]),
                          "bert_pack_inputs[0]: got an int64 RaggedTensor of shape [1, None]"),
        "3 segments": (lambda: preprocessor.bert_pack_inputs([tf.ragged.constant([[5, 6]])] * 3),
                       "bert_pack_inputs: 3 items; expected 1 or 2"),
        "task ids": (lambda: task(text_a=tf.constant([1]), text_b=tf.constant([2])),
                     "text_a: got an int32 tensor of shape [1]; expected a string tensor [batch]"),
        "task missing text_b": (lambda: task(text_a=tf.constant(["Bob"])),
                                "serving_default: missing text_b; expected exactly text_a, text_b"),
        "task [[a, b]]": (lambda: task(text_a=tf.constant([["Bob", "Al"]]),
                                       text_b=tf.constant([["a", "b"]])),
                          "text_a: got a string tensor of shape [1, 2]; expected a string tensor"),
    }
    refused = 0
    for case, (call, text) in cases.items():
        with pytest.raises(SavedModelInputError) as raised:
            call()
        assert text in str(raised.value), (case, str(raised.value))
        assert "Could not find matching concrete function" not in str(raised.value)
        refused += 1
    assert refused == 13
    # Inputs that fit go through untouched.
    raw = encoder._loaded(good)["pooled_output"].numpy()
    np.testing.assert_array_equal(encoder(good)["pooled_output"].numpy(), raw)
    np.testing.assert_array_equal(
        encoder({k: v.numpy().astype("int64") for k, v in good.items()})["pooled_output"].numpy(), raw)
    packed = preprocessor.bert_pack_inputs(
        [preprocessor.tokenize(tf.constant(["Bob lives."])), preprocessor.tokenize(tf.constant(["In Paris."]))],
        seq_length=8)
    assert packed["input_word_ids"].shape == (1, 8)
    assert task(text_a=tf.constant(["Bob"]), text_b=tf.constant(["Paris"]))["label_id"].shape == (1,)
    assert int(checked["preprocessor"].seq_length.numpy()) == 128  # other attributes: as loaded
