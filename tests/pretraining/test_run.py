"""Pre-training on the project's own TFRecords of real text: learning, ablations, bad input.

The records are made from the bundled WikiText sample by `pretraining_data.create_instances` and
TensorFlow's TFRecord writer (see `helpers.pretraining_run_fixtures`), with a word-level vocabulary.
"""

import json
import math
import os
import shutil
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

import bert_keras
from bert_keras.pretraining import dynamic_masking
from bert_keras.modeldir import model_dir
from bert_keras.pretraining import inputs as pretraining_input
from bert_keras.model.config import BertConfig
from bert_keras.pretraining.run import (CHECKPOINTS_DIR, NonFiniteLossError, PretrainingError,
                                        PretrainingOptions, evaluate, train)
from bert_keras.pretraining.step import build_training_state, make_eval_function, make_train_function
from bert_keras.data.records import RecordsError
from bert_keras.pretraining.losses import masked_lm_sums, metrics_from_sums, next_sentence_sums
from bert_keras.text.vocab import Vocabulary, VocabularyError

from helpers import pretraining_run_fixtures as fx

SEQ, PRED = 32, 5


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    directory = tmp_path_factory.mktemp("corpus")
    vocab_path = fx.write_vocab(str(directory), size=5000)
    train_batch = fx.make_instances(fx.TRAIN_TEXT, vocab_path, SEQ, PRED, dupe_factor=3, seed=1)
    heldout_batch = fx.make_instances(fx.HELDOUT_TEXT, vocab_path, SEQ, PRED, dupe_factor=2, seed=2)
    fx.write_shards(str(directory / "train"), train_batch, num_shards=2)
    fx.write_shards(str(directory / "heldout"), heldout_batch, num_shards=1)
    return types.SimpleNamespace(
        dir=directory, vocab_path=vocab_path, vocab=Vocabulary.from_file(vocab_path),
        train=str(directory / "train" / "*.tfrecord"), heldout=str(directory / "heldout" / "*.tfrecord"),
        train_batch=train_batch, heldout_batch=heldout_batch)


def tiny_config(corpus, dropout=0.1, **overrides):
    values = dict(vocab_size=len(corpus.vocab), max_position_embeddings=64,
                  hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    values.update(overrides)
    return BertConfig.from_preset("tiny", **values)


def make_options(corpus, output_dir, **overrides):
    values = dict(input_files=corpus.train, output_dir=str(output_dir), config=tiny_config(corpus),
                  vocab_file=corpus.vocab_path, train_batch_size=32, eval_batch_size=32,
                  max_seq_length=SEQ, max_predictions_per_seq=PRED, num_train_steps=20,
                  num_warmup_steps=2, learning_rate=5e-4, steps_per_execution=10,
                  save_checkpoints_steps=10, strategy="cpu", verbose=0, shuffle_buffer_size=1000)
    values.update(overrides)
    return PretrainingOptions(**values)


def most_frequent_label_share(batch):
    labels = batch.masked_lm_ids[batch.masked_lm_weights > 0]
    return np.bincount(labels).max() / len(labels)


def majority_share(batch):
    """The share of the more frequent next-sentence label."""
    random_next = float(np.mean(batch.next_sentence_labels))
    return max(random_next, 1.0 - random_next)


def most_frequent_word_share(token_ids, mask, vocab):
    """The share of the most frequent token among the real words of `token_ids` (where `mask`
    is 1, special tokens left out): the accuracy of always predicting it, counted by hand."""
    special = set(vocab.special_ids().values())
    words = [int(token) for token, real in zip(np.ravel(token_ids), np.ravel(mask))
             if real and int(token) not in special]
    return np.bincount(words).max() / len(words)


def evaluate_initial_model(options):
    """MLM accuracy of the model `train` starts from (same seed), on `options.input_files`."""
    keras.utils.set_random_seed(options.seed)
    state = build_training_state(options.config, tf.distribute.get_strategy(), options, with_optimizer=False)
    files = pretraining_input.expand_file_pattern(options.input_files)
    dataset = pretraining_input.make_dataset_fn(files, "masked", SEQ, PRED, options.eval_batch_size,
                                                shuffle=False, repeat=False, drop_remainder=False)(None)
    eval_step = make_eval_function(state)
    totals = {}
    for index, batch in enumerate(dataset):
        if options.max_eval_steps and index >= options.max_eval_steps:
            break
        for name, value in eval_step(batch).items():
            totals[name] = totals.get(name, 0.0) + float(value)
    return metrics_from_sums({name: value for name, value in totals.items() if name != "examples"})


@pytest.fixture(scope="module")
def trained(corpus, tmp_path_factory):
    """800 steps of 32 sequences of the tiny model at seq 32 (dropout off: little data, few steps)."""
    output_dir = tmp_path_factory.mktemp("trained")
    options = make_options(corpus, output_dir, config=tiny_config(corpus, dropout=0.0),
                           train_batch_size=32, num_train_steps=800, num_warmup_steps=80,
                           learning_rate=1e-3, steps_per_execution=100, save_checkpoints_steps=400)
    metrics = train(options)
    return types.SimpleNamespace(dir=str(output_dir), options=options, metrics=metrics)


# ---------------------------------------------------------------------------------- learning
def test_mlm_accuracy_rises_clearly_above_the_most_frequent_token(corpus, trained):
    eval_train = dict(mode="eval", max_eval_steps=40)
    before = evaluate_initial_model(make_options(corpus, trained.dir, config=tiny_config(corpus, 0.0),
                                                 **eval_train))
    after = evaluate(make_options(corpus, trained.dir, config=None, vocab_file=None, **eval_train))
    baseline = most_frequent_label_share(corpus.train_batch)
    heldout_before = evaluate_initial_model(make_options(corpus, trained.dir, config=tiny_config(corpus, 0.0),
                                                         input_files=corpus.heldout, mode="eval"))
    heldout = evaluate(make_options(corpus, trained.dir, config=None, vocab_file=None,
                                    input_files=corpus.heldout, mode="eval"))
    print(f"\nMLM accuracy on training records: {before['masked_lm_accuracy']:.4f} at step 0, "
          f"{after['masked_lm_accuracy']:.4f} after 800 steps; most frequent token {baseline:.4f}; "
          f"held-out {heldout_before['masked_lm_accuracy']:.4f} -> {heldout['masked_lm_accuracy']:.4f} "
          f"(most frequent {most_frequent_label_share(corpus.heldout_batch):.4f}); "
          f"{trained.metrics['examples_per_second']:.0f} examples/s; NSP {after['next_sentence_accuracy']:.4f} "
          f"(majority {majority_share(corpus.train_batch):.4f}), held-out {heldout['next_sentence_accuracy']:.4f} "
          f"(majority {majority_share(corpus.heldout_batch):.4f})")
    assert after["global_step"] == 800
    # Baselines computed here: always predicting the most frequent masked token, always answering
    # the majority next-sentence label.
    assert after["masked_lm_accuracy"] >= 1.5 * baseline
    assert after["masked_lm_loss"] < before["masked_lm_loss"] - 2.0
    assert heldout["masked_lm_accuracy"] > most_frequent_label_share(corpus.heldout_batch)
    assert heldout["masked_lm_loss"] < heldout_before["masked_lm_loss"] - 2.0
    # NSP is learned on the training records; at 32 tokens it does not carry over to held-out
    # text (most held-out pairs are one-sentence chunks with a random next), see README.
    assert after["next_sentence_accuracy"] > majority_share(corpus.train_batch) + 0.04
    assert os.path.exists(os.path.join(trained.dir, "eval_results.txt"))
    assert os.listdir(os.path.join(trained.dir, "logs", "train"))  # TensorBoard events


def test_output_is_a_model_directory_with_both_heads(corpus, trained):
    encoder = bert_keras.load_encoder(trained.dir)
    assert encoder.get_layer("embeddings").vocab_size == len(corpus.vocab)
    weights = model_dir.read_weights(trained.dir)
    for name in ("cls/predictions/output_bias", "cls/predictions/transform/dense/kernel",
                 "cls/seq_relationship/output_weights", "bert/pooler/dense/kernel"):
        assert name in weights
    reloaded = bert_keras.load_pretraining_model(trained.dir, require_heads=True)
    assert "next_sentence_logits" in reloaded.output
    # The weights are the last checkpoint's.
    reader = tf.train.load_checkpoint(os.path.join(trained.dir, "checkpoints", "ckpt-800"))
    key = "weights/cls.Spredictions.Soutput_bias/.ATTRIBUTES/VARIABLE_VALUE"
    np.testing.assert_array_equal(reader.get_tensor(key), weights["cls/predictions/output_bias"])


def test_second_phase_continues_from_the_first_with_position_embeddings(corpus, trained, tmp_path):
    batch = fx.make_instances(fx.TRAIN_TEXT, corpus.vocab_path, 64, 10, dupe_factor=1, seed=5)
    fx.write_shards(str(tmp_path / "seq64"), batch, num_shards=1)
    options = make_options(corpus, tmp_path / "phase2", config=None, vocab_file=None,
                           init_model_dir=trained.dir, input_files=str(tmp_path / "seq64" / "*.tfrecord"),
                           max_seq_length=64, max_predictions_per_seq=10, num_train_steps=2,
                           num_warmup_steps=0, learning_rate=1e-7, steps_per_execution=2)
    train(options)
    phase1 = model_dir.read_weights(trained.dir)
    phase2 = model_dir.read_weights(str(tmp_path / "phase2"))
    # All 64 position embeddings come from phase 1 (rows 32-63 untrained there), then barely move.
    np.testing.assert_allclose(phase2["bert/embeddings/position_embeddings"],
                               phase1["bert/embeddings/position_embeddings"], atol=1e-5)
    np.testing.assert_allclose(phase2["cls/seq_relationship/output_weights"],
                               phase1["cls/seq_relationship/output_weights"], atol=1e-5)
    assert model_dir.read_config(str(tmp_path / "phase2")) == model_dir.read_config(trained.dir)


# ----------------------------------------------------------------------------------- ablations
def test_no_nsp_trains_masked_lm_only(corpus, tmp_path):
    # With LAMB, to run that optimizer through a whole training loop too.
    metrics = train(make_options(corpus, tmp_path, next_sentence=False, optimizer="lamb"))
    assert "next_sentence_accuracy" not in metrics and math.isfinite(metrics["loss"])
    weights = model_dir.read_weights(str(tmp_path))
    assert "cls/predictions/output_bias" in weights
    assert not any(name.startswith("cls/seq_relationship") for name in weights)


def test_a_rerun_removes_the_partial_checkpoint_of_an_interrupted_save(corpus, tmp_path):
    partial = tmp_path / CHECKPOINTS_DIR / "ckpt-7_temp"
    partial.mkdir(parents=True)
    (partial / "part-00000-of-00001.tempstate123").write_bytes(b"\0" * 1000)
    train(make_options(corpus, tmp_path))
    left = sorted(os.listdir(tmp_path / CHECKPOINTS_DIR))
    assert not partial.exists() and any(name.startswith("ckpt-") for name in left), left


def test_left_to_right_predicts_the_next_token_under_a_causal_mask(corpus, tmp_path):
    metrics = train(make_options(corpus, tmp_path, left_to_right=True))
    assert "next_sentence_accuracy" not in metrics and math.isfinite(metrics["loss"])
    # The model directory says it is causal: it loads (and fine-tunes, exports) with its mask.
    assert model_dir.read_config(str(tmp_path)).causal_attention is True
    encoder = bert_keras.load_encoder(str(tmp_path))
    ids = np.array([[2, 10, 11, 12, 13, 3]], np.int32)
    changed = ids.copy()
    changed[0, 4] = 50
    inputs = {"input_mask": np.ones_like(ids), "input_type_ids": np.zeros_like(ids)}
    first = encoder(dict(inputs, input_word_ids=ids))["sequence_output"].numpy()
    second = encoder(dict(inputs, input_word_ids=changed))["sequence_output"].numpy()
    np.testing.assert_allclose(first[0, :4], second[0, :4], atol=1e-5)  # the future is not seen
    assert not np.allclose(first[0, 4:], second[0, 4:])
    results = evaluate(make_options(corpus, tmp_path, config=None, vocab_file=None, mode="eval",
                                    left_to_right=True, input_files=corpus.heldout))
    assert "next_sentence_accuracy" not in results
    # Learnt in 20 steps: next tokens predicted at least about as often as by always answering
    # the most frequent word of the held-out text (counted here), where the random model that
    # training starts from is right about once in the vocabulary's size.
    batch = corpus.heldout_batch
    frequent = most_frequent_word_share(batch.input_ids, batch.input_mask, corpus.vocab)
    initial = evaluate_initial_model(make_options(corpus, tmp_path, left_to_right=True,
                                                  input_files=corpus.heldout, mode="eval"))
    print(f"\nLTR {results['masked_lm_accuracy']:.4f} initial {initial['masked_lm_accuracy']:.4f} "
          f"frequent {frequent:.4f}")
    assert results["masked_lm_accuracy"] >= 0.5 * frequent > 10 * initial["masked_lm_accuracy"], (
        results, frequent, initial)

    # A run begun before bert_config.json had causal_attention (neither it nor run.json has the
    # field; pretraining_options.json says left_to_right) resumes, and its directory gets it.
    for name in ("bert_config.json", os.path.join("checkpoints", "run.json")):
        path = os.path.join(str(tmp_path), name)
        with open(path) as f:
            values = json.load(f)
        values.get("bert_config", values).pop("causal_attention")
        with open(path, "w") as f:
            json.dump(values, f)
    resumed = train(make_options(corpus, tmp_path, config=None, vocab_file=None,
                                 left_to_right=True, num_train_steps=30))
    assert resumed["step"] == 30
    with open(os.path.join(str(tmp_path), "bert_config.json")) as f:
        assert json.load(f)["causal_attention"] is True


def test_dynamic_masking_trains_from_unmasked_records(corpus, tmp_path):
    batch = corpus.train_batch
    originals = dynamic_masking.restore_masked_tokens({
        "input_ids": batch.input_ids[:256], "masked_lm_positions": batch.masked_lm_positions[:256],
        "masked_lm_ids": batch.masked_lm_ids[:256], "masked_lm_weights": batch.masked_lm_weights[:256]}).numpy()
    records = dynamic_masking.serialize_unmasked(originals, batch.input_mask[:256], batch.segment_ids[:256],
                                                 batch.next_sentence_labels[:256])
    path = str(tmp_path / "unmasked.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for record in records:
            writer.write(record)
    with pytest.raises(RecordsError, match="dynamic_masking"):
        train(make_options(corpus, tmp_path / "static", input_files=path))
    metrics = train(make_options(corpus, tmp_path / "dynamic", input_files=path, dynamic_masking=True))
    # Learnt from masks drawn on the fly: about as often right as always predicting the most
    # frequent word of the records (counted here on the unmasked tokens), far above the random
    # model's once in the vocabulary's size.
    frequent = most_frequent_word_share(originals, batch.input_mask[:256], corpus.vocab)
    print(f"\ndynamic {metrics['masked_lm_accuracy']:.4f} frequent {frequent:.4f}")
    assert math.isfinite(metrics["loss"])
    assert metrics["masked_lm_accuracy"] >= 0.5 * frequent > 20 / len(corpus.vocab), (metrics,
                                                                                       frequent)


# ------------------------------------------------------------------------- step equivalences
def _fixed_batch(corpus, size=16):
    batch = corpus.train_batch
    return {"input_ids": batch.input_ids[:size], "input_mask": batch.input_mask[:size],
            "segment_ids": batch.segment_ids[:size], "masked_lm_positions": batch.masked_lm_positions[:size],
            "masked_lm_ids": batch.masked_lm_ids[:size],
            "masked_lm_weights": batch.masked_lm_weights[:size].astype(np.float32),
            "next_sentence_labels": batch.next_sentence_labels[:size].reshape(-1)}


def _one_step(corpus, options, batch, initial=None):
    state = build_training_state(options.config, tf.distribute.get_strategy(), options)
    if initial is not None:
        for name, variable in state.variable_map.items():
            variable.assign(initial[name])
    iterator = iter(tf.data.Dataset.from_tensors(batch).repeat())
    result = make_train_function(state, options.gradient_accumulation_steps)(iterator, tf.constant(1))
    return state, {name: v.numpy() for name, v in state.variable_map.items()}, result


def test_gradient_accumulation_gives_the_same_step(corpus, tmp_path):
    options = make_options(corpus, tmp_path, config=tiny_config(corpus, dropout=0.0), num_warmup_steps=0)
    batch = _fixed_batch(corpus)
    initial = {name: v.numpy() for name, v in build_training_state(
        options.config, tf.distribute.get_strategy(), options).variable_map.items()}
    _, whole, whole_result = _one_step(corpus, options, batch, initial)
    options.gradient_accumulation_steps = 4
    _, accumulated, accumulated_result = _one_step(corpus, options, batch, initial)
    assert max(float(np.abs(whole[name] - initial[name]).max()) for name in whole) > 1e-5
    for name in whole:
        np.testing.assert_allclose(accumulated[name], whole[name], atol=2e-6, err_msg=name)
    assert float(accumulated_result["loss"]) == pytest.approx(float(whole_result["loss"]), rel=1e-5)


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_steps(corpus, tmp_path, policy):
    options = make_options(corpus, tmp_path, mixed_precision=policy, num_warmup_steps=0)
    state, weights, result = _one_step(corpus, options, _fixed_batch(corpus))
    assert math.isfinite(float(result["loss"]))
    assert state.model.encoder.get_layer("transformer_layer_0").compute_dtype == policy[6:]
    assert all(value.dtype == np.float32 for value in weights.values())


# --------------------------------------------------------------------------------- bad input
def test_records_of_other_lengths_fail_before_training(corpus, tmp_path):
    with pytest.raises(RecordsError, match=r"part-00000.*max_seq_length=32 but --max_seq_length=64"):
        train(make_options(corpus, tmp_path, max_seq_length=64))
    with pytest.raises(RecordsError, match=r"max_predictions_per_seq=5 but --max_predictions_per_seq=20"):
        train(make_options(corpus, tmp_path, max_predictions_per_seq=20))
    assert not os.path.exists(os.path.join(tmp_path, "checkpoints"))


def test_options_are_checked(corpus, tmp_path):
    for bad, match in ((dict(num_train_steps=0), "num_train_steps"), (dict(num_warmup_steps=50), "num_warmup_steps"),
                       (dict(init_model_dir=str(tmp_path)), "not both"), (dict(optimizer="sgd"), "optimizer"),
                       (dict(train_batch_size=30, gradient_accumulation_steps=4), "multiple")):
        with pytest.raises(ValueError, match=match):
            train(make_options(corpus, tmp_path / "out", **bad))


def test_vocab_of_another_size_is_refused(corpus, tmp_path):
    config_path = str(tmp_path / "bert_config.json")
    tiny_config(corpus, vocab_size=len(corpus.vocab) + 1).to_json_file(config_path)
    with pytest.raises(VocabularyError, match="vocab_size"):
        train(make_options(corpus, tmp_path / "out", config=config_path))


def test_output_dir_of_another_config_is_not_overwritten(corpus, trained, tmp_path):
    output_dir = tmp_path / "copy"
    shutil.copytree(trained.dir, output_dir)
    before = {name: os.path.getmtime(os.path.join(dirpath, name))
              for dirpath, _, names in os.walk(output_dir) for name in names}
    with pytest.raises(PretrainingError, match="num_hidden_layers: 2 in the checkpoint, 3 now"):
        train(make_options(corpus, output_dir, config=tiny_config(corpus, num_hidden_layers=3)))
    after = {name: os.path.getmtime(os.path.join(dirpath, name))
             for dirpath, _, names in os.walk(output_dir) for name in names}
    assert before == after
    with pytest.raises(PretrainingError, match="another config"):
        evaluate(make_options(corpus, output_dir, mode="eval", config=tiny_config(corpus, num_hidden_layers=3)))
    # start_over replaces that run, and nothing else in the directory.
    (output_dir / "notes.txt").write_text("mine")
    train(make_options(corpus, output_dir, config=tiny_config(corpus, num_hidden_layers=3),
                       num_train_steps=10, start_over=True))
    assert model_dir.read_config(str(output_dir)).num_hidden_layers == 3
    assert (output_dir / "notes.txt").read_text() == "mine"
    assert not (output_dir / "eval_results.txt").exists()


def test_continues_from_converted_published_weights(tmp_path):
    from helpers.model_fixtures import minilm_hf_dir
    from bert_keras.modeldir import convert
    converted = str(tmp_path / "minilm")
    convert.convert_hf_checkpoint(minilm_hf_dir(), converted)
    config = model_dir.read_config(converted)
    path = fx.write_feature_records(str(tmp_path / "random.tfrecord"),
                                    fx.random_features(16, 32, 5, config.vocab_size))
    options = PretrainingOptions(input_files=path, output_dir=str(tmp_path / "out"), init_model_dir=converted,
                                 train_batch_size=8, max_seq_length=32, max_predictions_per_seq=5,
                                 num_train_steps=2, num_warmup_steps=0, learning_rate=1e-7,
                                 steps_per_execution=2, save_checkpoints_steps=2, strategy="cpu", verbose=0)
    metrics = train(options)
    assert math.isfinite(metrics["loss"])
    published = model_dir.read_weights(converted)
    continued = model_dir.read_weights(str(tmp_path / "out"))
    for name in ("bert/encoder/layer_5/output/dense/kernel", "bert/embeddings/word_embeddings"):
        np.testing.assert_allclose(continued[name], published[name], atol=1e-5)
    # The checkpoint has no pre-training heads: they start fresh and are written out.
    assert "cls/predictions/output_bias" in continued and "cls/predictions/output_bias" not in published


def _corrupt_copy(corpus, directory):
    os.makedirs(directory)
    paths = []
    for path in pretraining_input.expand_file_pattern(corpus.train):
        target = os.path.join(directory, os.path.basename(path))
        shutil.copy(path, target)
        paths.append(target)
    data = bytearray(open(paths[1], "rb").read())
    data[2000] ^= 0xFF  # inside the 5th record or so
    open(paths[1], "wb").write(bytes(data))
    return paths


def test_corrupt_file_is_named_or_skipped_with_a_count(corpus, tmp_path, caplog):
    paths = _corrupt_copy(corpus, str(tmp_path / "records"))
    pattern = str(tmp_path / "records" / "*.tfrecord")
    with pytest.raises(RecordsError, match=r"part-00001.tfrecord: corrupt or truncated TFRecord"):
        train(make_options(corpus, tmp_path / "strict", input_files=pattern))
    caplog.set_level("WARNING")
    metrics = train(make_options(corpus, tmp_path / "skip", input_files=pattern, skip_corrupt_records=True))
    assert metrics["step"] == 20
    assert any("1 corrupt file(s)" in record.getMessage() and paths[1] in record.getMessage()
               for record in caplog.records)


def test_nan_loss_stops_with_the_step_and_keeps_the_last_good_checkpoint(corpus, tmp_path):
    features = {name: np.asarray(getattr(corpus.train_batch, name))[:32 * 14]
                for name in ("input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                             "masked_lm_ids", "masked_lm_weights", "next_sentence_labels")}
    features["masked_lm_weights"] = features["masked_lm_weights"].astype(np.float32)
    features["masked_lm_weights"][32 * 12:] = np.nan  # batches 13 and 14
    features["next_sentence_labels"] = features["next_sentence_labels"].reshape(-1, 1)
    path = fx.write_feature_records(str(tmp_path / "nan.tfrecord"), features)
    options = make_options(corpus, tmp_path / "out", input_files=path, shuffle_buffer_size=1,
                           steps_per_execution=5, save_checkpoints_steps=5, num_train_steps=30)
    with pytest.raises(NonFiniteLossError, match=r"loss is nan at step 13.*ckpt-10 is kept"):
        train(options)
    checkpoints = tf.train.get_checkpoint_state(str(tmp_path / "out" / "checkpoints"))
    assert checkpoints.model_checkpoint_path.endswith("ckpt-10")
    assert not os.path.exists(tmp_path / "out" / "model.safetensors")


# ------------------------------------------------------------------------------ input checks
def test_resumed_pipeline_continues_the_record_stream(corpus):
    files = pretraining_input.expand_file_pattern(corpus.train)
    special = corpus.vocab.special_ids()
    for targets in (pretraining_input.TargetOptions(),
                    pretraining_input.TargetOptions(dynamic_masking=True, vocab_size=len(corpus.vocab),
                                                    cls_id=special["start_of_sequence_id"],
                                                    sep_id=special["end_of_segment_id"],
                                                    mask_id=special["mask_id"])):
        def batches(start_step, count):
            dataset = pretraining_input.make_dataset_fn(files, "masked", SEQ, PRED, 16, targets=targets,
                                                        start_step=start_step, seed=7,
                                                        shuffle_buffer_size=100)(None)
            return [{k: v.numpy() for k, v in batch.items()} for batch in dataset.take(count)]

        uninterrupted = batches(0, 5)
        resumed = batches(3, 2)
        again = batches(0, 5)
        for expected, got in zip(uninterrupted[3:], resumed):
            for name in expected:
                np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
        for expected, got in zip(uninterrupted, again):
            np.testing.assert_array_equal(got["input_ids"], expected["input_ids"])


def test_dynamic_masks_change_every_epoch(corpus, tmp_path):
    path = fx.write_feature_records(str(tmp_path / "one_batch.tfrecord"), {
        name: np.asarray(getattr(corpus.train_batch, name))[:16].reshape(16, -1)
        for name in ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
                     "masked_lm_weights", "next_sentence_labels")})
    special = corpus.vocab.special_ids()
    targets = pretraining_input.TargetOptions(dynamic_masking=True, vocab_size=len(corpus.vocab),
                                              cls_id=special["start_of_sequence_id"],
                                              sep_id=special["end_of_segment_id"], mask_id=special["mask_id"])
    dataset = pretraining_input.make_dataset_fn([path], "masked", SEQ, PRED, 16, targets=targets,
                                                shuffle=False)(None)
    first, second = [{k: v.numpy() for k, v in batch.items()} for batch in dataset.take(2)]
    np.testing.assert_array_equal(dynamic_masking.restore_masked_tokens(first).numpy(),
                                  dynamic_masking.restore_masked_tokens(second).numpy())
    assert not np.array_equal(first["masked_lm_positions"], second["masked_lm_positions"])


def test_losses_match_numpy():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((3, 4, 7)).astype(np.float32)
    ids = rng.integers(0, 7, (3, 4))
    weights = np.array([[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]], np.float32)
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    cross_entropy = -np.take_along_axis(log_probs, ids[..., None], -1)[..., 0]
    sums = masked_lm_sums(logits, ids, weights)
    assert float(sums["masked_lm_loss_sum"]) == pytest.approx((cross_entropy * weights).sum(), rel=1e-5)
    assert float(sums["masked_lm_correct"]) == ((logits.argmax(-1) == ids) * weights).sum()
    nsp_logits = rng.standard_normal((5, 2)).astype(np.float32)
    labels = np.array([0, 1, 1, 0, 1])
    nsp = next_sentence_sums(nsp_logits, labels)
    nsp_log_probs = nsp_logits - np.log(np.exp(nsp_logits).sum(-1, keepdims=True))
    assert float(nsp["next_sentence_loss_sum"]) == pytest.approx(-nsp_log_probs[np.arange(5), labels].sum(), rel=1e-5)
    metrics = metrics_from_sums({**{k: float(v) for k, v in sums.items()},
                                 **{k: float(v) for k, v in nsp.items()}})
    assert metrics["loss"] == pytest.approx(metrics["masked_lm_loss"] + metrics["next_sentence_loss"])
    assert metrics["masked_lm_loss"] == pytest.approx((cross_entropy * weights).sum() / weights.sum(), rel=1e-5)


# ------------------------------------------------------------------------------------------- XLA
def test_xla_compiled_steps_give_the_plain_graph_s_losses(corpus, tmp_path):
    """The train step compiles with XLA (what TPUs and `--jit_compile` run) on the CPU, several
    steps per call, and trains as the plain graph does: no host-only op in the device step."""
    runs = {}
    for jit_compile in (False, True):
        options = make_options(corpus, tmp_path / f"xla_{jit_compile}",
                               config=tiny_config(corpus, dropout=0.0), jit_compile=jit_compile,
                               num_train_steps=12, steps_per_execution=4, save_checkpoints_steps=12)
        metrics = train(options)
        weights = model_dir.read_weights(options.output_dir)
        runs[jit_compile] = metrics, weights
    (plain, plain_weights), (xla, xla_weights) = runs[False], runs[True]
    assert abs(xla["loss"] - plain["loss"]) <= 1e-4 * max(1.0, abs(plain["loss"]))
    assert abs(xla["masked_lm_loss"] - plain["masked_lm_loss"]) <= 1e-4 * max(1.0, plain["masked_lm_loss"])
    for name in plain_weights:
        np.testing.assert_allclose(xla_weights[name], plain_weights[name], atol=1e-4, err_msg=name)
