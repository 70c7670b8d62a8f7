"""`run_main_job`: every stage in order (or resumed), then `results.json` and the printout."""

import dataclasses
import json
import os

from bert_keras.common import outputs
from bert_keras.common.cli import expand_files
from bert_keras.common.errors import BertKerasError
from bert_keras.common.files import describe_changes, write_text_atomic
from bert_keras.finetuning.task_models import POOLING_DESCRIPTIONS
from bert_keras.main_job import stages as stages_lib
from bert_keras.main_job.demo import demo_stage
from bert_keras.main_job.options import STAGES, check_options
from bert_keras.main_job.plot import majority_baseline
from bert_keras.main_job.stages import PRETRAINED, RANDOM_INIT, RELEASED

def _comparison_summary(finetuned):
    """One task's comparison, as written to `results.json`."""
    sides = finetuned["sides"]
    return {
        "task": finetuned["task"],
        "metric": finetuned["metric"],
        "seq_length": finetuned.get("seq_length"),
        "train_examples": finetuned["options"]["num_train_examples"],
        "selection_examples": finetuned["options"]["selection_examples"],
        "seeds": finetuned["options"]["seeds"],
        "dev_majority_share": finetuned["majority_share"],
        "majority_baseline": majority_baseline(finetuned["metric"], finetuned["majority_share"]),
        "pretrained": sides[PRETRAINED],
        "random_init": sides[RANDOM_INIT],
        "released": sides.get(RELEASED),
        "released_options": finetuned.get("released_options"),
        "grid": {"learning_rates": finetuned["options"]["learning_rates"],
                 "epochs": finetuned["options"]["epochs"]},
        "margin": finetuned["margin"],
        "pretraining_clearly_helps": finetuned["pretraining_clearly_helps"],
        "versus_random_init": finetuned.get("versus_random_init", {}),
    }


def results_summary(results):
    """The figures of a finished job, as written to `results.json`."""
    evaluated, finetuned = results["evaluate"], results["finetune"]
    seconds = {name: results[name].get("seconds") for name in STAGES}
    seconds["total"] = round(sum(value or 0.0 for value in seconds.values()), 1)
    return {
        "pretrain": {
            "heldout_mlm_accuracy": evaluated["results"]["masked_lm_accuracy"],
            "heldout_nsp_accuracy": evaluated["results"].get("next_sentence_accuracy"),
            "most_frequent_token_share": evaluated["baselines"]["unigram_mlm_accuracy"],
            "nsp_majority_share": evaluated["baselines"]["nsp_majority_share"],
            "global_step": evaluated["results"].get("global_step"),
        },
        "finetune": dict(_comparison_summary(finetuned), pooling=finetuned.get("pooling")),
        "other_tasks": {name: _comparison_summary(other)
                        for name, other in finetuned.get("other_tasks", {}).items()},
        "released": finetuned.get("released"),
        "served": finetuned.get("served"),
        "seconds": seconds,
    }


_METRIC_NAMES = {"matthews_corrcoef": "MCC", "accuracy": "accuracy"}


def _print_story(options, summary, demo, paths):
    """The printout: at most 40 lines (the stage lines above it are progress)."""
    pretrain, released = summary["pretrain"], summary["released"] or {}
    name = released.get("name", RELEASED)
    rows = {RELEASED: name, PRETRAINED: "pre-trained here", RANDOM_INIT: "random init"}
    print(f"\nPre-trained here: a {options.preset} BERT, {options.num_train_steps} steps on "
          "the bundled books. Held out:")
    nsp = pretrain["heldout_nsp_accuracy"]
    print(f"  masked-LM accuracy {pretrain['heldout_mlm_accuracy']:.3f} (always the most "
          f"frequent token: {pretrain['most_frequent_token_share']:.3f})" + (
              f"; next sentence {nsp:.3f} (majority label {pretrain['nsp_majority_share']:.3f})"
              if nsp is not None else ""))
    print("  its SavedModels' top 3 for [MASK]:")
    for line in demo["predictions"][:6]:
        if "[MASK] ->" in line:
            line = "-> " + "  ".join(line.split("->", 1)[1].strip().split("  ")[:3])
        print("    " + line.strip())
    comparisons = [summary["finetune"]] + list(summary["other_tasks"].values())
    headline = comparisons[0]
    print(f"\nFine-tuned on the same {headline['train_examples']} labelled sentences; dev "
          "score, mean +- sd over seeds [learning rate, epochs chosen on "
          f"{headline['selection_examples']} held-out training rows]:")
    print(f"  {'':<18}" + "".join(f"{c['task'] + ' ' + _METRIC_NAMES.get(c['metric'], c['metric']):<29}"
                                   for c in comparisons))
    keys = {RELEASED: "released", PRETRAINED: "pretrained", RANDOM_INIT: "random_init"}
    for side in (RELEASED, PRETRAINED, RANDOM_INIT):
        if side == RELEASED and released.get("missing"):
            print(f"  {name:<18}{released['missing']}")
            continue
        cells = []
        for comparison in comparisons:
            values = comparison[keys[side]]
            chosen = values["chosen"]
            cells.append(f"{values['dev_mean']:.3f} +- {values['dev_std']:.3f} "
                         f"[{chosen['learning_rate']:g}, {chosen['epochs']}]")
        print(f"  {rows[side]:<18}" + "".join(f"{cell:<29}" for cell in cells))
    print(f"  {'majority label':<18}" + "".join(f"{c['majority_baseline']:<29.3f}"
                                                for c in comparisons))
    for side in (RELEASED, PRETRAINED):
        if side == RELEASED and released.get("missing"):
            continue
        verdicts = []
        for comparison in comparisons:
            versus = comparison["versus_random_init"][side]
            verdicts.append(f"{versus['margin'] * 100:+.1f} points on {comparison['task']} ("
                            + ("clearly better" if versus["clearly_better"] else
                               "not clearly better") + ")")
        print(f"  {rows[side]} vs random init: " + ", ".join(verdicts))
    print("  (clearly better: at least 3 points and twice the standard error of the difference)")
    grid = headline["grid"]
    print(f"  {rows[PRETRAINED]} and {rows[RANDOM_INIT]}: each chooses from learning rates "
          f"{_listed(grid['learning_rates'])} x epochs {_listed(grid['epochs'])}, then "
          f"{len(headline['seeds'])} seeds")
    if headline["released_options"]:
        other = headline["released_options"]
        print(f"  {name}: the paper's recipe at learning rates {_listed(other['learning_rates'])}"
              f" x epochs {_listed(other['epochs'])}, {len(other['seeds'])} seed(s), no curve")
    pooling = summary["finetune"]["pooling"]
    pooling = POOLING_DESCRIPTIONS.get(pooling, pooling)
    lengths = ", ".join(f"{c['seq_length']} for {c['task']}" for c in comparisons)
    print(f"  Every row: the same sentences, tokens ({lengths}), batch of "
          f"{options.finetune_batch_size}, a classifier on {pooling}")
    print(f"Learning curve, {headline['task']} (dev {headline['metric']}, one seed a point; "
          f"{paths['learning_curve']}):")
    sizes = sorted(int(size) for size in headline["pretrained"]["curve"])
    print(f"  {'labelled':<18}" + " ".join(f"{size:>6}" for size in sizes))
    for side in (PRETRAINED, RANDOM_INIT):
        curve = headline[keys[side]]["curve"]
        print(f"  {rows[side]:<18}" + " ".join(f"{curve[str(size)]:6.3f}" for size in sizes))
    served = summary["served"]
    print(f"\nThe served {served['task']} classifier ({rows[served['side']]}, the best "
          "pre-trained row on dev), reloaded in a fresh process:")
    for line in demo["classifications"]:
        print("  " + line)
    print(f"{summary['seconds']['total']:.0f} s in all; everything is in {paths['root']} "
          f"(figures in {paths['results']})")


def _listed(values):
    return "{" + ", ".join(f"{value:g}" for value in values) + "}"


def _settings(options):
    """The options that decide the results (everything but where they go), as JSON values."""
    values = dataclasses.asdict(options)
    values.pop("work_dir")
    values.pop("start_over")
    return json.loads(json.dumps(values, default=list))


def check_same_settings(options):
    """Refuses to resume a work directory written with other settings: its finished stages
    would be reported as this run's (ValueError naming the settings that differ)."""
    path = options.paths()["options"]
    if not os.path.exists(path):
        return
    with open(path, encoding="utf-8") as f:
        before = json.load(f)
    now = _settings(options)
    details = describe_changes(before, now, "there", "now")
    if details:
        raise ValueError(f"{options.paths()['root']} holds a run with other settings ({details}); "
                         "choose another --work_dir, or pass --start_over to replace that run")


TOOL = "bert_keras_main"


def _entries(options):
    """The names the job writes in its work directory (folders and files)."""
    root = options.paths()["root"]
    return sorted({os.path.relpath(path, root).split(os.sep)[0]
                   for key, path in options.paths().items() if key != "root"})


def check_work_dir(options):
    """Refuses, before any work, a `--work_dir` that is one of the job's inputs, holds one
    where the job writes, or is a model directory (naming both flags)."""
    inputs = [("finetune_data_dir", options.finetune_data_dir)]
    for flag in ("input_files", "heldout_files"):
        try:
            inputs.append((flag, expand_files(getattr(options, flag), flag)))
        except BertKerasError:
            pass  # a finished stage no longer reads them; an unfinished one says so

    if os.path.isdir(options.released_model):
        inputs.append(("released_model", options.released_model))
    root = options.paths()["root"]
    outputs.check_not_over_inputs(root, "work_dir", inputs, writes=_entries(options))
    outputs.check_no_foreign_files(root, "work_dir", TOOL)


def remove_outputs(options):
    """Removes the files the job wrote in its work directory (those its manifest lists,
    `bert_keras.common.outputs`) and nothing else there, for `--start_over`: a file of the
    user's under `model/`, `data/` or `export/` stays. Returns the paths removed."""
    root = options.paths()["root"]
    # A work directory of a job that kept no manifest: its records of finished stages and its
    # own files (the stages then run again over what they left).
    legacy = [os.path.relpath(path, root) for key, path in options.paths().items()
              if key not in ("root", "stages") and os.path.isfile(path)]
    stages = options.paths()["stages"]
    legacy += [os.path.join("stages", name) for name in
               (os.listdir(stages) if os.path.isdir(stages) else []) if name.endswith(".json")]
    return outputs.remove_recorded_outputs(root, TOOL, fallback=legacy)


def run_main_job(options):
    """Runs (or resumes) every stage; writes `results.json`; returns {stage: result}. Holds the
    work directory's lock, and lists what the stages write there in its manifest."""
    check_options(options)
    check_work_dir(options)
    paths = options.paths()
    # The inputs of the stages still to run are read and checked before the work directory is
    # made: bad input leaves nothing a rerun could take for a finished stage.
    _check_stage_inputs(options, paths)
    with outputs.output_lock(paths["root"], flag="--work_dir"), outputs.recording_outputs(paths["root"], TOOL):
        return _run_stages(options, paths)


def _check_stage_inputs(options, paths):
    """The corpus and fine-tuning data of the stages that have not finished (all of them
    with --start_over), checked; raises naming the file."""
    def finished(stage):
        return not options.start_over and os.path.exists(
            os.path.join(paths["stages"], f"{stage}.json"))

    if not finished("data"):
        stages_lib.check_inputs(options)
    if not finished("finetune"):
        stages_lib.check_finetune_inputs(options)


def _run_stages(options, paths):
    if options.start_over and os.path.isdir(paths["root"]):
        removed = remove_outputs(options)
        if removed:
            print(f"--start_over: removed {len(removed)} file(s) the job wrote in "
                  f"{paths['root']} ({', '.join(sorted({name.split('/')[0] for name in removed}))})",
                  flush=True)
    check_same_settings(options)
    os.makedirs(paths["root"], exist_ok=True)
    write_text_atomic(paths["options"], json.dumps(_settings(options), indent=2, sort_keys=True)
                      + "\n")
    stages = stages_lib.Stages(paths["stages"])
    functions = {"vocab": stages_lib.build_vocab_stage, "data": stages_lib.create_data_stage,
                 "pretrain": stages_lib.pretrain_stage, "evaluate": stages_lib.evaluate_stage,
                 "finetune": stages_lib.finetune_stage, "export": stages_lib.export_stage,
                 "demo": demo_stage}
    results = {name: stages.run(name, lambda f=functions[name]: f(options, paths)) for name in STAGES}
    summary = results_summary(results)
    write_text_atomic(paths["results"], json.dumps(summary, indent=2) + "\n")

    _print_story(options, summary, results["demo"], paths)
    return results
