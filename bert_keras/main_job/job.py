"""`run_main_job`: every stage in order (or resumed), then `results.json` and the printout."""

import dataclasses
import json
import os

from bert_keras.common.files import describe_changes, remove_entries, write_text_atomic
from bert_keras.finetuning.task_models import POOLING_DESCRIPTIONS
from bert_keras.main_job import stages as stages_lib
from bert_keras.main_job.demo import demo_stage
from bert_keras.main_job.options import STAGES, check_options
from bert_keras.main_job.stages import PRETRAINED, RANDOM_INIT

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
        "pretrained": sides[PRETRAINED],
        "random_init": sides[RANDOM_INIT],
        "margin": finetuned["margin"],
        "pretraining_clearly_helps": finetuned["pretraining_clearly_helps"],
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
        "seconds": seconds,
    }


def _print_comparison(finetune, pooling, curve=True):
    metric = finetune["metric"]
    sides = {PRETRAINED: finetune["pretrained"], RANDOM_INIT: finetune["random_init"]}
    print(f"\nFine-tuning on {finetune['task']} ({finetune['seq_length']} tokens; the classifier "
          f"reads {POOLING_DESCRIPTIONS.get(pooling, pooling)}): dev {metric} with "
          f"{finetune['train_examples']} labelled examples; each side's learning rate and "
          f"epochs chosen on {finetune['selection_examples']} held-out training examples "
          "(never on dev):")
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
    baseline = ("majority label {:.3f}".format(finetune["dev_majority_share"])
                if metric == "accuracy" else "always the majority label: 0")
    print(f"  pre-trained minus random init: {finetune['margin'] * 100:+.1f} points "
          f"({baseline}): pre-trained is {verdict}")
    if not curve:
        return
    sizes = sorted(int(size) for size in finetune["pretrained"]["curve"])
    print("Learning curve (dev " + metric + ", one seed a point):")
    print(f"  {'labelled':<12} " + " ".join(f"{size:>6}" for size in sizes))
    for side, values in sides.items():
        print(f"  {side:<12} " + " ".join(f"{values['curve'][str(size)]:6.3f}" for size in sizes))


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


def remove_outputs(options):
    """Removes what the job writes in its work directory (nothing else there), for
    `--start_over`; returns the names removed."""
    root = options.paths()["root"]
    return remove_entries(root, sorted({os.path.relpath(path, root).split(os.sep)[0]
                                        for key, path in options.paths().items()
                                        if key != "root"}))


def run_main_job(options):
    """Runs (or resumes) every stage; writes `results.json`; returns {stage: result}."""
    check_options(options)
    paths = options.paths()
    if options.start_over and os.path.isdir(paths["root"]):
        removed = remove_outputs(options)
        if removed:
            print(f"--start_over: removed {', '.join(removed)} from {paths['root']}", flush=True)
    if not os.path.exists(os.path.join(paths["stages"], "data.json")):
        stages_lib.check_inputs(options)
    if not os.path.exists(os.path.join(paths["stages"], "finetune.json")):
        stages_lib.check_finetune_inputs(options)
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
    _print_comparison(summary["finetune"], summary["finetune"]["pooling"])
    for other in summary["other_tasks"].values():
        _print_comparison(other, summary["finetune"]["pooling"], curve=False)
    print(f"Learning curve plot: {paths['learning_curve']}")
    print(f"{summary['seconds']['total']:.0f} s in all; everything is in {paths['root']} "
          f"(figures in {paths['results']})")
    return results
