"""Uses exported SavedModels the way a production process would: TensorFlow and tensorflow-text only.

Nothing here imports `bert_keras`, so the main job runs this file as a script in a fresh
process (`python serving_demo.py request.json response.json`) to show that its exports stand
on their own. The request names the SavedModels and the sentences:

    {"preprocessor": DIR, "encoder": DIR, "vocab_file": FILE, "seq_length": 32,
     "masked_sentences": ["He was born [MASK] London ."],
     "classifier": DIR, "classify_sentences": ["a charming , funny film ."]}

and the response holds `masked_word_predictions` and `classifications` (see the functions), and
`loaded_modules`: whether any `bert_keras` module was loaded in the process (it must not be).

Example:

>>> predictions = masked_word_predictions(
...     "work/export/preprocessor", "work/export/encoder", "work/vocab/vocab.txt",
...     ["He was born [MASK] London ."])  # doctest: +SKIP
>>> predictions[0][0][0]  # doctest: +SKIP
('in', 0.93)
"""

import json
import sys

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops of the exported tokenizer)


def masked_word_predictions(preprocessor_dir, encoder_dir, vocab_file, sentences, seq_length=128,
                            top_k=5):
    """Top-k predictions for every [MASK] of `sentences`, from the exported SavedModels alone.

    The text between [MASK] markers goes through the exported preprocessor's `tokenize`; the
    mask id is put in place of each marker, the pieces are packed with its `bert_pack_inputs`
    and scored by the exported encoder's `mlm` sub-object.

    Returns:
      A list (one per sentence) of lists (one per [MASK]) of (token, probability) pairs.
    """
    preprocessor = tf.saved_model.load(preprocessor_dir)
    encoder = tf.saved_model.load(encoder_dir)
    with open(vocab_file, encoding="utf-8") as f:
        vocab = [line.rstrip("\n") for line in f]
    mask_id = vocab.index("[MASK]")

    rows = []
    for sentence in sentences:
        ids = []
        for index, part in enumerate(sentence.split("[MASK]")):
            if index:
                ids.append(mask_id)
            if part.strip():
                ids.extend(preprocessor.tokenize(tf.constant([part])).flat_values.numpy().tolist())
        rows.append(ids)
    segments = tf.ragged.constant(rows, dtype=tf.int32)
    inputs = preprocessor.bert_pack_inputs([segments], seq_length=tf.constant(seq_length))
    word_ids = inputs["input_word_ids"].numpy()
    positions = np.zeros((len(rows), max(1, max(r.count(mask_id) for r in rows))), np.int32)
    for row in range(len(rows)):
        found = np.flatnonzero(word_ids[row] == mask_id)
        positions[row, :len(found)] = found
    outputs = encoder.mlm(dict(inputs, masked_lm_positions=tf.constant(positions)))
    probabilities = tf.nn.softmax(outputs["mlm_logits"], axis=-1).numpy()
    predictions = []
    for row, ids in enumerate(rows):
        per_mask = []
        for slot in range(ids.count(mask_id)):
            best = np.argsort(-probabilities[row, slot])[:top_k]
            per_mask.append([(vocab[i], float(probabilities[row, slot, i])) for i in best])
        predictions.append(per_mask)
    return predictions


def classify(classifier_dir, sentences):
    """(label name, probability of that label) for each sentence, from a raw-text classifier.

    `classifier_dir` is a single-sentence classification task export
    (`export_from_model_dir("task", ...)`), whose `serving_default(text_a)` takes raw strings.
    """
    classifier = tf.saved_model.load(classifier_dir)
    outputs = classifier.signatures["serving_default"](text_a=tf.constant(list(sentences)))
    names = [name.decode("utf-8") for name in outputs["label_name"].numpy()]
    best = outputs["probabilities"].numpy().max(axis=-1)
    return [(name, float(p)) for name, p in zip(names, best)]


def serve(request):
    """Answers a request dict (see the module docstring) with a response dict."""
    response = {}
    if request.get("masked_sentences"):
        response["masked_word_predictions"] = masked_word_predictions(
            request["preprocessor"], request["encoder"], request["vocab_file"],
            request["masked_sentences"], seq_length=request.get("seq_length", 128))
    if request.get("classify_sentences"):
        response["classifications"] = classify(request["classifier"],
                                               request["classify_sentences"])
    response["loaded_modules"] = sorted(name for name in sys.modules
                                        if name.split(".")[0] == "bert_keras")
    return response


def main(argv):
    if len(argv) != 3:
        raise SystemExit(f"usage: {argv[0]} REQUEST_JSON RESPONSE_JSON")
    with open(argv[1], encoding="utf-8") as f:
        request = json.load(f)
    response = serve(request)
    with open(argv[2], "w", encoding="utf-8") as f:
        json.dump(response, f, indent=2)


if __name__ == "__main__":
    main(sys.argv)
