"""Shared helpers for the fine-tuning tests: a tiny random model directory whose vocabulary
covers the words of the fixture files, and task data folders built from tests/fixtures."""

import os
import random
import shutil

import keras

from bert_keras.finetuning.tasks.words import basic_tokenize
from bert_keras.model import checkpoint_names
from bert_keras.model.config import BertConfig
from bert_keras.model.encoder import build_encoder
from bert_keras.modeldir import model_dir
from bert_keras.text.vocab import SPECIAL_TOKENS, Vocabulary
from helpers.support import TESTS_DIR

FIXTURES = os.path.join(TESTS_DIR, "fixtures")


def fixture(*parts):
    return os.path.join(FIXTURES, *parts)


def data_dir(tmp_path, files):
    """A folder holding copies of fixture files: {name in the folder: fixture path}."""
    folder = tmp_path / "data"
    folder.mkdir(exist_ok=True)
    for name, source in files.items():
        shutil.copyfile(source, folder / name)
    return str(folder)


def vocab_tokens(paths):
    """The special tokens and every lower-cased basic token of the files, sorted."""
    words = set()
    for path in paths:
        with open(path, encoding="utf-8") as f:
            words.update(basic_tokenize(f.read(), do_lower_case=True))
    return list(SPECIAL_TOKENS) + sorted(words - set(SPECIAL_TOKENS))


def tiny_model_dir(tmp_path, paths, seed=0, name="init_model", causal_attention=False):
    """A model directory of the "tiny" preset (2 layers, hidden 128) with random weights;
    `causal_attention=True` makes it a left-to-right model's."""
    tokens = vocab_tokens(paths)
    config = BertConfig.from_preset("tiny", vocab_size=len(tokens), max_position_embeddings=128,
                                    causal_attention=causal_attention)
    keras.utils.set_random_seed(seed)
    encoder = build_encoder(config)
    out = str(tmp_path / name)
    model_dir.write_model_dir(out, config, Vocabulary(tokens), True,
                              checkpoint_names.collect_weights(
                                  checkpoint_names.encoder_weight_map(encoder)))
    return out


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


# ------------------------------------------------------------------ learnable splits
# A tiny model trained from random weights for a few dozen steps learns no real task, so the
# end-to-end tests' dev checks use data of each official layout whose answer a word tells: a
# word of one small class or another decides the label, is the answer span, the entity or the
# right ending. The train and dev splits are drawn apart (their own rows, seeds and words
# around), so a dev score above its baseline means the pipeline learnt the rule, and a broken
# one (labels shuffled from their rows, spans or tags shifted, the wrong ending scored) stays
# at the baseline.
FILLER = ("the a man woman child dog city car house garden river market street teacher "
          "doctor walks sees likes finds leaves near with over under after today later big "
          "small old new green quiet busy").split()
PLEASANT = ("wonderful", "excellent", "delightful", "splendid")
UNPLEASANT = ("terrible", "awful", "dreadful", "horrid")
COLORS = ("red", "blue", "yellow", "purple", "orange", "violet")
PERSONS = ("maria", "john", "ahmed", "yuki")
PLACES = ("lisbon", "paris", "nairobi", "lima")


def _filler(rng, low=4, high=7):
    return [rng.choice(FILLER) for _ in range(rng.randint(low, high))]


def _with_word(rng, word, low=4, high=7):
    words = _filler(rng, low, high)
    words.insert(rng.randint(0, len(words)), word)
    return words


def write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return str(path)


def word_labelled_mrpc(path, count, seed):
    """An MRPC-layout file ("Quality", ids, "#1 String", "#2 String") of `count` pairs, half
    labelled 1: a pair is 1 when both sentences hold a PLEASANT word, 0 when both hold an
    UNPLEASANT one. Returns the path."""
    rng = random.Random(seed)
    lines = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
    for index in range(count):
        label = index % 2
        words = PLEASANT if label else UNPLEASANT
        word = rng.choice(words)
        lines.append(f"{label}\t{seed * 1000 + 2 * index}\t{seed * 1000 + 2 * index + 1}\t"
                     f"{' '.join(_with_word(rng, word))} .\t"
                     f"{' '.join(_with_word(rng, rng.choice(words)))} .")
    return write_lines(path, lines)


def word_scored_stsb(path, count, seed):
    """An STS-B-layout file of `count` pairs scored 0 to 5: 4 to 5 when both sentences hold a
    PLEASANT word, 0 to 1 when both hold an UNPLEASANT one (half of each)."""
    rng = random.Random(seed)
    lines = ["index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\t"
             "sentence2\tscore"]
    for index in range(count):
        words = PLEASANT if index % 2 else UNPLEASANT
        first, second = (" ".join(_with_word(rng, rng.choice(words))) for _ in range(2))
        score = 4.0 * (index % 2) + rng.uniform(0.0, 1.0)
        lines.append(f"{index}\tmain-captions\tfixture\t2024\t{index:04d}\tnone\tnone\t"
                     f"{first} .\t{second} .\t{score:.3f}")
    return write_lines(path, lines)


def color_squad(count, seed, prefix, impossible_every=0, version="1.1"):
    """A SQuAD-layout dataset (dict) of `count` one-question paragraphs: "what color is it ?"
    over a context of filler words holding one COLORS word, the answer. With
    `impossible_every=k`, every k-th paragraph has no color and its question is unanswerable
    (v2.0's `is_impossible`)."""
    rng = random.Random(seed)
    articles = []
    for index in range(count):
        impossible = impossible_every and index % impossible_every == 0
        words = _filler(rng, 6, 12)
        qa = {"id": f"{prefix}-{index}", "question": "what color is it ?", "answers": []}
        if impossible:
            qa["is_impossible"] = True
        else:
            color = rng.choice(COLORS)
            position = rng.randint(0, len(words))
            words.insert(position, color)
            start = len(" ".join(words[:position])) + (1 if position else 0)
            qa["answers"] = [{"text": color, "answer_start": start}]
            if version == "2.0":
                qa["is_impossible"] = False
        articles.append({"title": f"{prefix} {index}",
                         "paragraphs": [{"context": " ".join(words) + " .", "qas": [qa]}]})
    return {"version": version, "data": articles}


def tagged_conll(path, count, seed):
    """A CoNLL-2003-layout file (word, POS, chunk, IOB1 tag) of `count` sentences: PERSONS
    words are I-PER, PLACES words I-LOC, "acme corp" is I-ORG I-ORG, the rest O."""
    rng = random.Random(seed)
    lines = ["-DOCSTART- -X- -X- O", ""]
    for _ in range(count):
        words = [(word, "O") for word in _filler(rng, 3, 6)]
        for entity in rng.sample([[(rng.choice(PERSONS).title(), "I-PER")],
                                  [(rng.choice(PLACES).title(), "I-LOC")],
                                  [("Acme", "I-ORG"), ("Corp", "I-ORG")]], 2):
            position = rng.randint(0, len(words))
            words[position:position] = entity
        lines += [f"{word} NN I-NP {tag}" for word, tag in words] + [". . O O", ""]
    return write_lines(path, lines[:-1])


def word_chosen_swag(path, count, seed, labelled=True):
    """A SWAG-layout CSV of `count` rows: four endings of filler words, the right one (label)
    holding a PLEASANT word and the others an UNPLEASANT one."""
    rng = random.Random(seed)
    header = ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3"
    lines = [header + (",label" if labelled else "")]
    for index in range(count):
        label = index % 4
        first, second = " ".join(_filler(rng)) + " .", rng.choice(["He", "She", "It"])
        endings = [" ".join(_with_word(rng, rng.choice(PLEASANT if k == label else UNPLEASANT),
                                       2, 4)) + " ." for k in range(4)]
        row = [str(index), f"fixture_{seed}_{index}", str(index), f"{first} {second}", first,
               second, "gold", *endings] + ([str(label)] if labelled else [])
        lines.append(",".join(row))
    return write_lines(path, lines)
