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


# The paper's fine-tuning settings (Devlin et al., 2019, Section 4 and Appendix A.3):
# (learning rate, batch size, epochs, max_seq_length) where the options leave them None.
@pytest.mark.parametrize("name,expected", [
    ("glue/mrpc", (2e-5, 32, 3, 128)),
    ("squad_v1", (5e-5, 32, 3, 384)),
    ("squad_v2", (5e-5, 48, 2, 384)),
    ("swag", (2e-5, 16, 3, 128)),
    ("conll2003", (5e-5, 32, 3, 128)),
])
def test_each_family_applies_the_papers_defaults(name, expected, tmp_path):
    from bert_keras.model.config import BertConfig
    from bert_keras.modeldir.model_dir import write_model_dir
    from bert_keras.text.vocab import Vocabulary

    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good"]
    model = str(tmp_path / "model")
    write_model_dir(model, BertConfig.from_preset("tiny", vocab_size=len(tokens)),
                    Vocabulary(tokens), True)
    options = get_task(name, str(tmp_path), model).options
    assert (options.learning_rate, options.train_batch_size, options.num_train_epochs,
            options.max_seq_length) == expected
    # What is given is kept.
    assert get_task(name, str(tmp_path), model,
                    FinetuningOptions(train_batch_size=7)).options.train_batch_size == 7
