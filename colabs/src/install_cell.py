# Installs bert_keras; on Colab's TPU runtime, TensorFlow's TPU build first (2-3 minutes there).
import importlib.util
import os
import shutil
import subprocess
import sys

# Where bert_keras is installed from on Colab: put the address of your copy of the repository.
REPO_URL = "https://github.com/<your-org>/bert_keras"
LIBTPU_RELEASES = "https://storage.googleapis.com/libtpu-tf-releases/index.html"

# Opened from a checkout (colabs/ next to setup.py): the package comes from the checkout.
IN_CHECKOUT = os.path.isfile(os.path.join("..", "setup.py")) and os.path.isdir(
    os.path.join("..", "bert_keras"))
# BERT_KERAS_SMOKE=1 (the test suite) never touches the network.
OFFLINE = os.environ.get("BERT_KERAS_SMOKE") == "1"
# Colab's TPU runtime is a TPU VM: the TPU chips are devices of this very machine.
ON_TPU_VM = (any(os.path.exists(path) for path in ("/dev/accel0", "/dev/vfio/0"))
             or bool(os.environ.get("TPU_ACCELERATOR_TYPE")))
ON_GPU = shutil.which("nvidia-smi") is not None


def pip_install(*args):
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", *args])


if importlib.util.find_spec("bert_keras") is not None:
    print("bert_keras is already installed (restart the runtime to reinstall it)")
elif IN_CHECKOUT:
    pip_install("-e", "..")
elif OFFLINE:
    raise RuntimeError("BERT_KERAS_SMOKE=1 installs nothing from the network: run "
                       "`pip install -e .` in a checkout of bert_keras first")
else:
    if ON_TPU_VM:
        # TensorFlow on a TPU is the `tensorflow-tpu` build, whose newest release is 2.20.
        # The order matters: tensorflow-text requires a package named `tensorflow`, so plain
        # tensorflow 2.20 goes in first, tensorflow-tpu 2.20 then replaces its files with the
        # TPU build, and tensorflow-text 2.20 finds its requirement already met.
        pip_install("tensorflow==2.20.*")
        pip_install("tensorflow-tpu==2.20.*", "--find-links", LIBTPU_RELEASES)
        pip_install("tensorflow-text==2.20.*")
    elif ON_GPU:
        # The pip-packaged CUDA libraries of the TensorFlow version installed, whatever the
        # runtime's own CUDA is.
        pip_install("tensorflow[and-cuda]>=2.20,<2.22")
    pip_install(f"git+{REPO_URL}")
    print("installed bert_keras from", REPO_URL)
