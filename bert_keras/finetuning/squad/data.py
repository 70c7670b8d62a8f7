"""SQuAD v1.1 / v2.0: the official JSON reader and the windowed feature creation of BERT.

Reading (`read_squad`) follows the original BERT `run_squad.py`: each context is split into
whitespace-separated words (`doc_tokens`, whitespace being space, tab, CR, LF and U+202F) with a
map from every character to the index of its word, and a training answer becomes the word span
covering its characters. A training answer that does not fit its context (answer_start outside
the context, `context[answer_start:answer_start + len(text)] != text`, or the answer's words not
found in the covering words as the original checks) is logged, counted in
`SquadData.skipped`, and left out of training; evaluation keeps every question.

Features (`create_squad_features`) follow the original `convert_examples_to_features`:
[CLS] question [SEP] document-window [SEP], the question cut to `max_query_length` wordpieces,
windows over the document wordpieces `doc_stride` apart, each token scored for the window where
it has the most context (min(left, right) + 0.01 * window length), training positions on the
tightest wordpiece span matching the answer and on [CLS] (0) for unanswerable questions and for
windows that do not contain the whole answer.

Wordpieces come from a `tokenize_word(word) -> list[int]` callable (see
`bert_keras.finetuning.tasks.words`) plus the vocabulary, so the logic works with any tokenizer.

Example:

>>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "who", "is", "it", "?", "bob", "."]
>>> def tokenizer(word):  # a WordTokenizer in real use
...     return [vocab.index(piece) for piece in word.lower().replace("?", " ?").replace(".", " .").split()]
>>> data = squad_data_from_json({"version": "1.1", "data": [{"title": "t", "paragraphs": [
...     {"context": "It is Bob.", "qas": [{"id": "q1", "question": "Who is it?",
...      "answers": [{"text": "Bob", "answer_start": 6}]}]}]}]}, is_training=True)
>>> features = create_squad_features(data.examples, tokenizer, vocab, max_seq_length=16,
...                                  doc_stride=4, max_query_length=8, is_training=True)
>>> features[0].tokens[features[0].start_position]
'bob'
>>> arrays = features_to_arrays(features)
>>> arrays["input_word_ids"].shape, arrays["start_positions"].tolist()
((1, 16), [8])
"""

import dataclasses
import json
import logging
import os

import numpy as np

from bert_keras.finetuning.tasks.common import DataFormatError, check_file
from bert_keras.finetuning.tasks.words import as_vocabulary, is_squad_whitespace, whitespace_words

logger = logging.getLogger("bert_keras.finetuning.squad.data")

FIRST_UNIQUE_ID = 1000000000


@dataclasses.dataclass
class SquadExample:
    """One question on one context.

    `start_position`/`end_position` are word indices into `doc_tokens` of the (first) answer,
    -1 for an unanswerable question, None when not read for training. `answers` keeps the gold
    answer texts for evaluation.
    """

    qas_id: str
    question_text: str
    context_text: str
    doc_tokens: list
    char_to_word_offset: list
    orig_answer_text: str = None
    start_position: int = None
    end_position: int = None
    is_impossible: bool = False
    answers: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class SkippedQuestion:
    qas_id: str
    reason: str


@dataclasses.dataclass
class SquadData:
    """What `read_squad` returns.

    `examples`: the questions kept; `skipped`: questions left out (training only) and why;
    `warnings`: other problems met (e.g. empty contexts) as messages; `dataset`: the file's
    "data" list, as the evaluation functions of `bert_keras.metrics.squad_eval` take it;
    `version`: the file's "version" field.
    """

    examples: list
    skipped: list
    warnings: list
    dataset: list
    version: str = None


def read_squad(path, is_training, version_2_with_negative=False):
    """Reads an official SQuAD JSON file (see the module docstring)."""
    path = check_file(path, "SQuAD JSON file")
    try:
        with open(path, "r", encoding="utf-8") as f:
            data = json.load(f)
    except json.JSONDecodeError as error:
        raise DataFormatError(f"{path}: line {error.lineno} column {error.colno}: not valid JSON "
                              f"({error.msg})") from error
    except UnicodeDecodeError as error:
        raise DataFormatError(f"{path}: not valid UTF-8 ({error})") from error
    return squad_data_from_json(data, is_training, version_2_with_negative, source=path)


def split_context(context):
    """(doc_tokens, char_to_word_offset) of a context, as the original reader makes them.

    Whitespace characters map to the word before them (-1 before the first word).
    """
    doc_tokens = []
    char_to_word_offset = []
    previous_is_whitespace = True
    for char in context:
        if is_squad_whitespace(char):
            previous_is_whitespace = True
        else:
            if previous_is_whitespace:
                doc_tokens.append(char)
            else:
                doc_tokens[-1] += char
            previous_is_whitespace = False
        char_to_word_offset.append(len(doc_tokens) - 1)
    return doc_tokens, char_to_word_offset


def _require(mapping, key, kind, where, source):
    if not isinstance(mapping, dict):
        raise DataFormatError(f"{source}: {where}: expected a JSON object, got "
                              f"{type(mapping).__name__}")
    if key not in mapping:
        raise DataFormatError(f"{source}: {where}: missing field {key!r}")
    value = mapping[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise DataFormatError(f"{source}: {where}: field {key!r} should be {names}, "
                              f"got {type(value).__name__}")
    return value


def squad_data_from_json(data, is_training, version_2_with_negative=False, source="<json>"):
    """`read_squad` on an already parsed JSON object."""
    articles = _require(data, "data", list, "top level", source)
    examples, skipped, warnings = [], [], []

    def skip(qas_id, reason):
        logger.warning("%s: skipping question %s in training: %s", source, qas_id, reason)
        skipped.append(SkippedQuestion(qas_id, reason))

    for a, article in enumerate(articles):
        paragraphs = _require(article, "paragraphs", list, f"data[{a}]", source)
        for p, paragraph in enumerate(paragraphs):
            where = f"data[{a}].paragraphs[{p}]"
            context = _require(paragraph, "context", str, where, source)
            qas = _require(paragraph, "qas", list, where, source)
            doc_tokens, char_to_word_offset = split_context(context)
            if not doc_tokens and qas:
                message = f"{source}: {where}: empty context"
                logger.warning(message)
                warnings.append(message)
            for q, qa in enumerate(qas):
                qwhere = f"{where}.qas[{q}]"
                qas_id = str(_require(qa, "id", (str, int), qwhere, source))
                question = _require(qa, "question", str, qwhere, source)
                answers = qa.get("answers", [])
                if not isinstance(answers, list):
                    raise DataFormatError(f"{source}: {qwhere}: field 'answers' should be a list")
                for answer in answers:
                    _require(answer, "text", str, f"{qwhere} (id {qas_id}) answer", source)
                    _require(answer, "answer_start", int, f"{qwhere} (id {qas_id}) answer", source)
                is_impossible = bool(qa.get("is_impossible", False))
                example = SquadExample(
                    qas_id=qas_id, question_text=question, context_text=context,
                    doc_tokens=doc_tokens, char_to_word_offset=char_to_word_offset,
                    is_impossible=is_impossible if version_2_with_negative else False,
                    answers=[answer["text"] for answer in answers])
                if is_training:
                    if is_impossible and not version_2_with_negative:
                        raise DataFormatError(
                            f"{source}: {qwhere} (id {qas_id}): is_impossible is true but "
                            "version_2_with_negative is off; train SQuAD 2.0 with "
                            "version_2_with_negative=True")
                    if is_impossible:
                        example.start_position = -1
                        example.end_position = -1
                        example.orig_answer_text = ""
                    else:
                        if len(answers) != 1:
                            raise DataFormatError(
                                f"{source}: {qwhere} (id {qas_id}): a training question needs "
                                f"exactly 1 answer, found {len(answers)}")
                        reason = _locate_answer(example, answers[0])
                        if reason is not None:
                            skip(qas_id, reason)
                            continue
                examples.append(example)
    version = data.get("version") if isinstance(data, dict) else None
    if skipped:
        logger.warning("%s: %d training question(s) skipped (answer not found in the context)",
                       source, len(skipped))
    return SquadData(examples, skipped, warnings, articles, version)


def _locate_answer(example, answer):
    """Sets the word span of the answer; returns why it failed, or None."""
    text = answer["text"]
    start = answer["answer_start"]
    context = example.context_text
    if not text.strip():
        return "empty answer text"
    if start < 0 or start + len(text) > len(context):
        return (f"answer_start {start} + length {len(text)} is outside the context "
                f"({len(context)} characters)")
    if context[start:start + len(text)] != text:
        return (f"answer_start does not match the context: answer {text!r}, context has "
                f"{context[start:start + len(text)]!r} at {start}")
    start_word = example.char_to_word_offset[start]
    end_word = example.char_to_word_offset[start + len(text) - 1]
    if start_word < 0:
        # The answer starts with whitespace before the first word.
        start_word = 0
    actual = " ".join(example.doc_tokens[start_word:end_word + 1])
    cleaned = " ".join(text.split())
    if actual.find(cleaned) == -1:
        return f"answer {cleaned!r} not found in the context words {actual!r}"
    example.orig_answer_text = text
    example.start_position = start_word
    example.end_position = end_word
    return None


@dataclasses.dataclass
class SquadFeature:
    """One window of one example, padded to max_seq_length.

    `token_to_orig_map` maps a position of a document token to its word in `doc_tokens`;
    `token_is_max_context` tells whether this window is where that token has the most context.
    `start_position`/`end_position` are set for training (0 = [CLS] for no answer).
    """

    unique_id: int
    example_index: int
    doc_span_index: int
    tokens: list
    token_to_orig_map: dict
    token_is_max_context: dict
    input_ids: list
    input_mask: list
    segment_ids: list
    start_position: int = None
    end_position: int = None
    is_impossible: bool = False


def _check_is_max_context(doc_spans, span_index, position):
    best_score = None
    best_index = None
    for index, (start, length) in enumerate(doc_spans):
        end = start + length - 1
        if position < start or position > end:
            continue
        score = min(position - start, end - position) + 0.01 * length
        if best_score is None or score > best_score:
            best_score = score
            best_index = index
    return span_index == best_index


def _improve_answer_span(all_doc_ids, start, end, answer_ids):
    """The tightest wordpiece span inside [start, end] equal to the answer's own wordpieces."""
    for new_start in range(start, end + 1):
        for new_end in range(end, new_start - 1, -1):
            if all_doc_ids[new_start:new_end + 1] == answer_ids:
                return new_start, new_end
    return start, end


def _doc_spans(num_tokens, max_tokens_for_doc, doc_stride):
    spans = []
    start = 0
    while start < num_tokens:
        length = min(num_tokens - start, max_tokens_for_doc)
        spans.append((start, length))
        if start + length == num_tokens:
            break
        start += min(length, doc_stride)
    if not spans:
        spans.append((0, 0))  # an empty context still gets one window (answer: [CLS])
    return spans


def create_squad_features(examples, tokenize_word, vocab, max_seq_length=384, doc_stride=128,
                          max_query_length=64, is_training=False):
    """Windows of every example as `SquadFeature`s, in example order.

    `tokenize_word(word) -> list[int]`: wordpiece ids of one whitespace-free word;
    `vocab`: a `bert_keras.text.vocab.Vocabulary`, a vocab.txt path or the list of token strings
    (to name tokens and find [CLS], [SEP], [PAD]).
    """
    vocab = as_vocabulary(vocab)
    if max_seq_length <= max_query_length + 3:
        raise ValueError(
            f"max_seq_length ({max_seq_length}) must be larger than max_query_length "
            f"({max_query_length}) + 3 to leave room for document tokens after [CLS] question "
            "[SEP] ... [SEP]")
    if doc_stride < 1:
        raise ValueError(f"doc_stride must be at least 1, got {doc_stride}")
    if doc_stride > max_seq_length - max_query_length - 3:
        logger.warning("doc_stride %d is larger than the smallest document window %d: some "
                       "tokens may fall between windows", doc_stride,
                       max_seq_length - max_query_length - 3)
    id_to_token = vocab.tokens
    cls_id = vocab.token_to_id["[CLS]"]
    sep_id = vocab.token_to_id["[SEP]"]
    pad_id = vocab.token_to_id["[PAD]"]

    cache = {}

    def word_ids(word):
        ids = cache.get(word)
        if ids is None:
            ids = [int(i) for i in tokenize_word(word)]
            cache[word] = ids
        return ids

    def text_ids(text):
        ids = []
        for word in whitespace_words(text):
            ids.extend(word_ids(word))
        return ids

    features = []
    unique_id = FIRST_UNIQUE_ID
    truncated_queries = 0
    for example_index, example in enumerate(examples):
        query_ids = text_ids(example.question_text)
        if len(query_ids) > max_query_length:
            truncated_queries += 1
            query_ids = query_ids[:max_query_length]

        tok_to_orig_index = []
        orig_to_tok_index = []
        all_doc_ids = []
        for i, word in enumerate(example.doc_tokens):
            orig_to_tok_index.append(len(all_doc_ids))
            for piece in word_ids(word):
                tok_to_orig_index.append(i)
                all_doc_ids.append(piece)

        tok_start = tok_end = None
        answerable = (is_training and not example.is_impossible
                      and example.start_position is not None and example.start_position >= 0)
        if answerable:
            tok_start = orig_to_tok_index[example.start_position]
            if example.end_position < len(example.doc_tokens) - 1:
                tok_end = orig_to_tok_index[example.end_position + 1] - 1
            else:
                tok_end = len(all_doc_ids) - 1
            tok_start, tok_end = _improve_answer_span(
                all_doc_ids, tok_start, tok_end, text_ids(example.orig_answer_text))

        max_tokens_for_doc = max_seq_length - len(query_ids) - 3
        doc_spans = _doc_spans(len(all_doc_ids), max_tokens_for_doc, doc_stride)
        for span_index, (span_start, span_length) in enumerate(doc_spans):
            ids = [cls_id] + query_ids + [sep_id]
            segment_ids = [0] * len(ids)
            token_to_orig_map = {}
            token_is_max_context = {}
            for i in range(span_length):
                split_index = span_start + i
                token_to_orig_map[len(ids)] = tok_to_orig_index[split_index]
                token_is_max_context[len(ids)] = _check_is_max_context(
                    doc_spans, span_index, split_index)
                ids.append(all_doc_ids[split_index])
                segment_ids.append(1)
            ids.append(sep_id)
            segment_ids.append(1)
            tokens = [id_to_token[i] for i in ids]
            input_mask = [1] * len(ids)
            padding = max_seq_length - len(ids)
            ids = ids + [pad_id] * padding
            input_mask = input_mask + [0] * padding
            segment_ids = segment_ids + [0] * padding

            start_position = end_position = None
            if is_training:
                if answerable:
                    doc_end = span_start + span_length - 1
                    if tok_start >= span_start and tok_end <= doc_end:
                        offset = len(query_ids) + 2
                        start_position = tok_start - span_start + offset
                        end_position = tok_end - span_start + offset
                    else:
                        start_position = end_position = 0
                else:
                    start_position = end_position = 0
            features.append(SquadFeature(
                unique_id=unique_id, example_index=example_index, doc_span_index=span_index,
                tokens=tokens, token_to_orig_map=token_to_orig_map,
                token_is_max_context=token_is_max_context, input_ids=ids,
                input_mask=input_mask, segment_ids=segment_ids,
                start_position=start_position, end_position=end_position,
                is_impossible=bool(example.is_impossible)))
            unique_id += 1
    if truncated_queries:
        logger.info("%d question(s) longer than max_query_length=%d wordpieces were truncated",
                    truncated_queries, max_query_length)
    return features


def features_to_arrays(features):
    """The features as NumPy arrays, keyed as the encoder's inputs.

    input_word_ids, input_mask, input_type_ids: int32 [num_features, max_seq_length];
    feature_index: int32 [num_features] (position in `features`, to line predictions up);
    start_positions, end_positions: int32 [num_features], only when the features have them.
    """
    if not features:
        raise ValueError("no SQuAD features to convert")
    arrays = {
        "input_word_ids": np.asarray([f.input_ids for f in features], np.int32),
        "input_mask": np.asarray([f.input_mask for f in features], np.int32),
        "input_type_ids": np.asarray([f.segment_ids for f in features], np.int32),
        "feature_index": np.arange(len(features), dtype=np.int32),
    }
    if all(f.start_position is not None for f in features):
        arrays["start_positions"] = np.asarray([f.start_position for f in features], np.int32)
        arrays["end_positions"] = np.asarray([f.end_position for f in features], np.int32)
    return arrays


def squad_file_paths(data_dir, version_2_with_negative=False):
    """The usual file names: {"train": .../train-v1.1.json, "dev": .../dev-v1.1.json} (or v2.0)."""
    suffix = "v2.0" if version_2_with_negative else "v1.1"
    return {"train": os.path.join(data_dir, f"train-{suffix}.json"),
            "dev": os.path.join(data_dir, f"dev-{suffix}.json")}
