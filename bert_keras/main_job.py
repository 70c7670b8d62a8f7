"""The main job: raw text to a pre-trained, exported and reloaded BERT, in one command.

Stages, each a library function of this package, each leaving its output under `work_dir`:

1. vocab      raw text -> `vocab/vocab.txt` (WordPiece, `bert_keras.text.vocab_builder`)
2. data       raw text -> `data/train/*.tfrecord`, `data/heldout/*.tfrecord`
              (`bert_keras.data.pipeline`, the original masking and next-sentence algorithm)
3. pretrain   TFRecords -> `model/` (a model directory; `bert_keras.pretraining.run`)
4. evaluate   MLM and NSP accuracy on the held-out records
5. export     `model/` -> `export/preprocessor`, `export/encoder` (SavedModels, `bert_keras.export`)
6. demo       reloads both SavedModels with `tf.saved_model.load` and prints the top-5 tokens the
              model predicts for each [MASK] of a few sentences.

A finished stage writes `stages/<name>.json`; a rerun skips finished stages and continues an
interrupted pre-training from its last checkpoint. By default the job runs on the WikiText-2
sample bundled in `bert_keras/data` (CC BY-SA 3.0).

Example:

>>> from bert_keras.main_job import MainJobOptions, run_main_job
>>> run_main_job(MainJobOptions(work_dir="bert_keras_work"))  # doctest: +SKIP
"""

import dataclasses
import glob
import json
import os
import time

from bert_keras import optimization
from bert_keras.model.config import write_text_atomic

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
DEFAULT_TRAIN_FILE = os.path.join(DATA_DIR, "wikitext_train.txt")
DEFAULT_HELDOUT_FILE = os.path.join(DATA_DIR, "wikitext_heldout.txt")

# Sentences in the style of the bundled corpus (word-tokenized WikiText); [MASK] marks a word
# to predict.
DEFAULT_SENTENCES = (
    "He was born [MASK] London , the son of a farmer .",
    "It is one of the largest cities [MASK] the world .",
    "The lobster is a species of [MASK] from the eastern Atlantic Ocean .",
    "The [MASK] was built in the 19th century .",
    "In 1914 , the war [MASK] out in Europe .",
)

STAGES = ("vocab", "data", "pretrain", "evaluate", "export", "demo")


@dataclasses.dataclass
class MainJobOptions:
    """Settings of the main job; the defaults fit a 2-core CPU in a few minutes."""

    work_dir: str = "bert_keras_work"
    input_files: str = DEFAULT_TRAIN_FILE
    heldout_files: str = DEFAULT_HELDOUT_FILE
    input_format: str = "paragraphs"
    do_lower_case: bool = True
    vocab_size: int = 5000
    preset: str = "tiny"
    max_seq_length: int = 32
    max_predictions_per_seq: int = 5
    masked_lm_prob: float = 0.15
    dupe_factor: int = 10
    train_batch_size: int = 128
    num_train_steps: int = 3000
    learning_rate: float = 1e-3
    warmup_fraction: float = 0.05
    save_checkpoints_steps: int = 500
    steps_per_execution: int = 50
    strategy: str = "auto"
    mixed_precision: str = "float32"
    num_workers: int = 0
    random_seed: int = 12345
    sentences: tuple = DEFAULT_SENTENCES

    def paths(self):
        root = os.path.abspath(self.work_dir)
        return {
            "root": root,
            "vocab": os.path.join(root, "vocab", "vocab.txt"),
            "train_data": os.path.join(root, "data", "train"),
            "heldout_data": os.path.join(root, "data", "heldout"),
            "model": os.path.join(root, "model"),
            "preprocessor": os.path.join(root, "export", "preprocessor"),
            "encoder": os.path.join(root, "export", "encoder"),
            "stages": os.path.join(root, "stages"),
        }


def _files(pattern_list):
    files = []
    for pattern in str(pattern_list).split(","):
        pattern = pattern.strip()
        if pattern:
            matched = sorted(glob.glob(pattern))
            if not matched:
                raise FileNotFoundError(f"no file matches {pattern!r}")
            files.extend(matched)
    return files


class _Stages:
    """Records finished stages in `stages/<name>.json` and prints a header per stage."""

    def __init__(self, directory):
        self.directory = directory
        os.makedirs(directory, exist_ok=True)

    def _path(self, name):
        return os.path.join(self.directory, f"{name}.json")

    def done(self, name):
        path = self._path(name)
        if not os.path.exists(path):
            return None
        with open(path, encoding="utf-8") as f:
            return json.load(f)

    def run(self, name, function):
        number = STAGES.index(name) + 1
        finished = self.done(name)
        if finished is not None:
            print(f"[{number}/{len(STAGES)}] {name}: already done ({finished.get('summary', '')})",
                  flush=True)
            return finished
        print(f"[{number}/{len(STAGES)}] {name} ...", flush=True)
        start = time.time()
        result = function()
        result["seconds"] = round(time.time() - start, 1)
        write_text_atomic(self._path(name), json.dumps(result, indent=2, sort_keys=True) + "\n")
        print(f"[{number}/{len(STAGES)}] {name}: done in {result['seconds']:.0f}s "
              f"({result.get('summary', '')})", flush=True)
        return result


def build_vocab_stage(options, paths):
    from bert_keras.text import vocab_builder

    tokens = vocab_builder.build_vocabulary(_files(options.input_files), options.vocab_size,
                                            lower_case=options.do_lower_case)
    os.makedirs(os.path.dirname(paths["vocab"]), exist_ok=True)
    vocab_builder.write_vocabulary(tokens, paths["vocab"])
    return {"summary": f"{len(tokens)} tokens in {paths['vocab']}", "vocab_size": len(tokens)}


def create_data_stage(options, paths):
    from bert_keras.data import instances as pretraining_data
    from bert_keras.data import pipeline as pretraining_pipeline

    instance_options = pretraining_data.InstanceOptions(
        max_seq_length=options.max_seq_length,
        max_predictions_per_seq=options.max_predictions_per_seq,
        masked_lm_prob=options.masked_lm_prob, dupe_factor=options.dupe_factor)
    results = {}
    for split, files, shards in (("train", options.input_files, 4), ("heldout", options.heldout_files, 1)):
        config = pretraining_pipeline.PipelineConfig(
            input_files=_files(files), vocab_file=paths["vocab"], output_dir=paths[f"{split}_data"],
            do_lower_case=options.do_lower_case, options=instance_options,
            random_seed=options.random_seed + (split == "heldout"), num_output_shards=shards,
            num_workers=options.num_workers, input_format=options.input_format)
        stats = pretraining_pipeline.run(config)
        results[split] = {"instances": stats.get("instances"), "documents": stats.get("documents")}
    summary = ", ".join(f"{split}: {value['instances']} instances" for split, value in results.items())
    return {"summary": summary, **results}


def _pretraining_options(options, paths, **overrides):
    from bert_keras.pretraining.run import PretrainingOptions

    values = dict(
        input_files=os.path.join(paths["train_data"], "*.tfrecord"), output_dir=paths["model"],
        config=options.preset, vocab_file=paths["vocab"], do_lower_case=options.do_lower_case,
        strategy=options.strategy, train_batch_size=options.train_batch_size,
        eval_batch_size=options.train_batch_size, max_seq_length=options.max_seq_length,
        max_predictions_per_seq=options.max_predictions_per_seq,
        num_train_steps=options.num_train_steps,
        num_warmup_steps=int(options.num_train_steps * options.warmup_fraction),
        learning_rate=options.learning_rate, save_checkpoints_steps=options.save_checkpoints_steps,
        steps_per_execution=options.steps_per_execution,
        mixed_precision=options.mixed_precision, seed=options.random_seed)
    values.update(overrides)
    return PretrainingOptions(**values)


def pretrain_stage(options, paths):
    from bert_keras.pretraining import run as pretraining

    result = pretraining.run_pretraining(_pretraining_options(options, paths))
    summary = f"{options.num_train_steps} steps of a {options.preset} BERT, model directory {paths['model']}"
    return {"summary": summary, "result": _jsonable(result)}


def evaluate_stage(options, paths):
    from bert_keras.pretraining import run as pretraining

    from bert_keras.pretraining.baselines import compute_baselines

    heldout = os.path.join(paths["heldout_data"], "*.tfrecord")
    results = _jsonable(pretraining.evaluate(_pretraining_options(
        options, paths, mode="eval", input_files=heldout)))
    baselines = compute_baselines(os.path.join(paths["train_data"], "*.tfrecord"), heldout,
                                  options.max_seq_length, options.max_predictions_per_seq)
    summary = (f"held-out masked_lm_accuracy {results['masked_lm_accuracy']:.3f} (most frequent "
               f"token {baselines['unigram_mlm_accuracy']:.3f})")
    if "next_sentence_accuracy" in results:
        summary += (f", next_sentence_accuracy {results['next_sentence_accuracy']:.3f} (majority "
                    f"label {baselines['nsp_majority_share']:.3f})")
    return {"summary": summary, "results": results, "baselines": baselines}


def export_stage(options, paths):
    from bert_keras.export import export_from_model_dir

    export_from_model_dir("preprocessor", paths["model"], paths["preprocessor"],
                          seq_length=options.max_seq_length)
    export_from_model_dir("encoder", paths["model"], paths["encoder"])
    return {"summary": f"SavedModels in {os.path.dirname(paths['preprocessor'])}"}


def masked_word_predictions(preprocessor_dir, encoder_dir, vocab_file, sentences, seq_length=128,
                            top_k=5):
    """Top-k predictions for every [MASK] of `sentences`, from the exported SavedModels alone.

    The text between [MASK] markers goes through the exported preprocessor's `tokenize`; the
    mask id is put in place of each marker, the pieces are packed with its `bert_pack_inputs`
    and scored by the exported encoder's `mlm` sub-object.

    Returns:
      A list (one per sentence) of lists (one per [MASK]) of (token, probability) pairs.
    """
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the ops of the exported tokenizer)

    preprocessor = tf.saved_model.load(preprocessor_dir)
    encoder = tf.saved_model.load(encoder_dir)
    with open(vocab_file, encoding="utf-8") as f:
        vocab = [line.rstrip("\n") for line in f]
    mask_id = vocab.index("[MASK]")

    rows = []
    for sentence in sentences:
        ids = []
        for index, part in enumerate(sentence.split("[MASK]")):
            if index:
                ids.append(mask_id)
            if part.strip():
                ids.extend(preprocessor.tokenize(tf.constant([part])).flat_values.numpy().tolist())
        rows.append(ids)
    segments = tf.ragged.constant(rows, dtype=tf.int32)
    inputs = preprocessor.bert_pack_inputs([segments], seq_length=tf.constant(seq_length))
    word_ids = inputs["input_word_ids"].numpy()
    positions = np.zeros((len(rows), max(1, max(r.count(mask_id) for r in rows))), np.int32)
    for row in range(len(rows)):
        found = np.flatnonzero(word_ids[row] == mask_id)
        positions[row, :len(found)] = found
    outputs = encoder.mlm(dict(inputs, masked_lm_positions=tf.constant(positions)))
    probabilities = tf.nn.softmax(outputs["mlm_logits"], axis=-1).numpy()
    predictions = []
    for row, ids in enumerate(rows):
        per_mask = []
        for slot in range(ids.count(mask_id)):
            best = np.argsort(-probabilities[row, slot])[:top_k]
            per_mask.append([(vocab[i], float(probabilities[row, slot, i])) for i in best])
        predictions.append(per_mask)
    return predictions


def demo_stage(options, paths):
    predictions = masked_word_predictions(paths["preprocessor"], paths["encoder"], paths["vocab"],
                                          options.sentences, seq_length=options.max_seq_length)
    lines = []
    for sentence, per_mask in zip(options.sentences, predictions):
        lines.append(sentence)
        for candidates in per_mask:
            lines.append("    [MASK] -> " + "  ".join(f"{token} ({p:.2f})" for token, p in candidates))
    return {"summary": f"{len(options.sentences)} sentences", "predictions": lines}


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def run_main_job(options):
    """Runs (or resumes) every stage; returns {stage: result}."""
    paths = options.paths()
    os.makedirs(paths["root"], exist_ok=True)
    stages = _Stages(paths["stages"])
    functions = {"vocab": build_vocab_stage, "data": create_data_stage, "pretrain": pretrain_stage,
                 "evaluate": evaluate_stage, "export": export_stage, "demo": demo_stage}
    results = {name: stages.run(name, lambda f=functions[name]: f(options, paths)) for name in STAGES}

    print("\nMasked-word predictions of the reloaded SavedModels (top 5):")
    for line in results["demo"]["predictions"]:
        print("  " + line)
    print(f"\nHeld-out {results['evaluate']['summary'][len('held-out '):]}")
    print(f"\nEverything is in {paths['root']}")
    return results


def _define_flags():
    from absl import flags

    defaults = MainJobOptions()
    flags.DEFINE_string("work_dir", defaults.work_dir, "Where every output goes; a rerun resumes.")
    flags.DEFINE_string("input_files", defaults.input_files,
                        "Training text: comma-separated files or globs (default: bundled WikiText).")
    flags.DEFINE_string("heldout_files", defaults.heldout_files, "Held-out text for evaluation.")
    flags.DEFINE_enum("input_format", defaults.input_format, ["paragraphs", "sentences"],
                      "paragraphs: one paragraph per line, ' = Title = ' starts a document; "
                      "sentences: one sentence per line, blank line between documents.")
    flags.DEFINE_bool("do_lower_case", defaults.do_lower_case, "Uncased vocabulary and model.")
    flags.DEFINE_integer("vocab_size", defaults.vocab_size, "WordPiece vocabulary size.")
    flags.DEFINE_string("preset", defaults.preset, "Model size: tiny, mini, small, medium, base, "
                        "large or L{layers}_H{hidden}.")
    flags.DEFINE_integer("max_seq_length", defaults.max_seq_length, "Sequence length.")
    flags.DEFINE_integer("max_predictions_per_seq", defaults.max_predictions_per_seq,
                         "Masked positions per sequence.")
    flags.DEFINE_float("masked_lm_prob", defaults.masked_lm_prob,
                       "Share of the tokens to predict (at most max_predictions_per_seq).")
    flags.DEFINE_integer("dupe_factor", defaults.dupe_factor, "Passes over the corpus with new masks.")
    flags.DEFINE_integer("train_batch_size", defaults.train_batch_size, "Global batch size.")
    flags.DEFINE_integer("num_train_steps", defaults.num_train_steps, "Pre-training steps.")
    flags.DEFINE_float("learning_rate", defaults.learning_rate, "Peak learning rate.")
    flags.DEFINE_string("strategy", defaults.strategy, "auto, tpu, gpu, multi_worker or cpu.")
    flags.DEFINE_enum("dtype", "float32", list(optimization.DTYPE_FLAG_VALUES),
                      "Training compute dtype: float32, bfloat16 or float16 (variables stay float32).")
    flags.DEFINE_alias("mixed_precision", "dtype")  # the earlier spelling
    flags.DEFINE_integer("num_workers", defaults.num_workers,
                         "Processes for the data stage (0: one per core).")


def _main(argv):
    from absl import flags

    del argv
    values = {field.name: flags.FLAGS[field.name].value
              for field in dataclasses.fields(MainJobOptions)
              if field.name in flags.FLAGS and field.name != "mixed_precision"}
    values["mixed_precision"] = optimization.mixed_precision_policy(flags.FLAGS.dtype)
    run_main_job(MainJobOptions(**values))


def cli_main():
    """Entry point of the `bert-keras-main` console script and of tools/run_main_job.py."""
    from absl import app

    _define_flags()
    app.run(_main)
