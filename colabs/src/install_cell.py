# Picks the Keras backend and installs bert_keras (2-3 minutes on Colab).
import glob
import importlib.util
import os
import shutil
import subprocess
import sys

# Where bert_keras comes from on Colab (empty: the first that exists of a checkout next to this
# notebook, a wheel you uploaded, e.g. `bert_keras-0.1.0-py3-none-any.whl` made by
# `pip wheel --no-deps .` in a checkout, to the Files pane or to My Drive). Or any pip
# requirement: a wheel's path or address, or git+https://... of your copy of the repository.
BERT_KERAS_SOURCE = ""  # @param {type:"string"}
# auto: JAX on a TPU (Colab's TPU runtime, where TensorFlow's TPU build no longer works),
# TensorFlow elsewhere. tensorflow on a TPU VM installs tensorflow-tpu 2.20 (TPUStrategy).
KERAS_BACKEND = "auto"  # @param ["auto", "jax", "tensorflow"]
LIBTPU_RELEASES = "https://storage.googleapis.com/libtpu-tf-releases/index.html"

# Opened from a checkout (colabs/ next to pyproject.toml): the package comes from the checkout.
IN_CHECKOUT = os.path.isfile(os.path.join("..", "pyproject.toml")) and os.path.isdir(
    os.path.join("..", "bert_keras"))
# BERT_KERAS_SMOKE=1 (the test suite) never touches the network.
OFFLINE = os.environ.get("BERT_KERAS_SMOKE") == "1"
# Colab's TPU runtime is a TPU VM: the TPU chips are devices of this very machine.
ON_TPU_VM = (any(os.path.exists(path) for path in ("/dev/accel0", "/dev/vfio/0"))
             or bool(os.environ.get("TPU_ACCELERATOR_TYPE")))
ON_GPU = shutil.which("nvidia-smi") is not None
# One place decides the backend, before anything imports Keras: this form, else the
# environment's KERAS_BACKEND (the test suite sets it), else JAX on a TPU.
if KERAS_BACKEND == "auto":
    KERAS_BACKEND = os.environ.get("KERAS_BACKEND") or ("jax" if ON_TPU_VM else "tensorflow")
os.environ["KERAS_BACKEND"] = KERAS_BACKEND


def pip_install(*args):
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", *args])


def find_source():
    if BERT_KERAS_SOURCE:
        return BERT_KERAS_SOURCE
    wheels = sorted(glob.glob("bert_keras-*.whl") + glob.glob("/content/bert_keras-*.whl")
                    + glob.glob("/content/drive/MyDrive/bert_keras-*.whl"))
    if wheels:
        return wheels[-1]
    raise RuntimeError(
        "Where should bert_keras come from? Upload its wheel (made with `pip wheel --no-deps .` "
        "in a checkout) to the Files pane, or set BERT_KERAS_SOURCE in this cell to a wheel or "
        "to git+https://... of the repository, and run the cell again")


if importlib.util.find_spec("bert_keras") is not None:
    print("bert_keras is already installed (restart the runtime to reinstall it)")
elif IN_CHECKOUT:
    pip_install("-e", "..")
elif OFFLINE:
    raise RuntimeError("BERT_KERAS_SMOKE=1 installs nothing from the network: run "
                       "`pip install -e .` in a checkout of bert_keras first")
else:
    source = find_source()
    if ON_TPU_VM and KERAS_BACKEND == "tensorflow":
        # TensorFlow on a TPU is the `tensorflow-tpu` build, whose newest release is 2.20.
        # The order matters: tensorflow-text requires a package named `tensorflow`, so plain
        # tensorflow 2.20 goes in first, tensorflow-tpu 2.20 then replaces its files with the
        # TPU build, and tensorflow-text 2.20 finds its requirement already met.
        pip_install("tensorflow==2.20.*")
        pip_install("tensorflow-tpu==2.20.*", "--find-links", LIBTPU_RELEASES)
        pip_install("tensorflow-text==2.20.*")
    elif ON_TPU_VM and importlib.util.find_spec("jax") is None:
        pip_install("jax[tpu]")  # Colab's TPU runtime has it already
    elif ON_GPU and KERAS_BACKEND == "tensorflow":
        # The pip-packaged CUDA libraries of the TensorFlow version installed, whatever the
        # runtime's own CUDA is.
        pip_install("tensorflow[and-cuda]>=2.20,<2.22")
    # With JAX, TensorFlow (CPU) only reads the records and runs the exported SavedModels.
    pip_install(source)
    print("installed bert_keras from", source)
print("Keras backend:", KERAS_BACKEND)
