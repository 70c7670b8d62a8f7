"""Strategy resolution: which strategy `--strategy=auto` picks, and clear errors otherwise."""

import json

import pytest
import tensorflow as tf

from bert_keras import distribution
from bert_keras.distribution import StrategyError, choose_strategy_kind

NO_DEVICES = ("/nonexistent/accel0",)


def _tf_config(workers):
    return json.dumps({"cluster": {"worker": [f"host{i}:2222" for i in range(workers)]},
                       "task": {"type": "worker", "index": 0}})


def test_auto_prefers_a_tpu_then_workers_then_gpus():
    assert choose_strategy_kind("auto", environ={"COLAB_TPU_ADDR": "10.0.0.2:8470"}) == "tpu"
    assert choose_strategy_kind("auto", environ={"TPU_NAME": "my-tpu"}, num_gpus=8) == "tpu"
    assert choose_strategy_kind("auto", tpu="local", environ={}) == "tpu"
    assert choose_strategy_kind("auto", environ={"TF_CONFIG": _tf_config(2)}, num_gpus=4,
                                tpu_reachable=False) == "multi_worker"
    assert choose_strategy_kind("auto", environ={"TF_CONFIG": _tf_config(1)}, num_gpus=2,
                                tpu_reachable=False) == "mirrored"
    assert choose_strategy_kind("auto", environ={}, num_gpus=1, tpu_reachable=False) == "default"
    assert choose_strategy_kind("auto", environ={}, num_gpus=0, tpu_reachable=False) == "default"


def test_explicit_names():
    assert choose_strategy_kind("tpu") == "tpu"
    assert choose_strategy_kind("gpu", num_gpus=1) == "one_device_gpu"
    assert choose_strategy_kind("gpu", num_gpus=4) == "mirrored"
    assert choose_strategy_kind("cpu", num_gpus=4) == "default"
    assert choose_strategy_kind("multi_worker") == "multi_worker"
    with pytest.raises(StrategyError, match="no GPU"):
        choose_strategy_kind("gpu", num_gpus=0)
    with pytest.raises(StrategyError, match="unknown strategy"):
        choose_strategy_kind("horovod")


def test_environment_detection():
    assert not distribution.tpu_is_likely_reachable({}, device_paths=NO_DEVICES)
    assert distribution.tpu_is_likely_reachable({"TPU_ACCELERATOR_TYPE": "v2-8"}, device_paths=NO_DEVICES)
    assert distribution.tf_config_cluster_size({}) == 0
    assert distribution.tf_config_cluster_size({"TF_CONFIG": _tf_config(3)}) == 3
    with pytest.raises(StrategyError, match="TF_CONFIG"):
        distribution.tf_config_cluster_size({"TF_CONFIG": "{not json"})


def test_on_this_machine_auto_and_cpu_give_the_default_strategy():
    if distribution.tpu_is_likely_reachable() or tf.config.list_logical_devices("GPU"):
        pytest.skip("this machine has an accelerator")
    for name in ("auto", "cpu"):
        strategy = distribution.resolve_strategy(name)
        assert strategy is tf.distribute.get_strategy()
        assert strategy.num_replicas_in_sync == 1
        assert distribution.is_chief(strategy)
        assert not distribution.is_tpu_strategy(strategy)


def test_a_multi_process_run_on_jax_comes_from_the_flags_then_keras_variables():
    """`process_cluster`: the flags win, Keras' KERAS_DISTRIBUTION_* variables fill the rest,
    "auto" leaves the finding to JAX, and an incomplete description names what is missing."""
    keras_variables = {"KERAS_DISTRIBUTION_JOB_ADDRESSES": "10.0.0.1:1234,10.0.0.2:1234",
                       "KERAS_DISTRIBUTION_NUM_PROCESSES": "2",
                       "KERAS_DISTRIBUTION_PROCESS_ID": "1"}
    assert distribution.process_cluster(environ={}) is None
    assert distribution.process_cluster(num_processes=1, process_id=0, environ={}) is None
    assert distribution.process_cluster(environ=keras_variables) == ("10.0.0.1:1234", 2, 1)
    assert distribution.process_cluster(
        environ={"KERAS_DISTRIBUTION_JOB_ADDRESSES": "a:1,b:1,c:1,d:1",
                 "KERAS_DISTRIBUTION_PROCESS_ID": "3"}) == ("a:1", 4, 3)
    assert distribution.process_cluster("host0:99", 4, 0, environ=keras_variables) == \
        ("host0:99", 4, 0)
    assert distribution.process_cluster("auto", environ={}) == "auto"
    with pytest.raises(StrategyError, match="missing: --coordinator_address, --process_id"):
        distribution.process_cluster(num_processes=2, environ={})
    with pytest.raises(StrategyError, match=r"--process_id=2 must be in \[0, 2\)"):
        distribution.process_cluster("host0:99", 2, 2, environ={})


def test_one_process_needs_no_joining():
    assert distribution.initialize_processes() == (1, 0)
