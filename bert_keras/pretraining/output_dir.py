"""A pre-training run's model and output directory: what the run starts from (a preset or
config with a vocabulary, a model directory, or the output directory of an earlier run) and
the policy for `output_dir`: resume the latest checkpoint when `checkpoints/run.json` says it
is the same run, refuse to overwrite anything else.
"""

import contextlib
import dataclasses
import json
import os

import tensorflow as tf
from absl import logging

from bert_keras.common import outputs
from bert_keras.common.files import (describe_changes, file_system, remove_entries,
                                     write_json_atomic)
from bert_keras.model import checkpoint_names
from bert_keras.model.config import BertConfig, ConfigError, resolve_model_size
from bert_keras.modeldir import model_dir as model_dir_lib
from bert_keras.modeldir.model_dir import ModelDir
from bert_keras.pretraining.options import PretrainingError
from bert_keras.text.vocab import Vocabulary

CHECKPOINTS_DIR = "checkpoints"
RUN_FILE = "run.json"
EVAL_RESULTS_FILE = "eval_results.txt"

# What training writes in its output directory (`--start_over` removes these, nothing else).
RUN_OUTPUTS = (CHECKPOINTS_DIR, "logs", EVAL_RESULTS_FILE, model_dir_lib.CONFIG_NAME,
               model_dir_lib.VOCAB_NAME, model_dir_lib.TOKENIZER_CONFIG_NAME,
               model_dir_lib.WEIGHTS_NAME, model_dir_lib.PRETRAINING_OPTIONS_NAME)

# Fields of run.json that must match for a rerun to resume a checkpoint.
_STRUCTURAL = ("bert_config", "next_sentence", "left_to_right", "optimizer", "loss_scaling")


@dataclasses.dataclass
class _ModelSetup:
    config: BertConfig
    vocab: Vocabulary
    do_lower_case: bool
    init_weights: dict = None  # {original name: array} from init_model_dir, when starting fresh


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
    if options.fused_attention and setup.config.attention_probs_dropout_prob:
        logging.info("fused attention: attention_probs_dropout_prob %s -> 0",
                     setup.config.attention_probs_dropout_prob)
        setup.config = dataclasses.replace(setup.config, attention_probs_dropout_prob=0.0)
    return setup


def _read_model_setup(options):
    out = options.output_dir
    if options.init_model_dir:
        init = ModelDir(options.init_model_dir)
        return _ModelSetup(init.config, init.vocab, init.do_lower_case, init.weights)
    if options.config is None:
        if not file_system(out).exists(os.path.join(out, model_dir_lib.CONFIG_NAME)):
            raise ValueError("give config and vocab_file (or init_model_dir); output_dir holds no "
                             "config to resume from")
        earlier = ModelDir(out)
        vocab = Vocabulary.from_file(options.vocab_file) if options.vocab_file else earlier.vocab
        vocab.check_size(earlier.config.vocab_size, earlier.config_file)
        return _ModelSetup(earlier.config, vocab, earlier.do_lower_case)
    if not options.vocab_file:
        raise ValueError("vocab_file is required with config")
    vocab = Vocabulary.from_file(options.vocab_file)
    if isinstance(options.config, BertConfig):
        config = options.config
        vocab.check_size(config.vocab_size)
    elif resolve_model_size(options.config)[0] == "file":
        config = BertConfig.from_json_file(options.config)
        vocab.check_size(config.vocab_size, options.config)
    else:
        # A preset fixes the sizes of the layers; the vocabulary fixes vocab_size.
        config = BertConfig.from_preset(options.config, vocab_size=len(vocab))
    vocab.check_casing(options.do_lower_case)
    return _ModelSetup(config, vocab, options.do_lower_case)


def write_model_files(options, setup, variable_map=None):
    """The model directory of a run in `options.output_dir`: config and vocabulary, plus the
    weights of `variable_map` ({original name: variable}) when it is given."""
    weights = None if variable_map is None else checkpoint_names.collect_weights(variable_map)
    model_dir_lib.write_model_dir(options.output_dir, setup.config, setup.vocab,
                                  setup.do_lower_case, weights)


def check_sequence_length(options, config):
    """Refuses records longer than the model's position embeddings."""
    if options.init_model_dir or options.config is None:
        source = os.path.join(options.init_model_dir or options.output_dir,
                              model_dir_lib.CONFIG_NAME)
    elif isinstance(options.config, BertConfig):
        source = "the given config"
    elif resolve_model_size(options.config, warn=False)[0] == "file":
        source = str(options.config)
    else:
        source = f"the {options.config} preset"
    model_dir_lib.check_seq_length(config, options.max_seq_length, "--max_seq_length", source,
                                   ConfigError)


def write_run_files(options, setup, step=0):
    """What a training run writes before its first step (`step`: where it starts, > 0 when it
    resumes): the model directory's config and vocabulary, `checkpoints/run.json` (what a rerun
    must share to resume) and `pretraining_options.json` (`options_record`)."""
    write_model_files(options, setup)
    checkpoints = os.path.join(options.output_dir, CHECKPOINTS_DIR)
    file_system(checkpoints).makedirs(checkpoints)
    write_json_atomic(os.path.join(checkpoints, RUN_FILE), run_record(options, setup.config),
                      sort_keys=True, default=str)
    path = os.path.join(options.output_dir, model_dir_lib.PRETRAINING_OPTIONS_NAME)
    earlier = None
    if step and tf.io.gfile.exists(path):
        with tf.io.gfile.GFile(path) as f:
            earlier = json.load(f)
    write_json_atomic(path, options_record(options, earlier, step), sort_keys=True, default=str)


# Options that say where or how a run goes, not what it trains: a resume may change them freely.
_NOT_SETTINGS = ("start_over", "mode", "stretches")


def options_record(options, earlier=None, step=0):
    """The contents of `pretraining_options.json`: the options of the latest stretch of the run
    at the top, and `stretches`, [{"from_step", "options"}], what each stretch used. A resume
    (from `step`, with `earlier` the file's contents) whose settings differ from the last
    stretch's starts a new stretch and says so (a warning naming each change); one with the same
    settings continues the stretch.

    >>> from bert_keras.pretraining.options import PretrainingOptions
    >>> first = options_record(PretrainingOptions(output_dir="out", learning_rate=1e-3))
    >>> second = options_record(PretrainingOptions(output_dir="out", learning_rate=2e-3), first, 100)
    >>> [(stretch["from_step"], stretch["options"]["learning_rate"])
    ...  for stretch in second["stretches"]]
    [(0, 0.001), (100, 0.002)]
    """
    current = json.loads(json.dumps(options.to_json_dict(), default=str))
    settings = {name: value for name, value in current.items() if name not in _NOT_SETTINGS}
    stretches = []
    if earlier:
        stretches = earlier.get("stretches") or [
            {"from_step": 0, "options": {name: value for name, value in earlier.items()
                                         if name not in _NOT_SETTINGS}}]
        changes = describe_changes(stretches[-1]["options"], settings, "before", "now")
        if changes:
            logging.warning("%s: resuming at step %d with other settings (%s); "
                            "pretraining_options.json records each stretch of the run",
                            options.output_dir, step, changes)
        else:
            return dict(current, stretches=stretches)
    return dict(current, stretches=stretches + [{"from_step": int(step), "options": settings}])


def inference_weights(options, setup, latest):
    """Where evaluation and export take the weights from, in this order: `latest` (the latest
    checkpoint of the run's engine in `output_dir`, or None), the model directory of
    `output_dir`, `init_model_dir`. Returns (source, None) for a checkpoint, whose restoring is
    the engine's, or (source, {original name: array})."""
    if latest:
        check_checkpoint_config(latest, saved_run_record(options.output_dir), setup.config)
        return latest, None
    weights_path = os.path.join(options.output_dir, model_dir_lib.WEIGHTS_NAME)
    if tf.io.gfile.exists(weights_path):
        return weights_path, ModelDir(options.output_dir).weights
    if setup.init_weights is not None:
        return options.init_model_dir, setup.init_weights
    raise PretrainingError(f"nothing to evaluate: {options.output_dir} holds no checkpoint or "
                           "model and no init_model_dir was given")


TOOL = "run_pretraining"
# What an earlier run of this tool left, where it kept no manifest (before there was one).
_LEGACY_OUTPUTS = ("checkpoints/ckpt-*", "checkpoints/checkpoint", f"checkpoints/{RUN_FILE}",
                   "logs/*/events.out.tfevents.*")


def remove_earlier_run(output_dir):
    """--start_over: removes the files an earlier run wrote in `output_dir` (those its manifest
    lists, `bert_keras.common.outputs`), nothing else: a file of the user's under
    `checkpoints/` or `logs/` stays. Returns the names removed."""
    if "://" in str(output_dir):
        return remove_entries(output_dir, RUN_OUTPUTS)
    import glob  # pylint: disable=import-outside-toplevel

    legacy = [name for name in RUN_OUTPUTS if "." in name] + [
        os.path.relpath(path, output_dir) for pattern in _LEGACY_OUTPUTS
        for path in glob.glob(os.path.join(glob.escape(output_dir), pattern))]
    return outputs.remove_recorded_outputs(output_dir, TOOL, fallback=legacy)


def check_inputs(options):
    """Refuses an output directory that is, or would write over, one of the run's inputs
    (`init_model_dir`, the vocabulary, the config file), naming both flags."""
    config = options.config
    config_file = (config if isinstance(config, (str, os.PathLike))
                   and resolve_model_size(config, warn=False)[0] == "file" else None)
    outputs.check_not_over_inputs(
        options.output_dir, "output_dir",
        [("init_model_dir", options.init_model_dir), ("vocab_file", options.vocab_file),
         ("preset", config_file)], writes=RUN_OUTPUTS)


@contextlib.contextmanager
def claimed_output_dir(options, is_chief=True):
    """Holds the lock of `output_dir` and records what the block writes there in its manifest
    (on the chief: the other workers of a multi-worker run write nothing there)."""
    if not is_chief:
        yield
        return
    with outputs.output_lock(options.output_dir), outputs.recording_outputs(options.output_dir,
                                                                           TOOL):
        yield


def run_record(options, config):
    return {"bert_config": config.to_dict(), "next_sentence": options.uses_next_sentence,
            "left_to_right": options.left_to_right, "optimizer": options.optimizer,
            "loss_scaling": options.mixed_precision == "mixed_float16",
            "train_batch_size": options.train_batch_size,
            "max_seq_length": options.max_seq_length}


def check_output_dir(options, config, latest, backend, foreign=(None, None)):
    """Refuses an `output_dir` whose checkpoints or model belong to another configuration, or
    whose checkpoints the engine of another Keras backend wrote.

    `latest` is the latest checkpoint of the run's engine in `output_dir` (or None), `backend`
    the Keras backend the run is on, `foreign` (the latest checkpoint of the other engine or
    None, that engine's backend). Returns the checkpoint to resume from, or None.
    """
    out = options.output_dir
    if tf.io.gfile.exists(out) and not tf.io.gfile.isdir(out):
        raise PretrainingError(f"--output_dir={out} is a file, not a directory")
    previous = saved_run_record(out) if latest else None
    theirs, other = foreign
    if theirs and not latest:
        raise PretrainingError(
            f"{theirs} is a checkpoint of the trainer of the Keras {other} backend; this run is "
            f"on the {backend} backend, whose checkpoints differ: resume it with "
            f"KERAS_BACKEND={other}, continue from its model directory with init_model_dir, or "
            "pass --start_over to replace it")
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


def saved_run_record(output_dir):
    """The run record (`run_record`) of `checkpoints/run.json` in `output_dir`; None when the
    file is not there."""
    run_path = os.path.join(output_dir, CHECKPOINTS_DIR, RUN_FILE)
    if not tf.io.gfile.exists(run_path):
        return None
    with tf.io.gfile.GFile(run_path) as f:
        return _with_causal_attention(json.load(f))


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


__all__ = ["CHECKPOINTS_DIR", "RUN_FILE", "EVAL_RESULTS_FILE", "RUN_OUTPUTS", "write_model_files",
           "check_sequence_length", "write_run_files", "inference_weights",
           "remove_earlier_run", "resolve_model_setup", "check_inputs", "claimed_output_dir",
           "options_record", "TOOL", "check_output_dir", "run_record",
           "saved_run_record", "check_checkpoint_config"]
