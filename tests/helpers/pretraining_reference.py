"""A plain-Python statement of the original create_pretraining_data algorithm, for tests.

Written from the algorithm's description (BERT paper, appendix A.1, and the steps listed in
`bert_keras.data.instances`), one instance at a time with lists and `random.Random`, the way
the reference tool does it. The NumPy implementation must give the same distributions.
"""

import random

CLS, SEP, MASK = "[CLS]", "[SEP]", "[MASK]"


def truncate_pair(tokens_a, tokens_b, max_num_tokens, rng):
    """Cuts the longer list (B on ties) at a random end until the pair fits. In place."""
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


def mask_tokens(tokens, masked_lm_prob, max_predictions_per_seq, vocab_words, rng,
                whole_word=False):
    """Returns (output tokens, [(position, label)] sorted, kinds list of 'mask'/'keep'/'random')."""
    words = []
    for position, token in enumerate(tokens):
        if token in (CLS, SEP):
            continue
        if whole_word and words and token.startswith("##"):
            words[-1].append(position)
        else:
            words.append([position])
    rng.shuffle(words)
    output = list(tokens)
    wanted = min(max_predictions_per_seq, max(1, int(round(len(tokens) * masked_lm_prob))))
    chosen, kinds = [], []
    for word in words:
        if len(chosen) >= wanted:
            break
        if len(chosen) + len(word) > wanted:
            continue
        for position in word:
            if rng.random() < 0.8:
                replacement, kind = MASK, "mask"
            elif rng.random() < 0.5:
                replacement, kind = tokens[position], "keep"
            else:
                replacement, kind = vocab_words[rng.randint(0, len(vocab_words) - 1)], "random"
            output[position] = replacement
            chosen.append((position, tokens[position]))
            kinds.append(kind)
    return output, sorted(chosen), kinds


def document_instances(documents, index, max_seq_length, short_seq_prob, rng):
    """Instances (tokens_a, tokens_b, is_random_next) of one pass over document `index`,
    before truncation; `documents` are lists of sentences, each a list of tokens."""
    document = documents[index]
    max_num_tokens = max_seq_length - 3
    target = max_num_tokens
    if rng.random() < short_seq_prob:
        target = rng.randint(2, max_num_tokens)
    instances, chunk, length = [], [], 0
    i = 0
    while i < len(document):
        chunk.append(document[i])
        length += len(document[i])
        if i == len(document) - 1 or length >= target:
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            tokens_a = [t for sentence in chunk[:a_end] for t in sentence]
            tokens_b = []
            if len(chunk) == 1 or rng.random() < 0.5:
                is_random_next = True
                for _ in range(10):
                    other = rng.randint(0, len(documents) - 1)
                    if other != index:
                        break
                other_document = documents[other]
                for sentence in other_document[rng.randint(0, len(other_document) - 1):]:
                    tokens_b.extend(sentence)
                    if len(tokens_b) >= target - len(tokens_a):
                        break
                i -= len(chunk) - a_end
            else:
                is_random_next = False
                tokens_b = [t for sentence in chunk[a_end:] for t in sentence]
            instances.append((tokens_a, tokens_b, is_random_next))
            chunk, length = [], 0
        i += 1
    return instances


def reference_instances(documents, max_seq_length, short_seq_prob, masked_lm_prob,
                        max_predictions_per_seq, dupe_factor, vocab_words, seed,
                        whole_word=False):
    """All instances as dicts: tokens, segment_ids, positions, labels, kinds, is_random_next."""
    rng = random.Random(seed)
    out = []
    for _ in range(dupe_factor):
        for index in range(len(documents)):
            for tokens_a, tokens_b, is_random_next in document_instances(
                    documents, index, max_seq_length, short_seq_prob, rng):
                truncate_pair(tokens_a, tokens_b, max_seq_length - 3, rng)
                tokens = [CLS] + tokens_a + [SEP] + tokens_b + [SEP]
                segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
                output, chosen, kinds = mask_tokens(tokens, masked_lm_prob,
                                                    max_predictions_per_seq, vocab_words, rng,
                                                    whole_word)
                out.append({"tokens": output, "original": tokens, "segment_ids": segment_ids,
                            "positions": [p for p, _ in chosen],
                            "labels": [label for _, label in chosen], "kinds": kinds,
                            "is_random_next": is_random_next, "length_a": len(tokens_a)})
    return out
