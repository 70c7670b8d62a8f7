"""A pre-training run's model and output directory: what the run starts from (a preset or
config with a vocabulary, a model directory, or the output directory of an earlier run) and
the policy for `output_dir`: resume the latest checkpoint when `checkpoints/run.json` says it
is the same run, refuse to overwrite anything else.
"""

import dataclasses
import json
import os

import tensorflow as tf
from absl import logging

from bert_keras.common.files import describe_changes
from bert_keras.model.config import BertConfig
from bert_keras.modeldir import model_dir as model_dir_lib
from bert_keras.pretraining.options import PretrainingError
from bert_keras.text.vocab import Vocabulary

CHECKPOINTS_DIR = "checkpoints"
RUN_FILE = "run.json"

# Fields of run.json that must match for a rerun to resume a checkpoint.
_STRUCTURAL = ("bert_config", "next_sentence", "left_to_right", "optimizer", "loss_scaling")


@dataclasses.dataclass
class _ModelSetup:
    config: BertConfig
    vocab: Vocabulary
    do_lower_case: bool
    init_weights: dict = None  # {original name: array} from init_model_dir, when starting fresh


def _read_vocab(path):
    return Vocabulary.from_file(path)


def resolve_model_setup(options):
    """The config, vocabulary and initial weights of a run (see `PretrainingOptions.config`).

    The config's `causal_attention` is the run's `left_to_right`: the model directory then
    tells every later step (loading, fine-tuning, export) which attention mask the model has.
    """
    setup = _read_model_setup(options)
    if setup.config.causal_attention != options.left_to_right:
        if options.init_model_dir:
            directions = {True: "left to right (causal attention)", False: "bidirectionally"}
            logging.warning("%s was pre-trained %s; this run trains it %s", options.init_model_dir,
                            directions[setup.config.causal_attention],
                            directions[options.left_to_right])
        setup.config = dataclasses.replace(setup.config, causal_attention=options.left_to_right)
    return setup


def _read_model_setup(options):
    out = options.output_dir
    if options.init_model_dir:
        config = model_dir_lib.read_config(options.init_model_dir)
        vocab = model_dir_lib.read_vocab(options.init_model_dir, config)
        do_lower_case = model_dir_lib.read_do_lower_case(options.init_model_dir)
        weights = model_dir_lib.read_weights(options.init_model_dir)
        return _ModelSetup(config, vocab, do_lower_case, weights)
    if options.config is None:
        if not os.path.exists(os.path.join(out, model_dir_lib.CONFIG_NAME)):
            raise ValueError("give config and vocab_file (or init_model_dir); output_dir holds no "
                             "config to resume from")
        config = model_dir_lib.read_config(out)
        vocab = (_read_vocab(options.vocab_file) if options.vocab_file
                 else model_dir_lib.read_vocab(out, config))
        vocab.check_size(config.vocab_size, os.path.join(out, model_dir_lib.CONFIG_NAME))
        do_lower_case = model_dir_lib.read_do_lower_case(out)
        return _ModelSetup(config, vocab, do_lower_case)
    if not options.vocab_file:
        raise ValueError("vocab_file is required with config")
    vocab = _read_vocab(options.vocab_file)
    if isinstance(options.config, BertConfig):
        config = options.config
        vocab.check_size(config.vocab_size)
    elif str(options.config).endswith(".json") or os.path.exists(str(options.config)):
        config = BertConfig.from_json_file(options.config)
        vocab.check_size(config.vocab_size, options.config)
    else:
        # A preset fixes the sizes of the layers; the vocabulary fixes vocab_size.
        config = BertConfig.from_preset(options.config, vocab_size=len(vocab))
    vocab.check_casing(options.do_lower_case)
    return _ModelSetup(config, vocab, options.do_lower_case)


def run_record(options, config):
    return {"bert_config": config.to_dict(), "next_sentence": options.uses_next_sentence,
            "left_to_right": options.left_to_right, "optimizer": options.optimizer,
            "loss_scaling": options.mixed_precision == "mixed_float16",
            "train_batch_size": options.train_batch_size,
            "max_seq_length": options.max_seq_length}


def check_output_dir(options, config):
    """Refuses an `output_dir` whose checkpoints or model belong to another configuration.

    Returns the latest checkpoint path to resume from, or None.
    """
    out = options.output_dir
    if tf.io.gfile.exists(out) and not tf.io.gfile.isdir(out):
        raise PretrainingError(f"--output_dir={out} is a file, not a directory")
    latest, previous = latest_checkpoint(out)
    if latest and previous is None:
        raise PretrainingError(f"{os.path.join(out, CHECKPOINTS_DIR)} holds checkpoints ({latest}) "
                               f"not written by this tool (no {RUN_FILE}); refusing to overwrite "
                               "them: choose another output_dir")
    if latest:
        current = run_record(options, config)
        different = [name for name in _STRUCTURAL if previous.get(name) != current[name]]
        if different:
            details = "; ".join(_describe_difference(name, previous.get(name), current[name])
                                for name in different)
            raise PretrainingError(
                f"{out} holds a checkpoint of a different run ({details}); refusing to overwrite "
                "it: choose another output_dir, pass --start_over to replace that run, or "
                "continue from it with init_model_dir")
        if previous.get("train_batch_size") != current["train_batch_size"]:
            logging.warning("train_batch_size changed from %s to %s: the data position of the "
                            "resumed run is step * new batch size", previous.get("train_batch_size"),
                            current["train_batch_size"])
        return latest
    config_path = os.path.join(out, model_dir_lib.CONFIG_NAME)
    if tf.io.gfile.exists(os.path.join(out, model_dir_lib.WEIGHTS_NAME)):
        raise PretrainingError(f"{out} already holds a model ({model_dir_lib.WEIGHTS_NAME}) and no "
                               "training checkpoint; refusing to overwrite it: choose another output_dir")
    if tf.io.gfile.exists(config_path):
        existing = model_dir_lib.read_config(out)
        if existing.to_dict() != config.to_dict():
            raise PretrainingError(
                f"{config_path} holds a different config "
                f"({_describe_difference('bert_config', existing.to_dict(), config.to_dict())}); "
                "refusing to overwrite it: choose another output_dir")
    return None


def latest_checkpoint(output_dir):
    """(the latest checkpoint of `output_dir`, its run record from run.json); (None, None) when
    there is no checkpoint, and a None record when there is no run.json."""
    checkpoints = os.path.join(output_dir, CHECKPOINTS_DIR)
    latest = tf.train.latest_checkpoint(checkpoints) if tf.io.gfile.exists(checkpoints) else None
    run_path = os.path.join(checkpoints, RUN_FILE)
    if not latest or not tf.io.gfile.exists(run_path):
        return latest, None
    with tf.io.gfile.GFile(run_path) as f:
        return latest, _with_causal_attention(json.load(f))


def check_checkpoint_config(latest, record, config):
    """Refuses a checkpoint whose run record names another model config."""
    saved = (record or {}).get("bert_config")
    if record is not None and saved != config.to_dict():
        raise PretrainingError(f"{latest} holds a model of another config "
                               f"({_describe_difference('bert_config', saved, config.to_dict())})")


def _with_causal_attention(run_record):
    """A run.json record with `causal_attention` in its config (older records lack it)."""
    config = run_record.get("bert_config")
    if isinstance(config, dict) and "causal_attention" not in config:
        run_record = dict(run_record, bert_config=dict(
            config, causal_attention=bool(run_record.get("left_to_right", False))))
    return run_record


def _describe_difference(name, old, new):
    return describe_changes({name: old}, {name: new}, "in the checkpoint", "now")


__all__ = ["CHECKPOINTS_DIR", "RUN_FILE", "resolve_model_setup", "check_output_dir", "run_record",
           "latest_checkpoint", "check_checkpoint_config"]
