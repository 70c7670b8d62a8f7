"""Choosing a `tf.distribute.Strategy`: TPU first, then several GPUs, several workers, or one device.

`resolve_strategy("auto")` picks, in this order:

1. `TPUStrategy` when a TPU is reachable: a `tpu` address was given, or the environment names one
   (`TPU_NAME`, `COLAB_TPU_ADDR`, `TPU_ACCELERATOR_TYPE`, or a TPU VM's `/dev/accel0` / `/dev/vfio`
   devices; on Colab's TPU VM runtime the resolver address is "local");
2. `MultiWorkerMirroredStrategy` when `TF_CONFIG` describes a cluster of more than one task;
3. `MirroredStrategy` over all GPUs when there are two or more;
4. otherwise TensorFlow's default strategy (one GPU, or the CPU).

Everything the training step touches must be created under `strategy.scope()`.

On the Keras JAX backend there is no `tf.distribute` strategy: `initialize_processes` joins the
processes of one run (one per host of a TPU pod slice or GPU node) through
`keras.distribution.initialize`, and `keras_data_parallel` spreads each batch over the devices
of every process.

Example:

>>> from bert_keras.distribution import resolve_strategy
>>> strategy = resolve_strategy("cpu")
>>> strategy.num_replicas_in_sync
1
"""

import json
import os

from absl import logging

from bert_keras.common.errors import BertKerasError

# Keras' variables for a multi-process run (`keras.distribution.initialize` reads them).
PROCESS_VARIABLES = ("KERAS_DISTRIBUTION_JOB_ADDRESSES", "KERAS_DISTRIBUTION_NUM_PROCESSES",
                     "KERAS_DISTRIBUTION_PROCESS_ID")
AUTO = "auto"  # --coordinator_address=auto: JAX's own detection (Cloud TPU, Slurm, Open MPI)

STRATEGY_NAMES = ("auto", "tpu", "gpu", "multi_worker", "mirrored", "cpu")

_TPU_ENVIRONMENT = ("TPU_NAME", "COLAB_TPU_ADDR", "TPU_ACCELERATOR_TYPE")
_TPU_VM_DEVICES = ("/dev/accel0", "/dev/vfio/0")


class StrategyError(BertKerasError):
    """The requested strategy cannot be created on this machine."""


def split_cpu(num_devices):
    """Splits the physical CPU into `num_devices` logical devices ("/cpu:0", "/cpu:1", ...).

    Must run before TensorFlow initializes its devices (before any op runs); used to exercise
    `MirroredStrategy` without accelerators.
    """
    import tensorflow as tf
    if num_devices <= 1:
        return
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(num_devices)])
    except RuntimeError as error:
        raise StrategyError(
            f"cannot split the CPU into {num_devices} devices: TensorFlow is already initialized "
            f"({error}); do it at the start of the program") from error


def process_cluster(coordinator_address=None, num_processes=0, process_id=-1, environ=None):
    """How this process joins a multi-process run on the JAX backend, without joining it:
    None (one process), "auto" (JAX's own detection: Cloud TPU pod slices, Slurm, Open MPI),
    or (coordinator address, number of processes, this process's id).

    The flags win; what they leave out comes from Keras' `KERAS_DISTRIBUTION_*` variables.

    >>> process_cluster(environ={}) is None
    True
    >>> process_cluster("10.0.0.1:1234", 4, 2, environ={})
    ('10.0.0.1:1234', 4, 2)
    >>> process_cluster(environ={"KERAS_DISTRIBUTION_JOB_ADDRESSES": "10.0.0.1:1234,10.0.0.2:1234",
    ...                          "KERAS_DISTRIBUTION_NUM_PROCESSES": "2",
    ...                          "KERAS_DISTRIBUTION_PROCESS_ID": "1"})
    ('10.0.0.1:1234', 2, 1)
    >>> process_cluster("auto", environ={})
    'auto'
    """
    environ = os.environ if environ is None else environ
    if coordinator_address == AUTO:
        return AUTO
    address = coordinator_address or environ.get(PROCESS_VARIABLES[0]) or None
    count = num_processes or int(environ.get(PROCESS_VARIABLES[1]) or 0)
    if address and "," in address and not count:
        count = len(address.split(","))  # Keras' variable may list every process
    index = process_id if process_id is not None and process_id >= 0 else int(
        environ.get(PROCESS_VARIABLES[2]) or -1)
    if address is None and count <= 1 and index < 0:
        return None
    if count == 1 and index <= 0:
        return None
    missing = [name for name, value, variable in (
        ("--coordinator_address", address, PROCESS_VARIABLES[0]),
        ("--num_processes", count, PROCESS_VARIABLES[1]),
        ("--process_id", index >= 0, PROCESS_VARIABLES[2])) if not value]
    if missing:
        raise StrategyError(
            "a multi-process run needs the coordinator's address, the number of processes and "
            f"this process's id; missing: {', '.join(missing)} (or Keras' "
            f"{', '.join(PROCESS_VARIABLES)}); on a Cloud TPU pod slice, Slurm or Open MPI "
            f"--coordinator_address={AUTO} lets JAX find them")
    address = address.split(",")[0]  # Keras' variable lists every process; JAX wants process 0
    if not 0 <= index < count:
        raise StrategyError(f"--process_id={index} must be in [0, {count}) (--num_processes)")
    return address, count, index


def initialize_processes(coordinator_address=None, num_processes=0, process_id=-1):
    """Joins this process to a multi-process run on the Keras JAX backend (`process_cluster`):
    `keras.distribution.initialize` with the CPU collectives of JAX (gloo) on. Must run before
    any other JAX call; does nothing on another backend, for one process, or once joined.
    Returns (number of processes, this process's index).

    >>> initialize_processes()  # one process
    (1, 0)
    """
    import keras

    if keras.backend.backend() != "jax":
        return 1, 0
    import jax

    cluster = process_cluster(coordinator_address, num_processes, process_id)
    if cluster is not None and not jax.distributed.is_initialized():
        try:
            # CPUs (tests, CPU clusters) talk over gloo; accelerators use their own collectives.
            jax.config.update("jax_cpu_collectives_implementation", "gloo")
        except (AttributeError, ValueError):  # a JAX without the option: its default
            pass
        if cluster == AUTO:
            keras.distribution.initialize()
        else:
            address, count, index = cluster
            keras.distribution.initialize(address, count, index)
        logging.info("process %d of %d, %d of %d devices here", jax.process_index(),
                     jax.process_count(), jax.local_device_count(), jax.device_count())
    if not jax.distributed.is_initialized():
        return 1, 0
    return jax.process_count(), jax.process_index()


def tpu_is_likely_reachable(environ=None, device_paths=_TPU_VM_DEVICES):
    """Whether the environment names a TPU (no connection is attempted)."""
    environ = os.environ if environ is None else environ
    if any(environ.get(name) for name in _TPU_ENVIRONMENT):
        return True
    return any(os.path.exists(path) for path in device_paths)


def tf_config_cluster_size(environ=None):
    """Number of tasks in `TF_CONFIG`'s cluster (0 when unset); raises on malformed JSON."""
    environ = os.environ if environ is None else environ
    text = environ.get("TF_CONFIG")
    if not text:
        return 0
    try:
        cluster = json.loads(text).get("cluster", {})
    except (json.JSONDecodeError, AttributeError) as error:
        raise StrategyError(f"TF_CONFIG is not a JSON object with a 'cluster' ({error})") from error
    return sum(len(tasks) for name, tasks in cluster.items() if name in ("chief", "worker"))


def choose_strategy_kind(name, tpu=None, environ=None, num_gpus=0, tpu_reachable=None):
    """The kind of strategy `resolve_strategy(name, tpu)` builds, without building it.

    Returns one of "tpu", "multi_worker", "mirrored", "one_device_gpu", "default".
    """
    if name not in STRATEGY_NAMES:
        raise StrategyError(f"unknown strategy {name!r}; use one of {STRATEGY_NAMES}")
    if name == "tpu":
        return "tpu"
    if name == "multi_worker":
        return "multi_worker"
    if name == "mirrored":
        return "mirrored"
    if name == "gpu":
        if num_gpus == 0:
            raise StrategyError("--strategy=gpu but TensorFlow sees no GPU")
        return "mirrored" if num_gpus > 1 else "one_device_gpu"
    if name == "cpu":
        return "default"
    # auto
    if tpu_reachable is None:
        tpu_reachable = bool(tpu) or tpu_is_likely_reachable(environ)
    if tpu_reachable:
        return "tpu"
    if tf_config_cluster_size(environ) > 1:
        return "multi_worker"
    if num_gpus > 1:
        return "mirrored"
    return "default"


def _tpu_strategy(tpu):
    import tensorflow as tf
    # Colab's TPU runtime and every TPU VM reach the TPU as "local"; a TPU Node needs its
    # name or grpc:// address.
    address = tpu or os.environ.get("TPU_NAME") or os.environ.get("COLAB_TPU_ADDR")
    if address and "://" not in address and ":" in address and address != "local":
        address = f"grpc://{address}"
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=address or "local")
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


def accelerator(strategy=None):
    """("TPU" | "GPU" | "CPU", the number of devices that train): JAX's devices on the Keras
    JAX backend, else `strategy`'s (a TPUStrategy's cores, the GPUs, or the CPU).

    >>> kind, count = accelerator()
    >>> kind in ("TPU", "GPU", "CPU") and count >= 1
    True
    """
    import keras

    if keras.backend.backend() == "jax":
        import jax

        devices = jax.devices()
        return devices[0].platform.upper(), len(devices)
    import tensorflow as tf

    if strategy is not None and is_tpu_strategy(strategy):
        return "TPU", strategy.num_replicas_in_sync
    gpus = tf.config.list_logical_devices("GPU")
    if gpus:
        return "GPU", strategy.num_replicas_in_sync if strategy is not None else len(gpus)
    return "CPU", strategy.num_replicas_in_sync if strategy is not None else 1


def keras_data_parallel(batch_sizes):
    """On a Keras backend other than TensorFlow with several devices (the chips of a TPU v5e-8,
    the GPUs of a machine, and in a multi-process run those of every process):
    `keras.distribution.DataParallel` over all of them, each batch split among the devices;
    None on TensorFlow (its strategies do this) and on one device. `batch_sizes` is {flag name:
    global batch size}; each must divide among the devices, or the error names the flag.

    Each process feeds its own share of the batch from its own record files, so Keras' sharding
    of a `tf.data` stream among processes is off (it would read every record on every host).

    >>> keras_data_parallel({"train_batch_size": 32}) is None  # TensorFlow, or one device
    True
    """
    import keras

    if keras.backend.backend() == "tensorflow":
        return None
    devices = keras.distribution.list_devices()
    if len(devices) < 2:
        return None
    for flag, size in batch_sizes.items():
        if size % len(devices):
            raise StrategyError(f"--{flag}={size} must be a multiple of the {len(devices)} "
                                f"devices it is split over ({devices[0]}, ...)")
    logging.info("data parallel over %d devices: %s", len(devices), ", ".join(devices))
    return keras.distribution.DataParallel(devices=devices, auto_shard_dataset=False)


def keras_scope(data_parallel):
    """The scope in which to build, train and predict: `data_parallel`'s (from
    `keras_data_parallel`), or none."""
    import contextlib

    return contextlib.nullcontext() if data_parallel is None else data_parallel.scope()


def resolve_strategy(name="auto", tpu=None, devices=None):
    """Builds the `tf.distribute.Strategy` for `--strategy` (see the module docstring).

    Args:
      name: one of `STRATEGY_NAMES`. "mirrored" mirrors over `devices`, or all GPUs, or all
        logical CPUs when there is no GPU (see `split_cpu`); "cpu" is the default strategy with
        GPUs ignored by the step placement.
      tpu: TPU address for `TPUClusterResolver` ("local" on a TPU VM / Colab, a name, or
        `grpc://host:port`).
      devices: explicit device list for "mirrored".

    On a Keras backend other than TensorFlow (JAX) the backend holds the accelerators and
    TensorFlow only feeds the input pipeline on the CPU: "auto" (and "cpu") give TensorFlow's
    default strategy there, without touching a TPU or GPU; any other name is refused.
    """
    import keras
    import tensorflow as tf

    if keras.backend.backend() != "tensorflow":
        if name not in ("auto", "cpu"):
            raise StrategyError(f"--strategy={name} is a tf.distribute strategy, which the Keras "
                                f"{keras.backend.backend()} backend does not use: leave it at "
                                f"auto (that backend trains on its own devices), or set "
                                f"KERAS_BACKEND=tensorflow")
        return tf.distribute.get_strategy()
    # Physical devices: listing logical ones would initialize TensorFlow's runtime, after which
    # a MultiWorkerMirroredStrategy can no longer configure its collective ops.
    num_gpus = len(tf.config.list_physical_devices("GPU"))
    kind = choose_strategy_kind(name, tpu=tpu, num_gpus=num_gpus)
    if kind == "tpu":
        try:
            strategy = _tpu_strategy(tpu)
        except Exception as error:  # the resolver raises several unrelated types
            if name == "tpu":
                raise StrategyError(f"cannot reach a TPU at {tpu or 'local'!r}: {error}") from error
            logging.warning("no TPU reachable (%s); falling back to the devices at hand", error)
            kind = choose_strategy_kind("auto", num_gpus=num_gpus, tpu_reachable=False)
        else:
            logging.info("TPUStrategy with %d cores", strategy.num_replicas_in_sync)
            return strategy
    if kind == "multi_worker":
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
    elif kind == "mirrored":
        gpus = tf.config.list_logical_devices("GPU")
        if devices is None:
            devices = [d.name for d in gpus] or [d.name for d in tf.config.list_logical_devices("CPU")]
        strategy = tf.distribute.MirroredStrategy(devices)
    elif kind == "one_device_gpu":
        strategy = tf.distribute.OneDeviceStrategy(tf.config.list_logical_devices("GPU")[0].name)
    else:
        strategy = tf.distribute.get_strategy()
    logging.info("%s with %d replica(s)", type(strategy).__name__, strategy.num_replicas_in_sync)
    return strategy


def is_tpu_strategy(strategy):
    import tensorflow as tf
    return isinstance(strategy, (tf.distribute.TPUStrategy,))


def is_chief(strategy):
    """Whether this task writes the shared outputs (always true outside multi-worker training)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not getattr(resolver, "task_type", None):
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    return task_type == "chief" or (task_type == "worker" and task_id == 0
                                     and "chief" not in resolver.cluster_spec().as_dict())


def task_id(strategy):
    resolver = getattr(strategy, "cluster_resolver", None)
    return getattr(resolver, "task_id", 0) or 0


def strategy_option(default="auto"):
    """The `--strategy` option of every training tool (`bert_keras.common.cli.option`)."""
    from bert_keras.common.cli import option

    return option(default, "Distribution strategy. auto: a TPU if reachable, else TF_CONFIG's "
                  "workers, else all GPUs, else the default device. mirrored: MirroredStrategy "
                  "over GPUs, or the logical CPUs.", choices=STRATEGY_NAMES)


def tpu_option():
    """The `--tpu` option of every training tool."""
    from bert_keras.common.cli import option

    return option(None, "TPU address for TPUClusterResolver ('local' on a TPU VM or Colab).")


__all__ = ["strategy_option", "tpu_option", "process_cluster",
           "initialize_processes", "PROCESS_VARIABLES", "STRATEGY_NAMES", "StrategyError", "accelerator", "keras_data_parallel", "keras_scope", "resolve_strategy", "choose_strategy_kind",
           "split_cpu", "tpu_is_likely_reachable", "tf_config_cluster_size", "is_tpu_strategy",
           "is_chief", "task_id"]
