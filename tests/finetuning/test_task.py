"""`bert_keras.finetuning.task`: the options every task family shares, checked before any
data or model is read."""

import re

import pytest

from bert_keras.finetuning.task import FinetuningOptions, get_task


@pytest.mark.parametrize("setting,message", [
    (dict(learning_rate=-1.0), "--learning_rate must be positive, got -1.0"),
    (dict(learning_rate=0.0), "--learning_rate must be positive, got 0.0"),
    (dict(train_batch_size=0), "--train_batch_size must be at least 1, got 0"),
    (dict(max_seq_length=0), "--max_seq_length must be at least 1, got 0"),
    (dict(doc_stride=-8), "--doc_stride must be at least 1, got -8"),
    (dict(warmup_proportion=1.5), "--warmup_proportion must be in [0, 1], got 1.5"),
    (dict(dropout_rate=1.0), "--dropout_rate must be in [0, 1), got 1.0"),
    (dict(weight_decay=-0.01), "--weight_decay must be at least 0, got -0.01"),
    (dict(max_train_examples=0), "--max_train_examples must be at least 1, got 0"),
])
def test_settings_out_of_range_are_refused_before_reading_anything(setting, message, tmp_path):
    options = FinetuningOptions(**setting)
    with pytest.raises(ValueError) as raised:
        options.validate()
    assert str(raised.value) == message
    # The task refuses them before it looks at the (missing) model directory.
    with pytest.raises(ValueError, match=re.escape(message)):
        get_task("glue/sst2", str(tmp_path), str(tmp_path / "no_model"), options)


def test_the_defaults_and_the_edges_pass():
    FinetuningOptions().validate()
    FinetuningOptions(learning_rate=1e-5, warmup_proportion=1.0, dropout_rate=0.0,
                      weight_decay=0.0, train_batch_size=1).validate()
