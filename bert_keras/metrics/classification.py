"""Classification and regression metrics of the GLUE benchmark, in NumPy.

All functions take 1-D array-likes of equal length and return a Python float in the natural
range of the metric (accuracy and F1 in [0, 1], correlations in [-1, 1]); multiply by 100 for
the numbers printed in the BERT paper.

- `accuracy`: fraction of exact matches.
- `f1_score`: binary F1 of the positive class (MRPC, QQP).
- `matthews_corrcoef`: Matthews correlation coefficient (CoLA); multi-class form of Gorodkin
  (2004), which equals (TP*TN - FP*FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)) for two classes;
  0 when the denominator is 0 (all predictions or all labels in one class).
- `pearson_corrcoef`, `spearman_corrcoef`: STS-B; Spearman is the Pearson correlation of the
  ranks, tied values getting the average of the ranks they span. NaN when one side is constant.
"""

import numpy as np


def _pair(predictions, labels):
    predictions = np.asarray(predictions)
    labels = np.asarray(labels)
    if predictions.ndim != 1 or labels.ndim != 1:
        raise ValueError(f"expected 1-D predictions and labels, got shapes {predictions.shape} "
                         f"and {labels.shape}")
    if predictions.shape != labels.shape:
        raise ValueError(f"{len(predictions)} predictions but {len(labels)} labels")
    if predictions.size == 0:
        raise ValueError("no predictions to score")
    return predictions, labels


def accuracy(predictions, labels):
    """Fraction of predictions equal to the label."""
    predictions, labels = _pair(predictions, labels)
    return float(np.mean(predictions == labels))


def f1_score(predictions, labels, positive_label=1):
    """F1 = 2PR/(P+R) of `positive_label`; 0.0 when there are no true positives."""
    predictions, labels = _pair(predictions, labels)
    predicted = predictions == positive_label
    actual = labels == positive_label
    true_positives = int(np.sum(predicted & actual))
    if true_positives == 0:
        return 0.0
    precision = true_positives / int(np.sum(predicted))
    recall = true_positives / int(np.sum(actual))
    return float(2 * precision * recall / (precision + recall))


def matthews_corrcoef(predictions, labels):
    """Matthews correlation coefficient (multi-class form); 0.0 when undefined."""
    predictions, labels = _pair(predictions, labels)
    classes, encoded = np.unique(np.concatenate([labels, predictions]), return_inverse=True)
    n = len(labels)
    label_ids, prediction_ids = encoded[:n], encoded[n:]
    k = len(classes)
    confusion = np.zeros((k, k), np.float64)
    np.add.at(confusion, (label_ids, prediction_ids), 1.0)
    true_per_class = confusion.sum(axis=1)
    predicted_per_class = confusion.sum(axis=0)
    correct = np.trace(confusion)
    samples = confusion.sum()
    covariance_yp = correct * samples - np.dot(true_per_class, predicted_per_class)
    covariance_pp = samples ** 2 - np.dot(predicted_per_class, predicted_per_class)
    covariance_yy = samples ** 2 - np.dot(true_per_class, true_per_class)
    denominator = covariance_pp * covariance_yy
    if denominator == 0:
        return 0.0
    return float(covariance_yp / np.sqrt(denominator))


def pearson_corrcoef(predictions, labels):
    """Pearson correlation; NaN when either side has zero variance."""
    predictions, labels = _pair(predictions, labels)
    x = predictions.astype(np.float64) - np.mean(predictions, dtype=np.float64)
    y = labels.astype(np.float64) - np.mean(labels, dtype=np.float64)
    denominator = np.sqrt(np.dot(x, x) * np.dot(y, y))
    if denominator == 0:
        return float("nan")
    return float(np.clip(np.dot(x, y) / denominator, -1.0, 1.0))


def rankdata(values):
    """1-based ranks; tied values all get the average of the ranks they occupy."""
    values = np.asarray(values)
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    ranks = np.empty(len(values), np.float64)
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        # Positions start..end (0-based) hold ranks start+1..end+1; their mean:
        ranks[order[start:end + 1]] = (start + end + 2) / 2.0
        start = end + 1
    return ranks


def spearman_corrcoef(predictions, labels):
    """Spearman rank correlation with average ranks for ties; NaN when a side is constant."""
    predictions, labels = _pair(predictions, labels)
    return pearson_corrcoef(rankdata(predictions), rankdata(labels))
