import doctest

import pytest

from bert_keras.pretraining import options as options_module
from bert_keras.pretraining.options import PretrainingOptions

VALID = dict(input_files="data/*.tfrecord", output_dir="out", config="tiny", vocab_file="v.txt",
             num_train_steps=10, num_warmup_steps=1)


def test_docstring_examples():
    assert doctest.testmod(options_module).failed == 0


@pytest.mark.parametrize("field,value,message", [
    ("learning_rate", -1.0, "learning_rate must be positive"),
    ("learning_rate", 0.0, "learning_rate must be positive"),
    ("weight_decay", -0.01, "weight_decay must be >= 0"),
    ("clip_norm", -1.0, "clip_norm must be >= 0"),
    ("adam_epsilon", 0.0, "adam_epsilon must be positive"),
    ("num_warmup_steps", 11, "num_warmup_steps"),
    ("masked_lm_prob", 1.0, "masked_lm_prob"),
])
def test_settings_that_would_train_on_nonsense_are_refused(field, value, message):
    """e.g. a negative learning rate trains uphill; it must stop before anything is written."""
    PretrainingOptions(**VALID).validate()
    with pytest.raises(ValueError, match=message):
        PretrainingOptions(**dict(VALID, **{field: value})).validate()


@pytest.mark.parametrize("fused", [False, True])
def test_fused_attention_trains_without_attention_dropout_and_says_so(tmp_path, fused):
    from bert_keras.pretraining.output_dir import resolve_model_setup
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]) + "\n")
    options = PretrainingOptions(**dict(VALID, vocab_file=str(vocab), output_dir=str(tmp_path / "o"),
                                        fused_attention=fused))
    config = resolve_model_setup(options).config
    assert options.attention_implementation == ("fused" if fused else "softmax")
    assert config.attention_probs_dropout_prob == (0.0 if fused else 0.1)
    assert config.hidden_dropout_prob == 0.1
