"""Fine-tuning from an exported encoder with Keras 3 (`TFSMLayer`, trainable, training endpoint)."""

import numpy as np
import pytest

from export_helpers import run_fresh, word_vocab, write_pretrained_dir


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


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    from bert_keras.export import export_encoder_from_model_dir

    root = tmp_path_factory.mktemp("finetune_export")
    model_dir = str(root / "model")
    write_pretrained_dir(model_dir, word_vocab())
    export_encoder_from_model_dir(model_dir, str(root / "encoder"))
    return {"root": root, "model_dir": model_dir, "encoder": str(root / "encoder")}


def test_classifier_from_export_trains_its_encoder(exports):
    import keras

    from bert_keras.export.savedmodel_layer import build_classifier_from_export

    keras.utils.set_random_seed(0)
    model = build_classifier_from_export(exports["encoder"], num_classes=2, dropout_rate=0.1)
    encoder = model.encoder_layer
    # The encoder's weights (the masked LM head of the export is not used by these endpoints).
    assert len(encoder.trainable_weights) == 5 + 2 * 16 + 2
    before = [w.numpy().copy() for w in encoder.trainable_weights]
    inputs, labels = _toy_data()
    model.compile(keras.optimizers.Adam(3e-3),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(inputs, labels, batch_size=16, epochs=5, verbose=0, shuffle=False)
    losses = history.history["loss"]
    assert losses[-1] < losses[0] - 0.05, losses
    changed = [np.abs(w.numpy() - b).max() for w, b in zip(encoder.trainable_weights, before)]
    assert min(changed) > 0, "every encoder weight receives a gradient"
    # The layer wraps the SavedModel's own variables: the loaded object sees the new values.
    loaded_values = {v.name: v.numpy() for v in encoder._reloaded_obj.trainable_variables}
    assert any(np.array_equal(w.numpy(), value) for w in encoder.trainable_weights
               for value in loaded_values.values())
    # Inference is deterministic (no dropout), training is not.
    first = encoder(inputs, training=False)["pooled_output"].numpy()
    np.testing.assert_array_equal(first, encoder(inputs, training=False)["pooled_output"].numpy())
    assert np.abs(encoder(inputs, training=True)["pooled_output"].numpy() - first).max() > 1e-3


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
