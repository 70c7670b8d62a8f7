import doctest

import pytest

from bert_keras.finetuning import catalog
from bert_keras.finetuning.task import get_task
from bert_keras.model.config import BertConfig
from bert_keras.modeldir.model_dir import write_model_dir
from bert_keras.text.vocab import Vocabulary


def test_docstring_examples():
    assert doctest.testmod(catalog).failed == 0


@pytest.mark.parametrize("name,expected", [
    ("glue/MRPC", ("glue/mrpc", "glue", "mrpc")),
    (" glue/sts-b", ("glue/stsb", "glue", "stsb")),
    ("squad_v1", ("squad_v1", "squad", None)),
    ("SWAG", ("swag", "swag", None)),
    ("conll", ("conll2003", "conll", None)),
])
def test_every_family_parses_to_one_canonical_name(name, expected):
    task = catalog.parse_task_name(name)
    assert (task.name, task.family, task.glue_task) == expected
    assert task.family in catalog.FAMILIES


@pytest.mark.parametrize("name", ["glue/", "glue/sst5", "squad", "mnli", ""])
def test_unknown_names_list_the_known_ones(name):
    with pytest.raises(ValueError, match="unknown (GLUE )?task"):
        catalog.parse_task_name(name)


def test_pair_tasks():
    assert catalog.is_pair_task("glue/mrpc") and not catalog.is_pair_task("glue/sst2")
    assert not catalog.is_pair_task("squad_v2")


def test_get_task_builds_the_family_of_the_canonical_name(tmp_path):
    """`get_task` reads names through the catalog only: one spelling in, the canonical one in
    the task (and so in every task_config.json it writes)."""
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good"]
    model = str(tmp_path / "model")
    write_model_dir(model, BertConfig.from_preset("tiny", vocab_size=len(tokens)),
                    Vocabulary(tokens), True)
    assert get_task("glue/SST-2", str(tmp_path), model).name == "glue/sst2"
    assert get_task("conll", str(tmp_path), model).name == "conll2003"
    with pytest.raises(ValueError, match="unknown task 'glue2/sst2'"):
        get_task("glue2/sst2", str(tmp_path), model)
