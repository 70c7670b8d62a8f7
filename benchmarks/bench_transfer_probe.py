"""What a pre-trained model's frozen representation holds for a sentence task, against baselines.

The main job's comparison fine-tunes the whole model, which can hide what pre-training learnt
(a model that learnt something useful may still overfit 1,000 sentences) or make up for what
it did not (a fresh Transformer learns a bag of words on its own). This benchmark asks the
narrower question with nothing trained but a linear classifier:

- every representation is frozen and averaged over a sentence's real tokens: the word
  embeddings, each layer's output, and the last layer's [CLS] vector, for the pre-trained model
  (`--model_dir`) and for the same architecture freshly initialized (`--random_seeds`);
- two references that a Transformer is not needed for: a bag of words over the labelled
  sentences, and distributional word vectors (PPMI over a +-4-word window, truncated SVD)
  learnt from *unlabelled* text, by default the task's own training sentences without their
  labels (the semi-supervised protocol; `--text_files` for other text, e.g. the pre-training
  corpus);
- the classifier is ridge regression on +-1 targets over standardized features, its penalty
  chosen on the last `--selection_examples` *training* rows (never on dev), trained on the first
  `--train_examples` rows, scored on dev.

It also prints the nearest neighbours of a few words (`--words`) in the pre-trained word
embeddings and in the distributional vectors: what each has learnt a word is like.

Usage (the main job's model and task by default):

    python benchmarks/bench_transfer_probe.py --model_dir=bert_keras_work/model \
        [--task_dir=bert_keras/data/sst2] [--text_files=...] [--output_name=transfer_probe]

Writes the run <output_name> into benchmarks/results/transfer_probe_<machine class>.json.
"""

import argparse
import collections
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common  # noqa: E402

PENALTIES = (1.0, 10.0, 100.0, 1000.0)


def ridge_fit(features, labels, penalty):
    """(weights, bias, mean, scale) of ridge regression on +-1 targets."""
    mean, scale = features.mean(0), features.std(0) + 1e-6
    x = (features - mean) / scale
    target = 2.0 * labels - 1.0
    weights = np.linalg.solve(x.T @ x + penalty * np.eye(x.shape[1]),
                              x.T @ (target - target.mean()))
    return weights, target.mean(), mean, scale


def ridge_accuracy(fit, features, labels):
    weights, bias, mean, scale = fit
    return float(np.mean((((features - mean) / scale) @ weights + bias > 0) == labels))


def probe(train, selection, dev):
    """Each (features, labels) pair: the penalty chosen on `selection`, the dev accuracy."""
    fits = {penalty: ridge_fit(*train, penalty) for penalty in PENALTIES}
    scores = {penalty: ridge_accuracy(fit, *selection) for penalty, fit in fits.items()}
    penalty = max(PENALTIES, key=lambda p: (scores[p], -p))  # ties: the larger penalty
    return {"penalty": penalty, "selection": scores[penalty],
            "dev": ridge_accuracy(fits[penalty], *dev)}


def words_of(text):
    return text.lower().split()


def distributional_vectors(sentences, vocab_size=8000, window=4, dims=100, seed=0):
    """({word: row}, [vocab_size, dims]) PPMI vectors (context counts smoothed to the power
    0.75) reduced by a randomized truncated SVD, over lists of words."""
    counts = collections.Counter(word for words in sentences for word in words)
    vocab = {word: i for i, (word, _) in enumerate(counts.most_common(vocab_size))}
    pairs = collections.Counter()
    for words in sentences:
        ids = [vocab.get(word, -1) for word in words]
        for i, a in enumerate(ids):
            if a < 0:
                continue
            for b in ids[max(0, i - window):i] + ids[i + 1:i + 1 + window]:
                if b >= 0:
                    pairs[a, b] += 1
    matrix = np.zeros((len(vocab), len(vocab)), np.float32)
    rows, cols = zip(*pairs)
    matrix[rows, cols] = list(pairs.values())
    total = matrix.sum()
    context = matrix.sum(0) ** 0.75
    context *= total / context.sum()
    with np.errstate(divide="ignore"):
        ppmi = np.maximum(np.log(matrix * total / (matrix.sum(1, keepdims=True) * context
                                                     + 1e-12)), 0.0)
    # Randomized SVD (Halko et al. 2011): a range finder with two power iterations.
    rng = np.random.RandomState(seed)
    basis = np.linalg.qr(ppmi @ rng.standard_normal((len(vocab), dims + 20)))[0]
    for _ in range(2):
        basis = np.linalg.qr(ppmi @ (ppmi.T @ basis))[0]
    u, s, _ = np.linalg.svd(basis.T @ ppmi, full_matrices=False)
    return vocab, (basis @ u)[:, :dims] * np.sqrt(s[:dims])


def mean_word_vectors(sentences, vocab, vectors):
    out = np.zeros((len(sentences), vectors.shape[1]))
    for row, words in enumerate(sentences):
        ids = [vocab[word] for word in words if word in vocab]
        if ids:
            out[row] = vectors[ids].mean(0)
    return out


def neighbours(word, vocab, vectors, count=5):
    if word not in vocab:
        return None
    names = sorted(vocab, key=vocab.get)
    unit = vectors / (np.linalg.norm(vectors, axis=1, keepdims=True) + 1e-12)
    similarity = unit @ unit[vocab[word]]
    return [names[i] for i in np.argsort(-similarity) if i != vocab[word]][:count]


def encoder_features(encoder, weights, inputs, batch_size=256):
    """{name: [rows, hidden]} frozen sentence features of `encoder` holding `weights`."""
    from bert_keras.model import checkpoint_names

    variables = checkpoint_names.encoder_weight_map(encoder)
    checkpoint_names.assign_weights(
        variables, {name: value for name, value in weights.items() if name in variables},
        source="probe")
    outputs = encoder.predict(inputs, batch_size=batch_size, verbose=0)
    mask = inputs["input_mask"][..., None].astype("float32")
    mean = lambda values: (values * mask).sum(1) / mask.sum(1)  # noqa: E731
    embeddings = [value for name, value in weights.items() if name.endswith("word_embeddings")]
    features = {"word embeddings (mean)": mean(embeddings[0][inputs["input_word_ids"]])}
    for index, layer in enumerate(outputs["encoder_outputs"]):
        features[f"layer {index + 1} (mean)"] = mean(layer)
    features["last layer [CLS]"] = outputs["encoder_outputs"][-1][:, 0]
    return features


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model_dir", required=True, help="a pre-trained model directory")
    parser.add_argument("--task", default="glue/sst2")
    parser.add_argument("--task_dir", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), os.pardir, "bert_keras", "data", "sst2"))
    parser.add_argument("--max_seq_length", type=int, default=48)
    parser.add_argument("--train_examples", type=int, default=1000)
    parser.add_argument("--selection_examples", type=int, default=500)
    parser.add_argument("--random_seeds", default="1,2,3")
    parser.add_argument("--text_files", default="",
                        help="comma-separated unlabelled text for the distributional vectors "
                             "(default: the task's training sentences without labels)")
    parser.add_argument("--words", default="good,bad,boring,funny")
    parser.add_argument("--output_name", default="transfer_probe")
    args = parser.parse_args()

    import bert_keras
    from bert_keras.finetuning.glue import data as glue
    from bert_keras.finetuning.sweep import random_encoder_weights
    from bert_keras.finetuning.task import get_task
    from bert_keras.model.encoder import build_encoder
    from bert_keras.modeldir import model_dir

    start = time.time()
    name = args.task.split("/")[-1]
    spec = glue.task_spec(name)
    if spec.num_labels != 2 or spec.text_b is not None:
        sys.exit(f"--task={args.task}: the probe takes single-sentence tasks with two labels "
                 f"(e.g. glue/sst2, glue/cola)")
    train_examples = glue.read_glue_examples(name, args.task_dir, "train")
    dev_examples = glue.read_glue_examples(name, args.task_dir, "dev")
    n, held = args.train_examples, args.selection_examples
    if n + held > len(train_examples):
        sys.exit(f"{args.task_dir}: {len(train_examples)} training rows, but --train_examples "
                 f"{n} and --selection_examples {held} need {n + held}")
    labels = np.asarray(glue.label_ids(train_examples, name))
    dev_labels = np.asarray(glue.label_ids(dev_examples, name))
    parts = {"train": slice(0, n), "selection": slice(len(labels) - held, len(labels))}

    def split(features):
        return ((features[parts["train"]], labels[parts["train"]]),
                (features[parts["selection"]], labels[parts["selection"]]))

    rows = []

    def add(representation, side, train_features, dev_features):
        result = probe(*split(train_features), (dev_features, dev_labels))
        rows.append({"representation": representation, "side": side, **result})
        print(f"  {representation:>28} {side:>16}: dev {result['dev']:.3f} "
              f"(selection {result['selection']:.3f}, penalty {result['penalty']:g})", flush=True)

    # References without a Transformer.
    sentences = [words_of(example.text_a) for example in train_examples]
    dev_sentences = [words_of(example.text_a) for example in dev_examples]
    labelled_words = {word: i for i, word in enumerate(sorted(
        {word for words in sentences[parts["train"]] for word in words}))}
    one_hot = np.eye(len(labelled_words))
    add("bag of words", "labelled rows", mean_word_vectors(sentences, labelled_words, one_hot),
        mean_word_vectors(dev_sentences, labelled_words, one_hot))
    if args.text_files:
        text = []
        for path in args.text_files.split(","):
            with open(path, encoding="utf-8") as f:
                text += [words_of(line) for line in f if line.strip()]
        text_source = args.text_files
    else:
        text, text_source = sentences, f"{args.task_dir}/train.tsv without labels"
    vocab, vectors = distributional_vectors(text)
    add("distributional vectors (mean)", "unlabelled text",
        mean_word_vectors(sentences, vocab, vectors),
        mean_word_vectors(dev_sentences, vocab, vectors))

    # The encoders.
    config = model_dir.read_config(args.model_dir)
    task = get_task(args.task, args.task_dir, args.model_dir,
                    bert_keras.finetuning.FinetuningOptions(max_seq_length=args.max_seq_length))
    inputs = {split_name: {key: data.inputs[key] for key in
                           ("input_word_ids", "input_mask", "input_type_ids")}
              for split_name, data in (("train", task.load("train")), ("dev", task.load("dev")))}
    if len(inputs["train"]["input_mask"]) != len(labels):
        sys.exit(f"{args.task_dir}: the task read {len(inputs['train']['input_mask'])} training "
                 f"rows, the TSV reader {len(labels)}")
    sides = {"pre-trained": model_dir.read_weights(args.model_dir)}
    for seed in [int(s) for s in args.random_seeds.split(",") if s]:
        sides[f"random init {seed}"] = random_encoder_weights(config, seed)
    encoder = build_encoder(config)
    for side, weights in sides.items():
        train_features = encoder_features(encoder, weights, inputs["train"])
        dev_features = encoder_features(encoder, weights, inputs["dev"])
        for representation in train_features:
            add(representation, side, train_features[representation], dev_features[representation])

    # What each has learnt a word is like.
    wordpieces = model_dir.read_vocab(args.model_dir).token_to_id
    embedding = [value for key, value in sides["pre-trained"].items()
                 if key.endswith("word_embeddings")][0]
    similar = {}
    for word in [w for w in args.words.split(",") if w]:
        similar[word] = {"pre-trained word embeddings": neighbours(word, wordpieces, embedding),
                         "distributional vectors": neighbours(word, vocab, vectors)}
        print(f"  nearest to {word!r}: " + "; ".join(
            f"{key}: {', '.join(value) if value else '(not in vocabulary)'}"
            for key, value in similar[word].items()))

    majority = float(max(np.mean(dev_labels == label) for label in set(dev_labels.tolist())))
    print(f"majority label on dev: {majority:.3f}; {time.time() - start:.0f} s")
    path = bench_common.write_results(args.output_name, {
        "model_dir": os.path.abspath(args.model_dir), "task": args.task,
        "task_dir": os.path.abspath(args.task_dir), "text": text_source,
        "train_examples": n, "selection_examples": held, "majority_share": majority,
        "rows": rows, "neighbours": similar, "seconds": time.time() - start})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
