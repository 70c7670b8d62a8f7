"""The masked LM's loss over padded prediction slots, against PyTorch's cross entropy with
Hugging Face's -100 labels (what `BertForPreTraining` computes): the mean over the real
predictions of the batch, whatever the padding."""

import numpy as np
import pytest

from helpers.support import required_module

torch = required_module("torch", 'pip install -e ".[test]"')

from bert_keras.pretraining import losses  # noqa: E402


def test_masked_lm_loss_is_the_mean_over_real_predictions():
    rng = np.random.RandomState(0)
    logits = rng.randn(3, 5, 11).astype("float32") * 3
    ids = rng.randint(0, 11, (3, 5))
    # Mixed numbers of real slots per row (5, 2, 1); padding slots hold id 0, weight 0.
    weights = np.array([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 0, 0, 0, 0]], "float32")
    ids = np.where(weights > 0, ids, 0)
    sums = losses.masked_lm_sums(logits, ids, weights)
    ours = float(sums["masked_lm_loss_sum"]) / float(sums["masked_lm_weight_sum"])
    theirs = torch.nn.functional.cross_entropy(
        torch.from_numpy(logits).reshape(-1, 11),
        torch.from_numpy(np.where(weights > 0, ids, -100)).long().reshape(-1))
    assert ours == pytest.approx(float(theirs), abs=1e-5)
    # Not the mean over every slot, padding included, nor the mean of per-row means.
    assert abs(ours - float(sums["masked_lm_loss_sum"]) / weights.size) > 0.1
