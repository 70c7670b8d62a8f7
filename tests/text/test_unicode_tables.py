"""The per-codepoint normalization tables against the reference statement of the algorithm."""

import os
import random
import unicodedata

import numpy as np
import pytest

from bert_keras.text import unicode_tables as ut
from helpers.reference_tokenization import basic_tokenize


def _table_words(tables, codepoints):
    text = "".join(chr(out) for cp in codepoints for out in tables.lookup(cp))
    return text.split()


@pytest.mark.parametrize("lower_case", [True, False])
def test_every_codepoint_between_letters(lower_case):
    """Each codepoint between two letters splits (or not) exactly as the reference says."""
    tables = ut.normalization_tables(lower_case)
    a, b = (ord("a"), ord("b"))
    rng = random.Random(0)
    unassigned = [cp for cp in range(ut.MAX_CODEPOINT + 1)
                  if unicodedata.category(chr(cp)) in ("Cn", "Co")]
    codepoints = list(ut.assigned_codepoints()) + rng.sample(unassigned, 2000)
    mismatches = []
    for cp in codepoints:
        if cp == ut.GREEK_CAPITAL_SIGMA:
            continue  # the table keeps it for the context fix-up, tested in test_tokenizer
        expected = basic_tokenize("a" + chr(cp) + "b", lower_case)
        if _table_words(tables, [a, cp, b]) != expected:
            mismatches.append(hex(cp))
    assert not mismatches, mismatches[:20]


def test_unassigned_and_private_use_are_kept():
    # The original removes only Cc and Cf (plus NUL and U+FFFD), not every C* category.
    tables = ut.normalization_tables(True)
    for cp in (0x378, 0xE000, 0xF0000, 0x10FFFD, 0x6DDEB):
        assert tables.lookup(cp) == [cp]
    for cp in (0x0, 0x7, 0x200B, 0x200D, 0xFEFF, 0xAD, 0xFFFD):
        assert tables.lookup(cp) == []


def test_context_codepoints_have_rows_of_their_own():
    tables = ut.normalization_tables(True)
    rows = tables.block_rows[tables.block_index[tables.context_codepoints >> ut.BLOCK_BITS]
                             * ut.BLOCK_SIZE + (tables.context_codepoints & (ut.BLOCK_SIZE - 1))]
    assert (rows >= tables.first_context_row).all()
    assert len(set(rows.tolist())) == len(rows)
    # Nothing else can reach those rows, and only sigma's own row outputs a capital sigma.
    assert (tables.block_rows < tables.first_context_row).sum() == (
        tables.block_rows.size - np.isin(tables.block_rows, rows).sum())
    assert ut.GREEK_CAPITAL_SIGMA not in tables.rows[:tables.first_context_row]
    assert tables.lookup(ut.GREEK_CAPITAL_SIGMA) == [ut.GREEK_CAPITAL_SIGMA]


def test_case_classes_follow_str_lower():
    tables = ut.normalization_tables(True)

    def table_class(cp):
        index = np.searchsorted(tables.case_class_starts, cp, side="right") - 1
        return tables.case_class_values[index]

    # Hand-checked members of each class.
    assert table_class(ord("A")) == ut.CASE_CASED
    assert table_class(ord("\u03c3")) == ut.CASE_CASED
    assert table_class(ord("'")) == ut.CASE_IGNORABLE          # Word_Break Single_Quote
    assert table_class(ord(".")) == ut.CASE_IGNORABLE          # MidNumLet
    assert table_class(0x0301) == ut.CASE_IGNORABLE            # combining acute (Mn)
    assert table_class(0x200B) == ut.CASE_IGNORABLE            # removed before lower()
    assert table_class(ord(" ")) == ut.CASE_OTHER
    assert table_class(ord("1")) == ut.CASE_OTHER
    assert table_class(0x4E2D) == ut.CASE_OTHER                # CJK ideograph
    assert table_class(0x378) == ut.CASE_OTHER                 # unassigned
    # Word boundaries of the original (whitespace, CJK) must stop the sigma context.
    for cp in ut.assigned_codepoints():
        char = chr(cp)
        if (ut.is_whitespace(char) or char.isspace() or ut.is_cjk_codepoint(cp)) \
                and not ut.is_removed(char):
            assert table_class(cp) == ut.CASE_OTHER, hex(cp)


def test_reorder_data():
    tables = ut.normalization_tables(True)
    assert len(tables.mc_nonstarters) == len(tables.mc_combining_classes) > 0
    for cp, ccc in zip(tables.mc_nonstarters, tables.mc_combining_classes):
        assert unicodedata.category(chr(cp)) == "Mc" and unicodedata.combining(chr(cp)) == ccc
    assert 0x034F in tables.reorder_blockers  # COMBINING GRAPHEME JOINER
    assert 0x0301 not in tables.reorder_blockers


def test_tables_stay_small():
    # They are embedded as constants in every exported preprocessor.
    assert ut.normalization_tables(True).nbytes < 600_000
    assert ut.normalization_tables(False).nbytes < 300_000
    assert ut.normalization_tables(True).width == 3


def _assert_same_tables(a, b):
    import dataclasses

    for field in dataclasses.fields(a):
        np.testing.assert_array_equal(getattr(a, field.name), getattr(b, field.name),
                                      err_msg=field.name)


@pytest.mark.parametrize("lower_case", [True, False], ids=["uncased", "cased"])
def test_stored_tables_equal_the_computed_ones(lower_case, tmp_path, monkeypatch):
    """The package's precomputed tables (when of this Python's Unicode version) and the user
    cache hold exactly what `compute_normalization_tables` gives."""
    computed = ut.compute_normalization_tables(lower_case)
    shipped = os.path.join(ut.TABLES_DIR, ut.tables_file_name(lower_case))
    if os.path.exists(shipped):
        _assert_same_tables(ut.load_tables(shipped), computed)
    # Another Unicode version: computed once, then read from the cache.
    monkeypatch.setenv("BERT_KERAS_CACHE", str(tmp_path))
    monkeypatch.setattr(ut, "TABLES_DIR", str(tmp_path / "no-package-tables"))
    ut.normalization_tables.cache_clear()
    try:
        _assert_same_tables(ut.normalization_tables(lower_case), computed)
        cached = tmp_path / ut.tables_file_name(lower_case)
        assert cached.exists()
        _assert_same_tables(ut.load_tables(str(cached)), computed)
    finally:
        ut.normalization_tables.cache_clear()


def test_tables_are_shipped_for_the_unicode_version_of_ci():
    # CI runs Python 3.11 (Unicode 14.0.0); other versions compute and cache their own.
    if unicodedata.unidata_version != "14.0.0":
        pytest.skip(f"Unicode {unicodedata.unidata_version}: the tables are computed and cached")
    for lower_case in (True, False):
        assert os.path.exists(os.path.join(ut.TABLES_DIR, ut.tables_file_name(lower_case)))
