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
