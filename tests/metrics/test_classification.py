"""GLUE metrics on hand-worked examples (the expected values are worked out in the comments)."""

import math

import numpy as np
import pytest

from bert_keras.metrics import classification as cm

LABELS = [1, 1, 1, 0, 0]
PREDS = [1, 0, 1, 1, 0]
# Position by position: TP, FN, TP, FP, TN  ->  TP=2, FN=1, FP=1, TN=1.


def test_accuracy():
    # Equal at positions 0, 2, 4: 3 / 5.
    assert cm.accuracy(PREDS, LABELS) == pytest.approx(0.6)


def test_f1():
    # P = TP / (TP + FP) = 2/3, R = TP / (TP + FN) = 2/3, F1 = 2PR / (P + R) = 2/3.
    assert cm.f1_score(PREDS, LABELS) == pytest.approx(2 / 3)
    # Positive class 0: TP=1 (pos 4), FP=1 (pos 1), FN=1 (pos 3) -> P = R = F1 = 1/2.
    assert cm.f1_score(PREDS, LABELS, positive_label=0) == pytest.approx(0.5)
    # P = 3/4 (one false positive), R = 1 -> F1 = 2 * 0.75 / 1.75 = 6/7.
    assert cm.f1_score([1, 1, 1, 1], [1, 1, 1, 0]) == pytest.approx(6 / 7)


def test_f1_without_true_positives_is_zero():
    assert cm.f1_score([0, 0, 0], [1, 0, 1]) == 0.0
    assert cm.f1_score([0, 0], [0, 0]) == 0.0


def test_matthews_binary():
    # (TP*TN - FP*FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)) = (2*1 - 1*1) / sqrt(3*3*2*2) = 1/6.
    assert cm.matthews_corrcoef(PREDS, LABELS) == pytest.approx(1 / 6)
    assert cm.matthews_corrcoef([0, 1, 1, 0], [0, 1, 1, 0]) == pytest.approx(1.0)
    assert cm.matthews_corrcoef([1, 0, 0, 1], [0, 1, 1, 0]) == pytest.approx(-1.0)


def test_matthews_undefined_is_zero():
    # All predictions in one class: (TP+FP)(TN+FN) has a zero factor.
    assert cm.matthews_corrcoef([1, 1, 1, 1], [1, 0, 1, 0]) == 0.0
    assert cm.matthews_corrcoef([1, 0, 1, 0], [1, 1, 1, 1]) == 0.0


def test_matthews_multiclass():
    # labels 0,0,1,2; predictions 0,1,1,2. Correct c = 3, samples s = 4,
    # true counts t = (2, 1, 1), predicted counts p = (1, 2, 1).
    # (c*s - t.p) / sqrt((s^2 - p.p)(s^2 - t.t)) = (12 - 5) / sqrt((16 - 6)(16 - 6)) = 0.7.
    assert cm.matthews_corrcoef([0, 1, 1, 2], [0, 0, 1, 2]) == pytest.approx(0.7)


def test_matthews_accepts_string_labels():
    assert cm.matthews_corrcoef(["1", "0", "1", "1", "0"], ["1", "1", "1", "0", "0"]) == \
        pytest.approx(1 / 6)


def test_pearson():
    # x = 1,2,3,4 (mean 2.5, deviations -1.5,-.5,.5,1.5; squares sum 5)
    # y = 2,4,5,9 (mean 5, deviations -3,-1,0,4; squares sum 26)
    # cross sum 4.5 + .5 + 0 + 6 = 11  ->  r = 11 / sqrt(5 * 26) = 11 / sqrt(130) = 0.9647638...
    assert cm.pearson_corrcoef([1, 2, 3, 4], [2, 4, 5, 9]) == pytest.approx(0.9647638, abs=1e-7)


def test_rankdata_averages_ties():
    # Sorted: 1 (rank 1), 2 (rank 2), 3, 3, 3 (ranks 3, 4, 5 -> average 4).
    np.testing.assert_array_equal(cm.rankdata([3, 1, 3, 3, 2]), [4, 1, 4, 4, 2])


def test_spearman_with_ties():
    # Ranks of x = 1,2,2,3: 1, 2.5, 2.5, 4; ranks of y = 10,20,30,40: 1,2,3,4.
    # Deviations from 2.5: (-1.5, 0, 0, 1.5) and (-1.5, -.5, .5, 1.5).
    # cross = 2.25 + 2.25 = 4.5; squares 4.5 and 5  ->  rho = 4.5 / sqrt(22.5) = sqrt(0.9).
    assert cm.spearman_corrcoef([1, 2, 2, 3], [10, 20, 30, 40]) == pytest.approx(math.sqrt(0.9))


def test_spearman_is_one_for_any_increasing_relation():
    # Ranks 1,2,3 on both sides although y = x^3 is not linear in x.
    assert cm.spearman_corrcoef([1, 2, 3], [1, 8, 27]) == pytest.approx(1.0)
    assert cm.pearson_corrcoef([1, 2, 3], [1, 8, 27]) < 1.0


def test_correlation_of_a_constant_is_nan():
    assert math.isnan(cm.pearson_corrcoef([1, 1, 1], [1, 2, 3]))
    assert math.isnan(cm.spearman_corrcoef([1, 2, 3], [5, 5, 5]))


def test_bad_shapes_raise_clear_errors():
    with pytest.raises(ValueError, match="3 predictions but 2 labels"):
        cm.accuracy([1, 0, 1], [1, 0])
    with pytest.raises(ValueError, match="no predictions"):
        cm.accuracy([], [])
    with pytest.raises(ValueError, match="1-D"):
        cm.accuracy([[1, 0]], [[1, 0]])
