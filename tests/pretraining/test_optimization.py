"""The optimizers and the schedule against the released BERT / LAMB update rules written in NumPy."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_keras import optimization, precision
from bert_keras.model.config import BertConfig
from bert_keras.model.pretraining_model import build_pretraining_model, pretraining_weight_map


def reference_learning_rate(step, peak, warmup, total):
    """The released `create_optimizer`: polynomial (power 1) decay over all steps, warm-up first."""
    decayed = peak * (1.0 - min(step, total) / total)
    if warmup and step < warmup:
        return peak * step / warmup
    return decayed


def test_schedule_matches_the_released_code():
    schedule = optimization.WarmupLinearDecay(2e-4, warmup_steps=10, total_steps=50)
    for step in (0, 1, 5, 9, 10, 11, 30, 49, 50, 70):
        assert float(schedule(step)) == pytest.approx(reference_learning_rate(step, 2e-4, 10, 50), abs=1e-10)
    no_warmup = optimization.WarmupLinearDecay(1.0, warmup_steps=0, total_steps=4)
    assert [float(no_warmup(step)) for step in range(5)] == [1.0, 0.75, 0.5, 0.25, 0.0]
    with pytest.raises(ValueError):
        optimization.WarmupLinearDecay(1e-4, warmup_steps=20, total_steps=10)


def _variables(rng):
    names = ("bert/encoder/layer_0/output/dense/kernel", "bert/encoder/layer_0/output/dense/bias",
             "bert/embeddings/LayerNorm/gamma")
    shapes = ((3, 2), (2,), (4,))
    return {name: keras.Variable(rng.standard_normal(shape).astype("float32"), name=name.split("/")[-1])
            for name, shape in zip(names, shapes)}


def _grads(rng, variable_map, scale):
    return [scale * rng.standard_normal(v.shape).astype("float32") for v in variable_map.values()]


def _clip(grads, clip_norm):
    norm = np.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in grads))
    return [g * clip_norm / max(norm, clip_norm) for g in grads], norm


@pytest.mark.parametrize("fused", [False, True], ids=["ops", "one_xla_loop"])
@pytest.mark.parametrize("bias_correction", [True, False], ids=["adamw", "released_uncorrected"])
def test_adamw_matches_adam_with_decoupled_weight_decay(bias_correction, fused, monkeypatch):
    """True: Adam's bias-corrected moments (PyTorch's and Keras' AdamW); False: the released
    `AdamWeightDecayOptimizer`, which has no bias correction. Both ways of computing it: the
    separate ops (small variables) and one XLA-compiled loop (large ones)."""
    monkeypatch.setattr(optimization, "_FUSED_MIN_SIZE", 0 if fused else 1 << 40)
    rng = np.random.default_rng(0)
    variable_map = _variables(rng)
    weights = {name: v.numpy().astype(np.float64) for name, v in variable_map.items()}
    optimizer = optimization.create_optimizer(variable_map, learning_rate=0.1, num_train_steps=10,
                                              num_warmup_steps=2, bias_correction=bias_correction)
    m = {name: 0.0 for name in weights}
    v = {name: 0.0 for name in weights}
    norms = []
    for step in range(4):
        grads = _grads(rng, variable_map, scale=3.0 if step % 2 == 0 else 0.05)
        optimizer.apply(grads, list(variable_map.values()))
        clipped, norm = _clip(grads, 1.0)
        norms.append(norm)
        lr = reference_learning_rate(step, 0.1, 2, 10)
        for (name, w), g in zip(weights.items(), clipped):
            m[name] = 0.9 * m[name] + 0.1 * g
            v[name] = 0.999 * v[name] + 0.001 * g * g
            m_hat, v_hat = m[name], v[name]
            if bias_correction:
                m_hat = m_hat / (1 - 0.9 ** (step + 1))
                v_hat = v_hat / (1 - 0.999 ** (step + 1))
            update = m_hat / (np.sqrt(v_hat) + 1e-6)
            if not any(part in name for part in ("LayerNorm", "layer_norm", "bias")):
                update = update + 0.01 * w
            weights[name] = w - lr * update
    assert max(norms) > 1.0 > min(norms)  # both clipped and unclipped steps were exercised
    for name, variable in variable_map.items():
        np.testing.assert_allclose(variable.numpy(), weights[name], rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("rule", ["adamw", "adamw_one_xla_loop", "lamb"])
def test_an_embedding_gradient_without_clipping_updates_like_its_dense_sum(rule, monkeypatch):
    """A gathered embedding's gradient is IndexedSlices, with a row once per occurrence; nothing
    densifies it when clipping is off (fine-tuning with clip_norm=0 used to fail here with a
    TypeError). The update equals the one of the dense gradient, repeated rows summed."""
    monkeypatch.setattr(optimization, "_FUSED_MIN_SIZE", 0 if rule == "adamw_one_xla_loop" else 1 << 40)
    rng = np.random.default_rng(0)
    table = rng.standard_normal((6, 4)).astype("float32")
    rows = np.array([1, 3, 1, 1, 5])
    values = rng.standard_normal((len(rows), 4)).astype("float32")
    dense = np.zeros_like(table)
    np.add.at(dense, rows, values)
    updated = []
    for gradient in (tf.IndexedSlices(tf.constant(values), tf.constant(rows), tf.constant([6, 4])),
                     tf.constant(dense)):
        variable = keras.Variable(table, name="word_embeddings")
        optimizer = optimization.create_optimizer(
            {"bert/embeddings/word_embeddings": variable}, learning_rate=0.1, num_train_steps=10,
            num_warmup_steps=0, optimizer="lamb" if rule == "lamb" else "adamw", clip_norm=0)
        for _ in range(2):
            optimizer.apply([gradient], [variable])
        updated.append(variable.numpy())
    np.testing.assert_allclose(updated[0], updated[1], rtol=1e-6, atol=1e-7)
    assert not np.allclose(updated[0], table)


def test_global_norm_clipping_equals_keras_clip_by_global_norm():
    """The one-pass norm (TensorFlow) scales like Keras' `clip_by_global_norm` and the released
    `tf.clip_by_global_norm`: a gathered embedding's rows counted once per occurrence (not
    summed first), NaN everywhere for a non-finite norm, no scaling under the clip norm."""
    from keras.src.optimizers.base_optimizer import clip_by_global_norm

    rng = np.random.default_rng(2)
    rows, values = np.array([1, 3, 1]), rng.standard_normal((3, 4)).astype("float32")
    kernel = rng.standard_normal((4, 3)).astype("float32") * 3
    sliced = tf.IndexedSlices(tf.constant(values), tf.constant(rows), tf.constant([6, 4]))
    released_norm = float(tf.linalg.global_norm([sliced, tf.constant(kernel)]))
    assert released_norm == pytest.approx(np.sqrt((values ** 2).sum() + (kernel ** 2).sum()))
    for clip_norm in (1.0, 100.0):
        ours = optimization._clip_by_global_norm_tf([sliced, tf.constant(kernel), None], clip_norm)
        keras_clipped = clip_by_global_norm([sliced, tf.constant(kernel), None], clip_norm)
        released, _ = tf.clip_by_global_norm([sliced, tf.constant(kernel)], clip_norm)
        assert ours[2] is None and isinstance(ours[0], tf.IndexedSlices)
        np.testing.assert_allclose(tf.convert_to_tensor(ours[0]),
                                   tf.convert_to_tensor(keras_clipped[0]), rtol=1e-6)
        np.testing.assert_allclose(tf.convert_to_tensor(ours[0]),
                                   tf.convert_to_tensor(released[0]), rtol=1e-6)
        np.testing.assert_allclose(ours[1], keras_clipped[1], rtol=1e-6)
        np.testing.assert_allclose(ours[1], released[1], rtol=1e-6)
    assert released_norm > 1.0  # clip_norm 1.0 scaled; 100.0 left the gradients as they were
    np.testing.assert_array_equal(ours[1], kernel)
    kernel[0, 0] = np.inf
    assert np.isnan(optimization._clip_by_global_norm_tf([tf.constant(kernel)], 1.0)[0]).all()


def test_lamb_matches_the_paper_update():
    rng = np.random.default_rng(1)
    variable_map = _variables(rng)
    weights = {name: v.numpy().astype(np.float64) for name, v in variable_map.items()}
    optimizer = optimization.create_optimizer(variable_map, learning_rate=0.01, num_train_steps=100,
                                              num_warmup_steps=0, optimizer="lamb", clip_norm=0)
    m = {name: 0.0 for name in weights}
    v = {name: 0.0 for name in weights}
    for step in range(3):
        grads = _grads(rng, variable_map, scale=0.5)
        optimizer.apply(grads, list(variable_map.values()))
        lr = reference_learning_rate(step, 0.01, 0, 100)
        for (name, w), g in zip(weights.items(), grads):
            m[name] = 0.9 * m[name] + 0.1 * g
            v[name] = 0.999 * v[name] + 0.001 * g * g
            m_hat = m[name] / (1 - 0.9 ** (step + 1))
            v_hat = v[name] / (1 - 0.999 ** (step + 1))
            update = m_hat / (np.sqrt(v_hat) + 1e-6)
            if not any(part in name for part in ("LayerNorm", "bias")):
                update = update + 0.01 * w
                update = update * np.linalg.norm(w) / np.linalg.norm(update)
            weights[name] = w - lr * update
    for name, variable in variable_map.items():
        np.testing.assert_allclose(variable.numpy(), weights[name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_no_decay_variables_follow_the_original_names():
    model = build_pretraining_model(BertConfig.from_preset("tiny", vocab_size=30))
    variable_map = pretraining_weight_map(model)
    excluded = {id(v) for v in optimization.no_decay_variables(variable_map)}
    for name, variable in variable_map.items():
        expect_excluded = name.endswith(("/gamma", "/beta", "bias"))
        assert (id(variable) in excluded) == expect_excluded, name
    # Keras' own weight-decay machinery sees the same choice.
    optimizer = optimization.create_optimizer(variable_map, 1e-4, 10, 1)
    for name, variable in variable_map.items():
        assert optimizer._use_weight_decay(variable) == (id(variable) not in excluded), name


def test_gradient_accumulation_equals_the_whole_batch():
    rng = np.random.default_rng(2)
    kernel = tf.Variable(rng.standard_normal((3, 2)).astype("float32"))
    batch = {"x": tf.constant(rng.standard_normal((8, 3)).astype("float32")),
             "y": tf.constant(rng.standard_normal((8, 2)).astype("float32"))}

    def compute_loss(micro_batch):
        error = tf.matmul(micro_batch["x"], kernel) - micro_batch["y"]
        loss = tf.reduce_sum(error ** 2) / 8.0  # normalized by the whole batch
        return loss, {"count": tf.cast(tf.shape(error)[0], tf.float32)}

    whole, stats = optimization.accumulate_gradients(compute_loss, batch, [kernel], 1)
    for parts in (2, 4):
        accumulated, parts_stats = tf.function(
            lambda b: optimization.accumulate_gradients(compute_loss, b, [kernel], parts))(batch)
        np.testing.assert_allclose(accumulated[0].numpy(), whole[0].numpy(), rtol=1e-5, atol=1e-6)
        assert float(parts_stats["count"]) == float(stats["count"]) == 8.0


def test_float16_loss_scaling_unscales_and_skips_non_finite_steps():
    rng = np.random.default_rng(3)
    plain_map, scaled_map = _variables(rng), None
    scaled_map = {name: keras.Variable(v.numpy(), name=v.name) for name, v in plain_map.items()}
    plain = optimization.create_optimizer(plain_map, 0.1, 10, 0)
    scaled = optimization.create_optimizer(scaled_map, 0.1, 10, 0, mixed_precision="mixed_float16")
    assert isinstance(scaled, keras.optimizers.LossScaleOptimizer)
    grads = _grads(rng, plain_map, scale=2.0)
    scale = float(scaled.scale_loss(1.0))
    assert scale > 1.0
    plain.apply(grads, list(plain_map.values()))
    scaled.apply([g * scale for g in grads], list(scaled_map.values()))
    for name in plain_map:
        np.testing.assert_allclose(scaled_map[name].numpy(), plain_map[name].numpy(), rtol=1e-5, err_msg=name)
    before = {name: v.numpy().copy() for name, v in scaled_map.items()}
    bad = [g * np.float32("inf") for g in grads]
    scaled.apply(bad, list(scaled_map.values()))
    for name in scaled_map:
        np.testing.assert_array_equal(scaled_map[name].numpy(), before[name])
    assert float(scaled.scale_loss(1.0)) == scale / 2


def test_rejects_unknown_choices():
    variable_map = _variables(np.random.default_rng(4))
    with pytest.raises(ValueError, match="optimizer"):
        optimization.create_optimizer(variable_map, 1e-4, 10, 1, optimizer="sgd")
    with pytest.raises(ValueError, match="mixed_precision"):
        optimization.create_optimizer(variable_map, 1e-4, 10, 1, mixed_precision="float16")


# ------------------------------------------------------------------------------ --dtype=auto
def _cpuinfo(tmp_path, flags):
    path = tmp_path / "cpuinfo"
    path.write_text(f"processor\t: 0\nmodel name\t: test\nflags\t\t: {flags}\n\n")
    return str(path)


def test_cpu_bfloat16_units_are_read_from_the_cpu_flags(tmp_path):
    assert optimization.cpu_has_bfloat16_units(_cpuinfo(tmp_path, "fpu avx2 avx512f avx512_bf16"))
    assert optimization.cpu_has_bfloat16_units(_cpuinfo(tmp_path, "fpu avx2 amx_bf16 amx_tile"))
    assert not optimization.cpu_has_bfloat16_units(_cpuinfo(tmp_path, "fpu avx2 fma avx512f"))
    assert not optimization.cpu_has_bfloat16_units(str(tmp_path / "missing"))


def test_a_onednn_isa_cap_below_bfloat16_hides_the_units(tmp_path):
    cpuinfo = _cpuinfo(tmp_path, "fpu avx2 avx512f avx512_bf16 amx_bf16")
    assert not optimization.cpu_has_bfloat16_units(cpuinfo, {"ONEDNN_MAX_CPU_ISA": "AVX2"})
    assert not optimization.cpu_has_bfloat16_units(cpuinfo, {"DNNL_MAX_CPU_ISA": "avx512_core"})
    assert optimization.cpu_has_bfloat16_units(cpuinfo, {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"})
    assert optimization.cpu_has_bfloat16_units(cpuinfo, {"ONEDNN_MAX_CPU_ISA": "ALL"})
    assert optimization.cpu_has_bfloat16_units(cpuinfo, {})


def test_the_precision_module_s_docstring_examples_run():
    import doctest

    result = doctest.testmod(precision)
    assert result.failed == 0 and result.attempted >= 3


def test_auto_dtype_is_bfloat16_only_on_native_units(monkeypatch, caplog):
    import tensorflow as tf

    if tf.config.list_physical_devices("GPU") or tf.config.list_logical_devices("TPU"):
        pytest.skip("decided by the accelerator here")
    for native, expected in ((True, "bfloat16"), (False, "float32")):
        monkeypatch.setattr(precision, "cpu_has_bfloat16_units", lambda native=native: native)
        assert optimization.resolve_dtype("auto") == expected
        assert optimization.mixed_precision_policy(optimization.resolve_dtype("auto")) == (
            "mixed_bfloat16" if native else "float32")
    # An explicit bfloat16 on a CPU without bf16 units is kept, with a warning.
    with caplog.at_level("WARNING", logger="bert_keras"):
        assert optimization.resolve_dtype("bfloat16") == "bfloat16"
    assert "slower than float32" in caplog.text and "without bfloat16 units" in caplog.text
    caplog.clear()
    monkeypatch.setattr(precision, "cpu_has_bfloat16_units", lambda: True)
    with caplog.at_level("WARNING", logger="bert_keras"):
        assert optimization.resolve_dtype("mixed_bfloat16") == "mixed_bfloat16"
    assert caplog.text == ""
    assert optimization.resolve_dtype("float16") == "float16"
    assert optimization.mixed_precision_policy("auto") == "auto"


def test_pretraining_auto_dtype_follows_the_device(monkeypatch):
    from bert_keras.pretraining import run as pretraining

    options = pretraining.PretrainingOptions(input_files="x", output_dir="y", config="tiny",
                                             vocab_file="v", mixed_precision="auto")
    options.validate()
    import tensorflow as tf

    monkeypatch.setattr(precision, "native_bfloat16", lambda strategy=None: (False, "a CPU"))
    pretraining._resolve_precision(options, tf.distribute.get_strategy())
    assert options.mixed_precision == "float32"
    options.mixed_precision = "auto"
    monkeypatch.setattr(precision, "native_bfloat16", lambda strategy=None: (True, "a TPU"))
    pretraining._resolve_precision(options, tf.distribute.get_strategy())
    assert options.mixed_precision == "mixed_bfloat16"
