"""The main job: raw text to a pre-trained, fine-tuned, exported and served BERT, in one command.

Stages, each a library function of this package, each leaving its output under `work_dir`:

1. vocab          raw text -> `vocab/vocab.txt` (WordPiece, `bert_keras.text.vocab_builder`)
2. data           raw text -> `data/train/*.tfrecord`, `data/heldout/*.tfrecord`
                  (`bert_keras.data.pipeline`, the original masking and next-sentence algorithm)
3. pretrain       TFRecords -> `model/` (a model directory; `bert_keras.pretraining.run`)
4. evaluate       MLM and NSP accuracy on the held-out records, next to the baselines of always
                  answering the most frequent token and the majority label
5. finetune       what pre-training is worth: `model/` and the same architecture freshly
                  initialized, each fine-tuned on a sentence classification task (by default
                  SST-2, bundled in `bert_keras/data/sst2`) with the same budget and the same
                  search (`bert_keras.finetuning.transfer`): each side's learning rate and epochs
                  chosen from one grid on held-out *training* rows, then several seeds on the
                  dev set (mean and spread) and a learning curve (`learning_curve.png`); the
                  pre-trained side's run is saved as `finetuned/`
6. export         `model/` -> `export/preprocessor`, `export/encoder`; `finetuned/` ->
                  `export/classifier`, a raw-text classifier (SavedModels, `bert_keras.export`)
7. demo           a fresh Python process that imports only TensorFlow and tensorflow-text
                  (`bert_keras/export/serving_demo.py`) reloads the SavedModels with
                  `tf.saved_model.load`, prints the top-5 tokens the model predicts for each
                  [MASK] of a few sentences and classifies a few raw sentences.

A finished stage writes `stages/<name>.json`; a rerun skips finished stages and continues an
interrupted pre-training from its last checkpoint and an interrupted comparison from its last
finished run (`finetune_runs.json`). At the end the job writes `results.json`: the held-out
pre-training accuracies and their baselines, each side's chosen setting, per-seed dev scores and
learning curve, and the seconds of every stage. By default the job runs on the WikiText-2 sample
bundled in `bert_keras/data` (CC BY-SA 3.0).

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
from bert_keras.common.files import write_text_atomic

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
DEFAULT_TRAIN_FILE = os.path.join(DATA_DIR, "wikitext_train.txt")
DEFAULT_HELDOUT_FILE = os.path.join(DATA_DIR, "wikitext_heldout.txt")
DEFAULT_FINETUNE_DATA_DIR = os.path.join(DATA_DIR, "sst2")
SERVING_DEMO_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "export",
                                   "serving_demo.py")

# Sentences in the style of the bundled corpus (word-tokenized WikiText); [MASK] marks a word
# to predict.
DEFAULT_SENTENCES = (
    "He was born [MASK] London , the son of a farmer .",
    "It is one of the largest cities [MASK] the world .",
    "The lobster is a species of [MASK] from the eastern Atlantic Ocean .",
    "The [MASK] was built in the 19th century .",
    "In 1914 , the war [MASK] out in Europe .",
)

# Movie-review sentences in the style of SST-2 (lower-cased, word-tokenized) for the classifier.
DEFAULT_CLASSIFY_SENTENCES = (
    "a charming , funny and moving film .",
    "the plot is a mess and the acting is even worse .",
    "one of the best films of the year .",
    "a dull , tedious waste of two hours .",
)
# SST-2's labels are "0" and "1"; what they mean, for the printout.
LABEL_MEANINGS = {"glue/sst2": {"0": "negative", "1": "positive"},
                  "glue/cola": {"0": "unacceptable", "1": "acceptable"}}
SINGLE_SENTENCE_TASKS = tuple(LABEL_MEANINGS)

STAGES = ("vocab", "data", "pretrain", "evaluate", "finetune", "export", "demo")
RESULTS_NAME = "results.json"


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
    num_train_steps: int = 800
    learning_rate: float = 1e-3
    warmup_fraction: float = 0.05
    save_checkpoints_steps: int = 500
    steps_per_execution: int = 50
    strategy: str = "auto"
    mixed_precision: str = "float32"
    num_workers: int = 0
    random_seed: int = 12345
    sentences: tuple = DEFAULT_SENTENCES
    next_sentence: bool = True
    finetune_task: str = "glue/sst2"
    finetune_data_dir: str = DEFAULT_FINETUNE_DATA_DIR
    finetune_seq_length: int = 48
    finetune_batch_size: int = 32
    # The comparison of pre-trained and random initialization (`finetuning.transfer`): the
    # labelled examples of the headline runs, the held-out training rows that choose each side's
    # learning rate and epochs from the grid, the seeds and the learning curve's sizes.
    finetune_train_examples: int = 1000
    finetune_selection_examples: int = 500
    finetune_learning_rates: tuple = (1e-3, 3e-3)
    finetune_epochs: tuple = (3, 6)
    finetune_seeds: tuple = (1, 2, 3)
    learning_curve: tuple = (100, 300, 1000)  # add 3000 with --learning_curve: +80 s
    classify_sentences: tuple = DEFAULT_CLASSIFY_SENTENCES

    def paths(self):
        root = os.path.abspath(self.work_dir)
        return {
            "root": root,
            "vocab": os.path.join(root, "vocab", "vocab.txt"),
            "train_data": os.path.join(root, "data", "train"),
            "heldout_data": os.path.join(root, "data", "heldout"),
            "model": os.path.join(root, "model"),
            "finetuned": os.path.join(root, "finetuned"),
            "finetune_runs": os.path.join(root, "finetune_runs.json"),
            "learning_curve": os.path.join(root, "learning_curve.png"),
            "preprocessor": os.path.join(root, "export", "preprocessor"),
            "encoder": os.path.join(root, "export", "encoder"),
            "classifier": os.path.join(root, "export", "classifier"),
            "stages": os.path.join(root, "stages"),
            "results": os.path.join(root, RESULTS_NAME),
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


def check_inputs(options):
    """Checks the training and held-out text before anything is written (`CorpusError`)."""
    from bert_keras.data.corpus import check_corpus_files

    check_corpus_files(_files(options.input_files), options.input_format)
    check_corpus_files(_files(options.heldout_files), options.input_format)


def check_finetune_inputs(options):
    """Checks the labelled task files against the comparison's settings before anything is
    written: enough rows for the headline, the curve and the held-out selection rows, and both
    labels among the headline rows (ValueError naming the file or the setting)."""
    from bert_keras.finetuning.tasks import glue

    from bert_keras.finetuning.catalog import parse_task_name

    name = parse_task_name(options.finetune_task).glue_task
    examples = glue.read_glue_examples(name, options.finetune_data_dir, "train")
    source = glue.split_path(name, options.finetune_data_dir, "train")
    transfer_options(options).check(len(examples), source,
                                    [example.label for example in examples])
    glue.read_glue_examples(name, options.finetune_data_dir, "dev")


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
        mixed_precision=options.mixed_precision, seed=options.random_seed,
        next_sentence=options.next_sentence)
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


def transfer_options(options):
    """The `finetuning.transfer.TransferOptions` of the job's options."""
    from bert_keras.finetuning.transfer import TransferOptions

    return TransferOptions(
        num_train_examples=options.finetune_train_examples,
        selection_examples=options.finetune_selection_examples,
        learning_rates=tuple(float(v) for v in options.finetune_learning_rates),
        epochs=tuple(int(v) for v in options.finetune_epochs),
        seeds=tuple(int(v) for v in options.finetune_seeds),
        curve_examples=tuple(int(v) for v in options.learning_curve),
        train_batch_size=options.finetune_batch_size)


def compare_finetuning(options, model_dir, initial_weights, state_path=None, log=print):
    """Fine-tunes each of `initial_weights` ({side: weights}) on the job's task with the same
    grid, seeds and budget (`finetuning.transfer.compare_initializations`); returns
    (result, sweep), the sweep holding the model of the last run."""
    from bert_keras.finetuning.sweep import FinetuningSweep
    from bert_keras.finetuning.task import FinetuningOptions, get_task
    from bert_keras.finetuning.transfer import compare_initializations
    from bert_keras.modeldir import model_dir as model_dir_lib

    task = get_task(options.finetune_task, options.finetune_data_dir, model_dir,
                    FinetuningOptions(max_seq_length=options.finetune_seq_length))
    config = model_dir_lib.read_config(model_dir)
    sweep = FinetuningSweep(task, config, options.finetune_batch_size)
    result = compare_initializations(task, config, initial_weights, transfer_options(options),
                                     state_path=state_path, log=log, sweep=sweep)
    return result, sweep


PRETRAINED, RANDOM_INIT = "pre-trained", "random init"


def finetune_stage(options, paths):
    from bert_keras.finetuning.sweep import random_encoder_weights, subset
    from bert_keras.finetuning.task_models import save_task_model_dir
    from bert_keras.finetuning.transfer import clearly_better, plot_learning_curve
    from bert_keras.modeldir import model_dir as model_dir_lib

    config = model_dir_lib.read_config(paths["model"])
    pretrained = model_dir_lib.read_weights(paths["model"])
    initial = {PRETRAINED: pretrained,
               RANDOM_INIT: random_encoder_weights(config, options.random_seed)}
    result, sweep = compare_finetuning(options, paths["model"], initial, paths["finetune_runs"])
    plot_learning_curve(result, paths["learning_curve"],
                        f"{options.finetune_task}: {options.preset} BERT, pre-trained vs not")

    # The model directory that is exported and served: the pre-trained side at its chosen
    # setting, first seed, on the headline examples.
    chosen = result["sides"][PRETRAINED]["chosen"]
    train = sweep.task.load("train", training=True)
    sweep.run(pretrained, subset(train, range(options.finetune_train_examples)),
              chosen["learning_rate"], chosen["epochs"], options.finetune_seeds[0])
    save_task_model_dir(sweep.model, paths["finetuned"], config, sweep.task.vocab,
                        sweep.task.do_lower_case, sweep.task.task_config())

    pre, rand = result["sides"][PRETRAINED], result["sides"][RANDOM_INIT]
    margin = pre["dev_mean"] - rand["dev_mean"]
    helps = clearly_better(result, PRETRAINED, RANDOM_INIT)
    summary = (f"dev {result['metric']} {pre['dev_mean']:.3f} +- {pre['dev_std']:.3f} pre-trained, "
               f"{rand['dev_mean']:.3f} +- {rand['dev_std']:.3f} from random initialization "
               f"({margin * 100:+.1f} points; {len(pre['dev'])} seeds, "
               f"{options.finetune_train_examples} labelled examples)")
    return {"summary": summary, **_jsonable(result), "margin": margin,
            "pretraining_clearly_helps": helps}


def write_random_init_model_dir(model_dir, output_dir, seed):
    """A model directory with `model_dir`'s config and vocabulary and freshly initialized weights
    (BERT's truncated normal, std `initializer_range`), to fine-tune without pre-training."""
    from bert_keras.finetuning.sweep import random_encoder_weights
    from bert_keras.modeldir import model_dir as model_dir_lib

    config = model_dir_lib.read_config(model_dir)
    model_dir_lib.write_model_dir(
        output_dir, config, model_dir_lib.read_vocab(model_dir, config),
        model_dir_lib.read_do_lower_case(model_dir), random_encoder_weights(config, seed))


def export_stage(options, paths):
    from bert_keras.export import export_from_model_dir

    export_from_model_dir("preprocessor", paths["model"], paths["preprocessor"],
                          seq_length=options.max_seq_length)
    export_from_model_dir("encoder", paths["model"], paths["encoder"])
    export_from_model_dir("task", paths["finetuned"], paths["classifier"])
    return {"summary": f"SavedModels in {os.path.dirname(paths['preprocessor'])}"}


def serve_in_fresh_process(request, work_dir):
    """Runs `bert_keras/export/serving_demo.py` on `request` in a new Python process that
    imports only TensorFlow and tensorflow-text; returns its response dict."""
    import subprocess
    import sys

    request_path = os.path.join(work_dir, "demo_request.json")
    response_path = os.path.join(work_dir, "demo_response.json")
    write_text_atomic(request_path, json.dumps(request, indent=2) + "\n")
    if os.path.exists(response_path):
        os.remove(response_path)
    completed = subprocess.run([sys.executable, SERVING_DEMO_SCRIPT, request_path,
                                response_path], capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise RuntimeError(f"the serving demo process failed (exit {completed.returncode}):\n"
                           f"{completed.stderr[-4000:]}")
    with open(response_path, encoding="utf-8") as f:
        response = json.load(f)
    if response["loaded_modules"]:
        raise RuntimeError(f"the serving process loaded {response['loaded_modules']}")
    return response


def demo_stage(options, paths):
    response = serve_in_fresh_process({
        "preprocessor": paths["preprocessor"], "encoder": paths["encoder"],
        "vocab_file": paths["vocab"], "seq_length": options.max_seq_length,
        "masked_sentences": list(options.sentences), "classifier": paths["classifier"],
        "classify_sentences": list(options.classify_sentences)}, paths["root"])
    lines = []
    for sentence, per_mask in zip(options.sentences, response["masked_word_predictions"]):
        lines.append(sentence)
        for candidates in per_mask:
            lines.append("    [MASK] -> " + "  ".join(f"{token} ({p:.2f})" for token, p in candidates))
    meanings = LABEL_MEANINGS.get(options.finetune_task, {})
    classifications = []
    for sentence, (label, probability) in zip(options.classify_sentences,
                                              response["classifications"]):
        meaning = meanings.get(label, label)
        classifications.append(f"{meaning:>8} ({probability:.2f})  {sentence}")
    return {"summary": f"{len(options.sentences)} masked sentences, "
                       f"{len(options.classify_sentences)} classified, in a fresh process",
            "predictions": lines, "classifications": classifications}


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


def results_summary(results):
    """The figures of a finished job, as written to `results.json`."""
    evaluated, finetuned = results["evaluate"], results["finetune"]
    seconds = {name: results[name].get("seconds") for name in STAGES}
    seconds["total"] = round(sum(value or 0.0 for value in seconds.values()), 1)
    sides = finetuned["sides"]
    return {
        "pretrain": {
            "heldout_mlm_accuracy": evaluated["results"]["masked_lm_accuracy"],
            "heldout_nsp_accuracy": evaluated["results"].get("next_sentence_accuracy"),
            "most_frequent_token_share": evaluated["baselines"]["unigram_mlm_accuracy"],
            "nsp_majority_share": evaluated["baselines"]["nsp_majority_share"],
            "global_step": evaluated["results"].get("global_step"),
        },
        "finetune": {
            "task": finetuned["task"],
            "metric": finetuned["metric"],
            "train_examples": finetuned["options"]["num_train_examples"],
            "selection_examples": finetuned["options"]["selection_examples"],
            "seeds": finetuned["options"]["seeds"],
            "dev_majority_share": finetuned["majority_share"],
            "pretrained": sides[PRETRAINED],
            "random_init": sides[RANDOM_INIT],
            "margin": finetuned["margin"],
            "pretraining_clearly_helps": finetuned["pretraining_clearly_helps"],
        },
        "seconds": seconds,
    }


def _print_comparison(finetune):
    metric = finetune["metric"]
    sides = {PRETRAINED: finetune["pretrained"], RANDOM_INIT: finetune["random_init"]}
    print(f"\nFine-tuning on {finetune['task']}: dev {metric} with {finetune['train_examples']} "
          f"labelled examples; each side's learning rate and epochs chosen on "
          f"{finetune['selection_examples']} held-out training examples (never on dev):")
    seeds = " ".join(f"seed {seed}" for seed in finetune["seeds"])
    print(f"  {'':<12} {'lr':>7} {'epochs':>6}   {seeds}   mean +- sd")
    for side, values in sides.items():
        chosen = values["chosen"]
        scores = "  ".join(f"{score:6.3f}" for score in values["dev"])
        print(f"  {side:<12} {chosen['learning_rate']:>7g} {chosen['epochs']:>6}   {scores}   "
              f"{values['dev_mean']:.3f} +- {values['dev_std']:.3f}")
    verdict = ("clearly better (at least 3 points and twice the standard error of the "
               "difference)" if finetune["pretraining_clearly_helps"] else
               "NOT clearly better than random initialization at this budget")
    print(f"  pre-trained minus random init: {finetune['margin'] * 100:+.1f} points "
          f"(majority label {finetune['dev_majority_share']:.3f}): pre-trained is {verdict}")
    sizes = sorted(int(size) for size in finetune["pretrained"]["curve"])
    print("Learning curve (dev " + metric + ", one seed a point):")
    print(f"  {'labelled':<12} " + " ".join(f"{size:>6}" for size in sizes))
    for side, values in sides.items():
        print(f"  {side:<12} " + " ".join(f"{values['curve'][str(size)]:6.3f}" for size in sizes))


def run_main_job(options):
    """Runs (or resumes) every stage; writes `results.json`; returns {stage: result}."""
    _check_options(options)
    paths = options.paths()
    if not os.path.exists(os.path.join(paths["stages"], "data.json")):
        check_inputs(options)
    if not os.path.exists(os.path.join(paths["stages"], "finetune.json")):
        check_finetune_inputs(options)
    os.makedirs(paths["root"], exist_ok=True)
    stages = _Stages(paths["stages"])
    functions = {"vocab": build_vocab_stage, "data": create_data_stage, "pretrain": pretrain_stage,
                 "evaluate": evaluate_stage, "finetune": finetune_stage,
                 "export": export_stage, "demo": demo_stage}
    results = {name: stages.run(name, lambda f=functions[name]: f(options, paths)) for name in STAGES}
    summary = results_summary(results)
    write_text_atomic(paths["results"], json.dumps(summary, indent=2) + "\n")

    print("\nMasked-word predictions of the reloaded SavedModels (top 5):")
    for line in results["demo"]["predictions"]:
        print("  " + line)
    print(f"\nThe reloaded {options.finetune_task} classifier on raw sentences:")
    for line in results["demo"]["classifications"]:
        print("  " + line)
    pretrain = summary["pretrain"]
    nsp = pretrain["heldout_nsp_accuracy"]
    print(f"\nPre-training, held out: masked-LM accuracy {pretrain['heldout_mlm_accuracy']:.3f} "
          f"(most frequent token {pretrain['most_frequent_token_share']:.3f}); " + (
              f"next-sentence accuracy {nsp:.3f} (majority label "
              f"{pretrain['nsp_majority_share']:.3f})" if nsp is not None
              else "no next-sentence prediction"))
    _print_comparison(summary["finetune"])
    print(f"Learning curve plot: {paths['learning_curve']}")
    print(f"{summary['seconds']['total']:.0f} s in all; everything is in {paths['root']} "
          f"(figures in {paths['results']})")
    return results


def _check_options(options):
    if options.finetune_task not in SINGLE_SENTENCE_TASKS:
        raise ValueError(f"finetune_task must be one of {SINGLE_SENTENCE_TASKS} (a single-sentence "
                         f"classification task, for the raw-text demo), got {options.finetune_task!r}")


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
    flags.DEFINE_enum("dtype", "auto", list(optimization.DTYPE_FLAG_VALUES),
                      "Pre-training compute dtype: float32, bfloat16 or float16 (variables stay "
                      "float32); auto: bfloat16 where the device computes it natively, else "
                      "float32.")
    flags.DEFINE_alias("mixed_precision", "dtype")  # the earlier spelling
    flags.DEFINE_integer("num_workers", defaults.num_workers,
                         "Processes for the data stage (0: one per core).")
    flags.DEFINE_enum("finetune_task", defaults.finetune_task, list(SINGLE_SENTENCE_TASKS),
                      "Sentence classification task to fine-tune on.")
    flags.DEFINE_string("finetune_data_dir", defaults.finetune_data_dir,
                        "Folder with the task's train.tsv and dev.tsv (default: the bundled "
                        "SST-2 sample).")
    flags.DEFINE_integer("finetune_seq_length", defaults.finetune_seq_length,
                         "Fine-tuning sequence length.")
    flags.DEFINE_integer("finetune_train_examples", defaults.finetune_train_examples,
                         "Labelled training examples of the headline comparison (the first "
                         "rows of train.tsv).")
    flags.DEFINE_integer("finetune_selection_examples", defaults.finetune_selection_examples,
                         "The last rows of train.tsv, held out to choose each side's learning "
                         "rate and epochs.")
    flags.DEFINE_list("finetune_learning_rates", [f"{v:g}" for v in defaults.finetune_learning_rates],
                      "Fine-tuning learning rates to choose from (both sides).")
    flags.DEFINE_list("finetune_epochs", [str(v) for v in defaults.finetune_epochs],
                      "Fine-tuning epochs to choose from (both sides).")
    flags.DEFINE_list("finetune_seeds", [str(v) for v in defaults.finetune_seeds],
                      "Fine-tuning seeds at the chosen setting (mean and spread).")
    flags.DEFINE_list("learning_curve", [str(v) for v in defaults.learning_curve],
                      "Numbers of labelled examples of the learning curve.")
    flags.DEFINE_bool("next_sentence", defaults.next_sentence,
                      "Pre-train with the next-sentence task as well as the masked LM.")


def _main(argv):
    from absl import flags

    del argv
    values = {field.name: flags.FLAGS[field.name].value
              for field in dataclasses.fields(MainJobOptions)
              if field.name in flags.FLAGS and field.name != "mixed_precision"}
    values["mixed_precision"] = optimization.mixed_precision_policy(flags.FLAGS.dtype)
    for name, kind in (("finetune_learning_rates", float), ("finetune_epochs", int),
                       ("finetune_seeds", int), ("learning_curve", int)):
        try:
            values[name] = tuple(kind(value) for value in values[name])
        except ValueError:
            raise SystemExit(f"bert-keras-main: error: --{name}: not a list of "
                             f"{kind.__name__}s: {','.join(values[name])}") from None
    from bert_keras.data.corpus import CorpusError

    try:
        run_main_job(MainJobOptions(**values))
    except (CorpusError, FileNotFoundError, ValueError) as error:
        # Bad input: the message names the file; a traceback would only hide it.
        raise SystemExit(f"bert-keras-main: error: {error}") from None


def cli_main():
    """Entry point of the `bert-keras-main` console script and of tools/run_main_job.py."""
    from absl import app

    _define_flags()
    app.run(_main)
