"""The compute dtype, decided in one place: the `--dtype` values every tool takes, whether this
machine computes bfloat16 natively (a TPU, a GPU of compute capability 8.0+, a CPU with
avx512_bf16 or AMX units), what "auto" becomes here, and the Keras policy of a value.

Example:

>>> mixed_precision_policy("bfloat16"), mixed_precision_policy("float32")
('mixed_bfloat16', 'float32')
>>> cpu_has_bfloat16_units(cpuinfo="/nonexistent")
False
"""

import logging
import os

MIXED_PRECISION_POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")
# The `--dtype` values every tool takes; a training tool computes in that dtype with float32
# variables (Keras' mixed policies), an export computes in it. The policy names are accepted too.
DTYPES = ("float32", "bfloat16", "float16")
# "auto": bfloat16 where the device computes it natively, float32 elsewhere (`resolve_dtype`).
AUTO_DTYPE = "auto"
DTYPE_FLAG_VALUES = (AUTO_DTYPE,) + DTYPES + MIXED_PRECISION_POLICIES[1:]


# oneDNN's instruction-set caps below its first bfloat16 level (`avx512_core_bf16`).
_ONEDNN_ISAS_WITHOUT_BFLOAT16 = frozenset({"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2",
                                           "AVX512_CORE", "AVX512_CORE_VNNI"})


def cpu_has_bfloat16_units(cpuinfo="/proc/cpuinfo", environ=None):
    """Whether this CPU computes bfloat16 natively (the `avx512_bf16` or `amx_bf16` flag).

    Reads Linux's /proc/cpuinfo; False where it cannot be read, and False when oneDNN, which runs
    TensorFlow's CPU matmuls, is capped below its bfloat16 instructions
    (`ONEDNN_MAX_CPU_ISA=AVX2`, say, or the older name `DNNL_MAX_CPU_ISA`).
    """
    environ = os.environ if environ is None else environ
    cap = environ.get("ONEDNN_MAX_CPU_ISA") or environ.get("DNNL_MAX_CPU_ISA") or ""
    if cap.upper() in _ONEDNN_ISAS_WITHOUT_BFLOAT16:
        return False
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return bool({"avx512_bf16", "amx_bf16"} & set(line.split(":", 1)[1].split()))
    except OSError:
        pass
    return False


def native_bfloat16(strategy=None):
    """(whether the device computes bfloat16 natively, the device in words).

    A TPU (a `TPUStrategy`, or TPU devices already connected) and a GPU of compute capability
    8.0 or more do; a CPU does with avx512_bf16 or AMX units. On the Keras JAX backend the
    devices are JAX's, and its CPU backend (XLA's) emulates bfloat16 matmuls whatever the CPU.
    """
    import keras

    if keras.backend.backend() == "jax":
        return _jax_native_bfloat16()
    import tensorflow as tf

    from bert_keras import distribution

    if (strategy is not None and distribution.is_tpu_strategy(strategy)) \
            or tf.config.list_logical_devices("TPU"):
        return True, "a TPU"
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        capability = tf.config.experimental.get_device_details(gpus[0]).get("compute_capability")
        if capability and tuple(capability) >= (8, 0):
            return True, f"a GPU of compute capability {capability[0]}.{capability[1]}"
        return False, "a GPU without bfloat16 units (compute capability below 8.0)"
    if cpu_has_bfloat16_units():
        return True, "a CPU with bfloat16 units (avx512_bf16 or AMX)"
    return False, ("a CPU without bfloat16 units (no avx512_bf16, no AMX, or oneDNN capped "
                   "below them by ONEDNN_MAX_CPU_ISA)")


def _jax_native_bfloat16():
    import jax

    device = jax.devices()[0]
    if device.platform == "tpu":
        return True, f"a TPU ({device.device_kind}, JAX)"
    if device.platform == "gpu":
        capability = getattr(device, "compute_capability", None)
        if capability and tuple(int(part) for part in str(capability).split(".")) >= (8, 0):
            return True, f"a GPU of compute capability {capability} (JAX)"
        return False, "a GPU without bfloat16 units (compute capability below 8.0; JAX)"
    return False, "a CPU under JAX (XLA's CPU backend emulates bfloat16 matmuls)"


def resolve_dtype(dtype, strategy=None):
    """A `--dtype` value with "auto" decided for this machine.

    "auto" becomes "bfloat16" where the device computes it natively (`native_bfloat16`) and
    "float32" elsewhere: on a CPU without bf16 units bfloat16 is emulated and slower than
    float32. An explicit bfloat16 there is kept, with a warning. Other values are returned as
    they are.

    >>> resolve_dtype("float16")
    'float16'
    """
    if dtype in (None, ""):
        return "float32"
    if dtype == AUTO_DTYPE:
        native, device = native_bfloat16(strategy)
        chosen = "bfloat16" if native else "float32"
        logging.getLogger("bert_keras").info("--dtype=auto: %s on %s", chosen, device)
        return chosen
    if dtype in ("bfloat16", "mixed_bfloat16"):
        native, device = native_bfloat16(strategy)
        if not native:
            logging.getLogger("bert_keras").warning(
                "--dtype=%s on %s: bfloat16 is emulated here and slower than float32 "
                "(--dtype=auto picks float32 on this machine)", dtype, device)
    return dtype


def mixed_precision_policy(dtype):
    """The Keras policy of a `--dtype` value: "float32", "mixed_bfloat16" or "mixed_float16";
    "auto" stays "auto" until `resolve_dtype` decides it for the device."""
    if dtype in (None, "", "float32"):
        return "float32"
    if dtype == AUTO_DTYPE:
        return AUTO_DTYPE
    policy = dtype if dtype.startswith("mixed_") else f"mixed_{dtype}"
    if policy not in MIXED_PRECISION_POLICIES:
        raise ValueError(f"unknown dtype {dtype!r}; use one of {DTYPES}")
    return policy


def dtype_option(default="float32", help="Compute dtype (variables stay float32; layer norms "
                 "and softmax compute in float32). auto: bfloat16 on TPUs, GPUs of compute "
                 "capability 8.0+ and CPUs with bf16 units (avx512_bf16, AMX), float32 elsewhere; "
                 "float16 for older GPUs (with loss scaling).", flag_default=AUTO_DTYPE):
    """The compute dtype as every training tool takes it: the flag `--dtype` (`flag_default`,
    "auto" unless a tool says otherwise), the Keras policy name in the options field
    (`mixed_precision`)."""
    from bert_keras.common.cli import option

    return option(default, help, flag="dtype", choices=DTYPE_FLAG_VALUES,
                  flag_default=flag_default, from_flag=mixed_precision_policy,
                  aliases=("mixed_precision",))


__all__ = ["MIXED_PRECISION_POLICIES", "DTYPES", "AUTO_DTYPE", "DTYPE_FLAG_VALUES",
           "cpu_has_bfloat16_units", "native_bfloat16", "resolve_dtype", "mixed_precision_policy",
           "dtype_option"]
