"""The main job's stages, each a library function of this package that leaves its output under
the work directory (see `bert_keras.main_job`), and the record of finished stages that lets a
rerun resume.
"""

import json
import os
import time

from bert_keras.common.cli import expand_files
from bert_keras.common.files import write_text_atomic
from bert_keras.main_job.options import STAGES

class Stages:
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

    check_corpus_files(expand_files(options.input_files), options.input_format,
                       encoding=options.input_encoding)
    check_corpus_files(expand_files(options.heldout_files, "heldout_files"),
                       options.input_format, encoding=options.input_encoding)


def check_finetune_inputs(options):
    """Checks the labelled task files against the comparison's settings before anything is
    written: enough rows for the headline, the curve and the held-out selection rows, and both
    labels among the headline rows (ValueError naming the file or the setting)."""
    from bert_keras.finetuning.glue import data as glue

    from bert_keras.finetuning.catalog import parse_task_name

    for task in options.tasks():
        name, data_dir = parse_task_name(task).glue_task, options.task_data_dir(task)
        examples = glue.read_glue_examples(name, data_dir, "train")
        source = glue.split_path(name, data_dir, "train")
        transfer_options(options, task).check(len(examples), source,
                                              [example.label for example in examples])
        glue.read_glue_examples(name, data_dir, "dev")


def build_vocab_stage(options, paths):
    from bert_keras.text import vocab_builder

    tokens = vocab_builder.build_vocabulary(expand_files(options.input_files), options.vocab_size,
                                            lower_case=options.do_lower_case,
                                            encoding=options.input_encoding)
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
    for split, flag, shards in (("train", "input_files", 4), ("heldout", "heldout_files", 1)):
        config = pretraining_pipeline.PipelineConfig(
            input_files=expand_files(getattr(options, flag), flag), vocab_file=paths["vocab"],
            output_dir=paths[f"{split}_data"],
            do_lower_case=options.do_lower_case, options=instance_options,
            seed=options.seed + (split == "heldout"), num_output_shards=shards,
            num_workers=options.num_workers, input_format=options.input_format,
            input_encoding=options.input_encoding)
        stats = pretraining_pipeline.run(config)
        results[split] = {"instances": stats.get("instances"), "documents": stats.get("documents")}
    summary = ", ".join(f"{split}: {value['instances']} instances" for split, value in results.items())
    return {"summary": summary, **results}


def pretrain_stage(options, paths):
    from bert_keras.pretraining import run as pretraining

    result = pretraining.run_pretraining(options.pretraining_options())
    summary = f"{options.num_train_steps} steps of a {options.preset} BERT, model directory {paths['model']}"
    return {"summary": summary, "result": _jsonable(result)}


def evaluate_stage(options, paths):
    from bert_keras.pretraining import run as pretraining

    from bert_keras.pretraining.baselines import compute_baselines

    heldout = os.path.join(paths["heldout_data"], "*.tfrecord")
    results = _jsonable(pretraining.evaluate(options.pretraining_options(
        mode="eval", input_files=heldout, dynamic_masking=False)))
    baselines = compute_baselines(os.path.join(paths["train_data"], "*.tfrecord"), heldout,
                                  options.max_seq_length, options.max_predictions_per_seq)
    summary = (f"held-out masked_lm_accuracy {results['masked_lm_accuracy']:.3f} (most frequent "
               f"token {baselines['unigram_mlm_accuracy']:.3f})")
    if "next_sentence_accuracy" in results:
        summary += (f", next_sentence_accuracy {results['next_sentence_accuracy']:.3f} (majority "
                    f"label {baselines['nsp_majority_share']:.3f})")
    return {"summary": summary, "results": results, "baselines": baselines}


def transfer_options(options, task=None, released=False):
    """The `finetuning.transfer.TransferOptions` of the job's options for `task` (default: the
    headline task; the second task has no learning curve beyond the headline size). With
    `released`, those of the released model's row: the same labelled sentences, held-out
    selection rows and batch size, its own grid (the paper's values) and seeds, no curve."""
    from bert_keras.finetuning.transfer import TransferOptions

    prefix = "released" if released else "finetune"
    curve = tuple(int(v) for v in options.learning_curve)
    if released or task not in (None, options.finetune_task):
        curve = (options.finetune_train_examples,)
    return TransferOptions(
        num_train_examples=options.finetune_train_examples,
        selection_examples=options.finetune_selection_examples,
        learning_rates=tuple(float(v) for v in getattr(options, f"{prefix}_learning_rates")),
        epochs=tuple(int(v) for v in getattr(options, f"{prefix}_epochs")),
        seeds=tuple(int(v) for v in getattr(options, f"{prefix}_seeds")),
        curve_examples=curve,
        train_batch_size=options.finetune_batch_size)


def compare_finetuning(options, model_dir, initial_weights, state_path=None, log=print,
                       task_name=None, keep=None, transfer=None):
    """Fine-tunes each of `initial_weights` ({side: weights}) on `task_name` (default: the job's
    headline task) with the same grid, seeds and budget (`transfer`, by default
    `transfer_options`; `finetuning.transfer.compare_initializations`, `keep` as there);
    returns (result, sweep), the sweep holding the model of the last run."""
    from bert_keras.finetuning.sweep import FinetuningSweep
    from bert_keras.finetuning.task import FinetuningOptions, get_task
    from bert_keras.finetuning.transfer import compare_initializations

    task_name = task_name or options.finetune_task
    task = get_task(task_name, options.task_data_dir(task_name), model_dir,
                    FinetuningOptions(max_seq_length=options.task_seq_length(task_name),
                                      pooling=options.finetune_pooling))
    config = task.model_dir.config
    sweep = FinetuningSweep(task, config, options.finetune_batch_size)
    result = compare_initializations(task, config, initial_weights,
                                     transfer or transfer_options(options, task_name),
                                     state_path=state_path, log=log, sweep=sweep, keep=keep)
    return result, sweep


PRETRAINED, RANDOM_INIT, RELEASED = "pre-trained", "random init", "released"


def _versus_random_init(result):
    """{side: {"margin", "clearly_better"}}: every side against random initialization."""
    from bert_keras.finetuning.transfer import clearly_better

    base = result["sides"][RANDOM_INIT]["dev_mean"]
    return {side: {"margin": values["dev_mean"] - base,
                   "clearly_better": clearly_better(result, side, RANDOM_INIT)}
            for side, values in result["sides"].items() if side != RANDOM_INIT}


def _save_served_model(options, paths, result, candidates):
    """Writes `finetuned/`: of the pre-trained sides (`candidates`, {side: (sweep, initial
    weights, kept weights or None)}), the one with the best dev mean in `result`, at its chosen
    setting, first seed, on the headline examples. A resumed comparison read that run back from
    its record (no kept weights), so it is trained again (the same run). Returns the side."""
    from bert_keras.finetuning.sweep import subset
    from bert_keras.finetuning.task_models import save_task_model_dir
    from bert_keras.model import checkpoint_names

    side = max(candidates, key=lambda name: result["sides"][name]["dev_mean"])
    sweep, initial, kept = candidates[side]
    if kept is None:
        chosen = result["sides"][side]["chosen"]
        train = sweep.task.load("train", training=True)
        seeds = options.released_seeds if side == RELEASED else options.finetune_seeds
        sweep.run(initial, subset(train, range(options.finetune_train_examples)),
                  chosen["learning_rate"], chosen["epochs"], int(seeds[0]))
    else:
        checkpoint_names.assign_weights(sweep.variables, kept, source="the kept run")
    save_task_model_dir(sweep.model, paths["finetuned"], sweep.config, sweep.task.vocab,
                        sweep.task.do_lower_case, sweep.task.task_config())
    return side


def finetune_stage(options, paths):
    """Each compared task: the job's pre-trained model and random initialization with one search
    (`compare_finetuning`), and the released model with the paper's recipe; the learning curve
    of the headline task; `finetuned/`, the best model of the served task."""
    from bert_keras.finetuning.sweep import random_encoder_weights
    from bert_keras.main_job import released as released_lib
    from bert_keras.main_job.plot import plot_learning_curve
    from bert_keras.modeldir.model_dir import ModelDir

    pretrained = ModelDir(paths["model"])
    initial = {PRETRAINED: pretrained.weights,
               RANDOM_INIT: random_encoder_weights(pretrained.config, options.seed)}
    name = released_lib.released_name(options)
    released_dir, missing = released_lib.convert_released_model(options, paths)
    if missing:
        print(f"{name}: {missing}; comparing two rows", flush=True)
    served, outcomes, summaries = options.served_task(), {}, []
    for task_name in options.tasks():
        keep = task_name == served
        state = paths["finetune_runs" if task_name == options.finetune_task else
                      "second_task_runs"]
        result, sweep = compare_finetuning(options, pretrained, initial, state,
                                           task_name=task_name, keep=PRETRAINED if keep else None)
        candidates = {PRETRAINED: (sweep, initial[PRETRAINED], result.pop("kept_weights", None))}
        if released_dir is not None:
            released_model = ModelDir(released_dir)
            released = {RELEASED: released_model.weights}
            other, released_sweep = compare_finetuning(
                options, released_model, released,
                os.path.join(paths["released_runs"], task_name.replace("/", "_") + ".json"),
                task_name=task_name, keep=RELEASED if keep else None,
                transfer=transfer_options(options, task_name, released=True))
            result["sides"][RELEASED] = other["sides"][RELEASED]
            result["released_options"] = other["options"]
            candidates[RELEASED] = (released_sweep, released[RELEASED],
                                    other.pop("kept_weights", None))
        if keep:
            served_side = _save_served_model(options, paths, result, candidates)
        del candidates
        versus = _versus_random_init(result)
        outcomes[task_name] = {**_jsonable(result), "versus_random_init": versus,
                               "margin": versus[PRETRAINED]["margin"],
                               "pretraining_clearly_helps": versus[PRETRAINED]["clearly_better"],
                               "seq_length": options.task_seq_length(task_name)}
        summaries.append(f"{task_name} dev {result['metric']} " + ", ".join(
            f"{values['dev_mean']:.3f} {side}" for side, values in result["sides"].items()))
    headline = outcomes[options.finetune_task]
    plot_learning_curve(headline, paths["learning_curve"],
                        f"{options.finetune_task}: {options.preset} BERT pre-trained here, "
                        f"not pre-trained, and {name}", names={RELEASED: name})
    return {"summary": "; ".join(summaries), **headline, "pooling": options.finetune_pooling,
            "other_tasks": {task: outcomes[task] for task in options.tasks()[1:]},
            "released": {"name": name, "missing": missing},
            "served": {"task": served, "side": served_side}}


def write_random_init_model_dir(model_dir, output_dir, seed):
    """A model directory with `model_dir`'s config and vocabulary and freshly initialized weights
    (BERT's truncated normal, std `initializer_range`), to fine-tune without pre-training."""
    from bert_keras.finetuning.sweep import random_encoder_weights
    from bert_keras.modeldir import model_dir as model_dir_lib

    source = model_dir_lib.ModelDir(model_dir)
    model_dir_lib.write_model_dir(output_dir, source.config, source.vocab, source.do_lower_case,
                                  random_encoder_weights(source.config, seed))


def export_stage(options, paths):
    from bert_keras.export import export_many

    export_many([dict(kind="preprocessor", model_dir=paths["model"],
                      export_dir=paths["preprocessor"], seq_length=options.max_seq_length),
                 dict(kind="encoder", model_dir=paths["model"], export_dir=paths["encoder"]),
                 dict(kind="task", model_dir=paths["finetuned"], export_dir=paths["classifier"])])
    return {"summary": f"SavedModels in {os.path.dirname(paths['preprocessor'])}"}


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
