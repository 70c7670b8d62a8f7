"""Fine-tuning from an exported encoder with Keras 3 (`TFSMLayer`, trainable, training endpoint)."""

import numpy as np
import pytest

from helpers.export_helpers import run_fresh, word_vocab, write_pretrained_dir


def _toy_data(size=64, seq=10, seed=0):
    """Random token ids; rows of label 1 have token 11 at every other position."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(12, 60, size=(size, seq)).astype(np.int32)
    labels = (np.arange(size) % 2).astype(np.int32)
    ids[labels == 1, 1::2] = 11
    ids[:, 0] = 2
    ids[:, -1] = 3
    inputs = {"input_word_ids": ids, "input_mask": np.ones_like(ids),
              "input_type_ids": np.zeros_like(ids)}
    return inputs, labels


def _toy_texts(size=64, seed=0):
    """Sentences; those of label 1 say "good" every other word."""
    rng = np.random.default_rng(seed)
    words = ["the", "movie", "was", "city", "bob", "alice", "play", "year", "world"]
    texts, labels = [], []
    for index in range(size):
        sentence = list(rng.choice(words, size=8))
        if index % 2:
            sentence[::2] = ["good"] * 4
        texts.append(" ".join(sentence).capitalize() + ".")
        labels.append(index % 2)
    return texts, np.asarray(labels, np.int32)


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    from bert_keras.export import export_encoder_from_model_dir
    from bert_keras.export.preprocessor_export import export_preprocessor_from_model_dir

    root = tmp_path_factory.mktemp("finetune_export")
    model_dir = str(root / "model")
    write_pretrained_dir(model_dir, word_vocab())
    export_encoder_from_model_dir(model_dir, str(root / "encoder"))
    export_preprocessor_from_model_dir(model_dir, str(root / "preprocessor"), seq_length=16)
    return {"root": root, "model_dir": model_dir, "encoder": str(root / "encoder"),
            "preprocessor": str(root / "preprocessor")}


def test_classifier_from_export_trains_on_text_through_the_exported_preprocessor(exports):
    import keras
    import tensorflow as tf

    from bert_keras.export.savedmodel_layer import (build_classifier_from_export,
                                                    preprocess_dataset)

    keras.utils.set_random_seed(0)
    texts, labels = _toy_texts()
    dataset = preprocess_dataset(tf.data.Dataset.from_tensor_slices((texts, labels)),
                                 exports["preprocessor"]).batch(16)
    features, _ = next(iter(dataset))
    assert features["input_word_ids"].shape == (16, 16)
    model = build_classifier_from_export(exports["encoder"], num_classes=2, seq_length=16)
    encoder = model.encoder_layer
    # The encoder's weights (the masked LM head of the export is not used by these endpoints).
    assert len(encoder.trainable_weights) == 5 + 2 * 16 + 2
    before = [w.numpy().copy() for w in encoder.trainable_weights]
    model.compile(keras.optimizers.Adam(3e-3),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(dataset, epochs=5, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < losses[0] - 0.05, losses
    changed = [np.abs(w.numpy() - b).max() for w, b in zip(encoder.trainable_weights, before)]
    assert min(changed) > 0, "every encoder weight receives a gradient"
    # The layer wraps the SavedModel's own variables: the loaded object holds the new values.
    loaded_values = [v.numpy() for v in encoder._reloaded_obj.trainable_variables]
    assert any(np.array_equal(encoder.trainable_weights[0].numpy(), value)
               for value in loaded_values)
    # Inference is deterministic (no dropout), training is not.
    first = encoder(features, training=False)["pooled_output"].numpy()
    np.testing.assert_array_equal(first, encoder(features, training=False)["pooled_output"].numpy())
    assert np.abs(encoder(features, training=True)["pooled_output"].numpy() - first).max() > 1e-3


def test_preprocess_dataset_pairs_and_batched_text(exports):
    import tensorflow as tf

    from bert_keras.export.savedmodel_layer import preprocess_dataset

    pairs = tf.data.Dataset.from_tensor_slices(((["bob lives", "who"], ["in paris", "alice"]),
                                                [0, 1]))
    features, label = next(iter(preprocess_dataset(pairs, exports["preprocessor"], seq_length=8)))
    assert features["input_word_ids"].shape == (8,) and int(label) == 0
    assert features["input_type_ids"].numpy().tolist() == [0, 0, 0, 0, 1, 1, 1, 0]
    features, _ = next(iter(preprocess_dataset(pairs, exports["preprocessor"])))
    assert features["input_word_ids"].shape == (16,)  # the export's default length
    batched = tf.data.Dataset.from_tensor_slices((["a b", "c"], [0, 1])).batch(2)
    features, _ = next(iter(preprocess_dataset(batched, exports["preprocessor"])))
    assert features["input_mask"].shape == (2, 16)


def test_frozen_encoder_keeps_its_weights(exports):
    import keras

    from bert_keras.export.savedmodel_layer import build_classifier_from_export

    model = build_classifier_from_export(exports["encoder"], num_classes=2, trainable=False)
    before = [w.numpy().copy() for w in model.encoder_layer.weights]
    assert not model.encoder_layer.trainable_weights
    inputs, labels = _toy_data(32)
    model.compile(keras.optimizers.Adam(1e-2),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(inputs, labels, batch_size=16, epochs=1, verbose=0)
    for w, b in zip(model.encoder_layer.weights, before):
        if w.trainable is False and "seed" in w.name:
            continue  # dropout seed states
        np.testing.assert_array_equal(w.numpy(), b)


def test_documented_recipe_without_bert_keras(exports):
    """The recipe of docs/export.md, in a process that cannot import bert_keras."""
    results = run_fresh('''
import keras

class SavedModelLayer(keras.layers.TFSMLayer):
    def _add_existing_weight(self, weight):
        name = weight.name.split(":")[0].replace("/", "_")
        self._track_variable(keras.Variable(initializer=weight, trainable=weight.trainable,
                                            dtype=weight.dtype, shape=weight.shape, name=name))

keras.utils.set_random_seed(0)
encoder = SavedModelLayer(ENCODER, call_endpoint="serve", call_training_endpoint="call_training",
                          trainable=True)
inputs = {name: keras.Input((None,), dtype="int32", name=name)
          for name in ("input_word_ids", "input_mask", "input_type_ids")}
pooled = encoder(inputs)["pooled_output"]
logits = keras.layers.Dense(2)(keras.layers.Dropout(0.1)(pooled))
model = keras.Model(inputs, logits)
model.compile(keras.optimizers.Adam(3e-3),
              keras.losses.SparseCategoricalCrossentropy(from_logits=True))
before = [w.numpy().copy() for w in encoder.trainable_weights]
history = model.fit(INPUTS, LABELS, batch_size=16, epochs=5, verbose=0, shuffle=False)
results["losses"] = history.history["loss"]
results["changed"] = min(float(np.abs(w.numpy() - b).max())
                         for w, b in zip(encoder.trainable_weights, before))
''', ENCODER=exports["encoder"], INPUTS=_toy_data()[0], LABELS=_toy_data()[1])
    assert results["losses"][-1] < results["losses"][0] - 0.05, results["losses"]
    assert results["changed"] > 0
