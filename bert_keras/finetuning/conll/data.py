"""CoNLL-2003 NER: the official column files and first-wordpiece token classification features.

Files (`eng.train`, `eng.testa` = dev, `eng.testb` = test, as the shared task released them; or
the other common layout, `train.txt`, `dev.txt` (or `valid.txt`), `test.txt`; one layout per
folder): one token per line, four
space-separated columns `WORD POS CHUNK NER`, a blank line between sentences, `-DOCSTART- -X- -X-
O` lines between documents. Tags are IOB1 in the original files (IOB2 files read the same way).

Features: each word is split into wordpieces by `tokenize_word(word) -> list[int]`; the word's
label id goes on its first wordpiece and `IGNORE_LABEL_ID` (-100) on the others, on [CLS],
[SEP] and on padding (weight 0 in the loss). A sentence longer than max_seq_length - 2
wordpieces is cut into consecutive pieces of whole words, one feature each, so every word is
predicted once; `predictions_to_tags` puts the per-word predictions back together, and
`bert_keras.metrics.conll_eval.evaluate` scores them entity by entity.

Example:

>>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "john", "lives", "in", "new", "york"]
>>> sentence = Sentence(["John", "lives", "in", "New", "York"],
...                     ["B-PER", "O", "O", "B-LOC", "I-LOC"])
>>> tokenize_word = lambda word: [vocab.index(word.lower())]  # a WordTokenizer in real use
>>> features = create_conll_features([sentence], tokenize_word, vocab,
...                                  label_list=CONLL2003_LABELS, max_seq_length=8)
>>> features[0].label_ids
[-100, 1, 0, 0, 5, 6, -100, -100]
"""

import dataclasses

import numpy as np

from bert_keras.finetuning.tasks.common import IGNORE_LABEL_ID, DataFormatError, check_file, read_text_lines
from bert_keras.finetuning.tasks.words import as_vocabulary

# The tags of the CoNLL-2003 English NER data (IOB1 and IOB2 use the same set).
CONLL2003_LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")
# The file names of each split, in the order they are looked for: the shared task's, then the
# other common layout.
SPLIT_FILES = {"train": ("eng.train", "train.txt"), "dev": ("eng.testa", "dev.txt", "valid.txt"),
               "test": ("eng.testb", "test.txt")}
DOCSTART = "-DOCSTART-"


@dataclasses.dataclass
class Sentence:
    """One sentence: its words and their NER tags; `document` counts -DOCSTART- lines seen."""

    words: list
    tags: list
    document: int = 0
    line: int = 0


def read_conll_file(path, label_list=CONLL2003_LABELS, num_columns=4, tag_column=-1):
    """The sentences of a CoNLL column file.

    Every non-blank line needs `num_columns` whitespace-separated fields (None: any number, at
    least 2); the tag (field `tag_column`) must be in `label_list` (None: any tag).
    """
    path = check_file(path, "CoNLL file")
    labels = None if label_list is None else set(label_list)
    sentences = []
    words, tags = [], []
    document = 0
    first_line = 0

    def flush():
        if words:
            sentences.append(Sentence(list(words), list(tags), document, first_line))
            words.clear()
            tags.clear()

    for line_number, line in read_text_lines(path):
        fields = line.split()
        if not fields:
            flush()
            continue
        if fields[0] == DOCSTART:
            flush()
            document += 1
            continue
        if (num_columns is not None and len(fields) != num_columns) or len(fields) < 2:
            expected = num_columns if num_columns is not None else "at least 2"
            raise DataFormatError(f"{path}: line {line_number}: expected {expected} "
                                  f"space-separated columns (WORD POS CHUNK NER), found "
                                  f"{len(fields)}")
        tag = fields[tag_column]
        if labels is not None and tag not in labels:
            raise DataFormatError(f"{path}: line {line_number}: tag {tag!r} is not one of "
                                  f"{sorted(labels)}")
        if not words:
            first_line = line_number
        words.append(fields[0])
        tags.append(tag)
    flush()
    return sentences


def split_path(data_dir, split):
    """The file of one split in `data_dir` (`SPLIT_FILES`), or None when it has none.

    DataFormatError when the folder holds two candidates for the split (e.g. `eng.testa` and
    `dev.txt`): which one was meant cannot be told.
    """
    import os  # pylint: disable=import-outside-toplevel

    if split not in SPLIT_FILES:
        raise ValueError(f"unknown CoNLL-2003 split {split!r}; use one of {list(SPLIT_FILES)}")
    candidates = [os.path.join(os.fspath(data_dir), name) for name in SPLIT_FILES[split]]
    found = [path for path in candidates if os.path.isfile(path)]
    if len(found) > 1:
        raise DataFormatError(f"CoNLL-2003 {split} split: {' and '.join(found)} are both there; "
                              "keep one of them in the folder")
    return found[0] if found else None


def read_conll_split(data_dir, split, **kwargs):
    """`read_conll_file` on the split's file in data_dir: eng.train or train.txt, eng.testa or
    dev.txt / valid.txt (dev), eng.testb or test.txt (test)."""
    path = split_path(data_dir, split)
    if path is None:
        import os  # pylint: disable=import-outside-toplevel

        names = " or ".join(SPLIT_FILES[split])
        raise DataFormatError(f"CoNLL-2003 {split} split not found: no {names} in "
                              f"{os.fspath(data_dir)}")
    return read_conll_file(path, **kwargs)


@dataclasses.dataclass
class ConllFeature:
    """One encoder input; `word_ids[i]` is the index in the sentence of the word whose first
    wordpiece is at position i (-1 elsewhere)."""

    sentence_index: int
    input_ids: list
    input_mask: list
    segment_ids: list
    label_ids: list
    word_ids: list


def create_conll_features(sentences, tokenize_word, vocab, label_list=CONLL2003_LABELS,
                          max_seq_length=128):
    """Features of all sentences, in order (see the module docstring)."""
    if max_seq_length < 3:
        raise ValueError(f"max_seq_length must be at least 3, got {max_seq_length}")
    vocab = as_vocabulary(vocab)
    cls_id = vocab.token_to_id["[CLS]"]
    sep_id = vocab.token_to_id["[SEP]"]
    pad_id = vocab.token_to_id["[PAD]"]
    unk_id = vocab.token_to_id["[UNK]"]
    label_to_id = {label: i for i, label in enumerate(label_list)}
    budget = max_seq_length - 2
    cache = {}
    features = []
    for sentence_index, sentence in enumerate(sentences):
        pieces = []
        for word in sentence.words:
            ids = cache.get(word)
            if ids is None:
                # A word made only of characters the tokenizer drops still needs a position.
                ids = [int(i) for i in tokenize_word(word)] or [unk_id]
                cache[word] = ids
            pieces.append(ids[:budget])
        word_index = 0
        while word_index < len(sentence.words) or (word_index == 0 and not sentence.words):
            ids, labels, word_ids = [cls_id], [IGNORE_LABEL_ID], [-1]
            while (word_index < len(sentence.words)
                   and len(ids) - 1 + len(pieces[word_index]) <= budget):
                tag = sentence.tags[word_index] if sentence.tags else None
                if tag is not None and tag not in label_to_id:
                    raise ValueError(f"sentence {sentence_index}: tag {tag!r} is not in the "
                                     "label list")
                for k, piece in enumerate(pieces[word_index]):
                    ids.append(piece)
                    first = k == 0
                    labels.append(label_to_id[tag] if first and tag is not None
                                  else IGNORE_LABEL_ID)
                    word_ids.append(word_index if first else -1)
                word_index += 1
            ids.append(sep_id)
            labels.append(IGNORE_LABEL_ID)
            word_ids.append(-1)
            padding = max_seq_length - len(ids)
            features.append(ConllFeature(
                sentence_index=sentence_index, input_ids=ids + [pad_id] * padding,
                input_mask=[1] * len(ids) + [0] * padding, segment_ids=[0] * max_seq_length,
                label_ids=labels + [IGNORE_LABEL_ID] * padding,
                word_ids=word_ids + [-1] * padding))
            if not sentence.words:
                break
    return features


def features_to_arrays(features):
    """input_word_ids, input_mask, input_type_ids, label_ids, label_weights (1.0 on labelled
    positions), word_ids, sentence_index as NumPy arrays ([num_features, max_seq_length] or
    [num_features])."""
    if not features:
        raise ValueError("no CoNLL features to convert")
    label_ids = np.asarray([f.label_ids for f in features], np.int32)
    return {
        "input_word_ids": np.asarray([f.input_ids for f in features], np.int32),
        "input_mask": np.asarray([f.input_mask for f in features], np.int32),
        "input_type_ids": np.asarray([f.segment_ids for f in features], np.int32),
        "label_ids": label_ids,
        "label_weights": (label_ids != IGNORE_LABEL_ID).astype(np.float32),
        "word_ids": np.asarray([f.word_ids for f in features], np.int32),
        "sentence_index": np.asarray([f.sentence_index for f in features], np.int32),
    }


def predictions_to_tags(features, predicted_ids, sentences, label_list=CONLL2003_LABELS):
    """Per-sentence predicted tag lists from per-position label ids [num_features, seq_len]
    (the argmax of the logits), read at the first wordpiece of each word."""
    predicted_ids = np.asarray(predicted_ids)
    if predicted_ids.ndim != 2 or len(predicted_ids) != len(features):
        raise ValueError(f"expected predicted ids of shape [{len(features)}, max_seq_length], "
                         f"got {predicted_ids.shape}")
    tags = [[None] * len(s.words) for s in sentences]
    for feature, row in zip(features, predicted_ids):
        for position, word_index in enumerate(feature.word_ids):
            if word_index >= 0:
                tags[feature.sentence_index][word_index] = label_list[int(row[position])]
    for index, sentence_tags in enumerate(tags):
        if any(tag is None for tag in sentence_tags):
            raise ValueError(f"sentence {index}: some words have no prediction; were the "
                             "features made from these sentences?")
    return tags
