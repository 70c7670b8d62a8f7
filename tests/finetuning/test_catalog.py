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
    from bert_keras.finetuning.glue.data import is_pair_task

    assert is_pair_task({"task": "glue/mrpc"}) and not is_pair_task({"task": "glue/sst2"})
    assert not is_pair_task({"task": "squad_v2"})
    assert is_pair_task({"task": "glue/sst2", "text_pair": True})  # the recorded field first


def test_a_head_leads_to_the_family_that_declares_it():
    """A task_config.json's "head" leads to the family that declares it first; a family that
    reuses another's head declares the same head, serving and lite mapping."""
    kinds = {kind for family in catalog.FAMILIES.values() for kind in family.head_kinds}
    for family in catalog.FAMILIES.values():  # a head reused by another family is served alike
        for head in family.heads:
            first = catalog.family_of_head(head.kind)
            assert catalog.head(head.kind) is head
            assert family.serving.get(head.kind) is first.serving.get(head.kind)
            assert family.lite.get(head.kind) is first.lite.get(head.kind)
    assert catalog.family_of_head("span").name == "squad"
    assert catalog.family_of_head("feature_based_bilstm").name == "conll"
    assert set(catalog.served_heads()) == set(kinds)
    assert catalog.lite_heads() == ("classification", "regression")
    with pytest.raises(ValueError, match="unknown head 'spam'; known: classification"):
        catalog.head("spam")


def test_a_family_task_says_its_family():
    for name, family in catalog.FAMILIES.items():
        assert family.task.family == name


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
