"""The main job's learning curve (`learning_curve.png`): each side's dev score against the
number of labelled examples, with the score of always answering the majority label drawn in the
metric's own terms.
"""

from bert_keras.common.files import atomic_path


def majority_baseline(metric, majority_share):
    """The dev score of always answering the majority label, in `metric`'s terms, or None for a
    metric where a constant answer has no score.

    Accuracy is the majority share; a constant answer has no correlation with the labels, so
    its Matthews correlation is 0 (scikit-learn's convention for the undefined 0/0).

    >>> majority_baseline("accuracy", 0.69), majority_baseline("matthews_corrcoef", 0.69)
    (0.69, 0.0)
    """
    if majority_share is None:
        return None
    return {"accuracy": majority_share, "matthews_corrcoef": 0.0}.get(metric)


def plot_learning_curve(result, path, title=None, names=None):
    """Writes the learning curve of a comparison (`finetuning.transfer.compare_initializations`'
    result, sides possibly added) as a PNG: a line per side over its curve's sizes (a side with
    the headline size only is a point), the headline's spread over seeds as an error bar, and
    the majority label's score (`majority_baseline`). `names`: {side: label} for the legend.
    Returns the baseline drawn (None when there is none)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel

    names = names or {}
    figure, axes = plt.subplots(figsize=(5.5, 3.8), dpi=120)
    n = result["options"]["num_train_examples"]
    for side, values in result["sides"].items():
        sizes = sorted(int(size) for size in values["curve"])
        line, = axes.plot(sizes, [values["curve"][str(size)] for size in sizes], marker="o",
                          label=names.get(side, side))
        axes.errorbar([n], [values["dev_mean"]], yerr=[values["dev_std"]], fmt="none",
                      capsize=4, color=line.get_color())
    baseline = majority_baseline(result["metric"], result.get("majority_share"))
    if baseline is not None:
        axes.axhline(baseline, color="grey", linestyle=":", label="always the majority label")
    axes.set_xscale("log")
    axes.set_xlabel("labelled training examples")
    axes.set_ylabel(f"dev {result['metric']}")
    axes.set_title(title or result["task"], fontsize=9)
    axes.legend(fontsize=8)
    axes.grid(alpha=0.3)
    figure.tight_layout()
    with atomic_path(path, ".png") as temporary:
        figure.savefig(temporary)
    plt.close(figure)
    return baseline


__all__ = ["majority_baseline", "plot_learning_curve"]
