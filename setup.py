"""bert_keras: BERT in Keras 3 (TensorFlow backend), from raw text to a served model."""

from setuptools import find_packages, setup

setup(
    name="bert_keras",
    version="0.1.0",
    description=(
        "BERT (Devlin et al.) in Keras 3 on TensorFlow: in-graph WordPiece tokenizer, "
        "pre-training data, pre-training, fine-tuning and SavedModel export."
    ),
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    packages=find_packages(include=["bert_keras", "bert_keras.*"]),
    package_data={"bert_keras": ["data/*", "data/**/*", "text/tables/*"]},
    include_package_data=True,
    python_requires=">=3.9",
    install_requires=[
        # TPU VMs only get tensorflow-tpu 2.20, so accept 2.20 as well as 2.21.
        "tensorflow>=2.20,<2.22",
        "tensorflow-text>=2.20,<2.22",
        "keras>=3.8",
        "absl-py",
        "numpy",
        "safetensors>=0.4",
        # C CRC-32C for the TFRecords written by create_pretraining_data (a NumPy fallback exists).
        "google-crc32c>=1.5",
        # TensorFlow 2.21 no longer installs it; the TensorBoard callbacks and summaries need it.
        "tensorboard",
        # The main job's learning curve (learning_curve.png) and the ablation figure.
        "matplotlib",
        # The vocabulary builder's WordPiece trainer (text/vocab_builder.py).
        "tokenizers>=0.13",
    ],
    extras_require={
        # JAX on the CPU: the suite compares fine-tuning on the Keras JAX backend with TensorFlow.
        # pytest-xdist: the suite runs in two processes, a test file at a time in each
        # (`-n 2 --dist loadfile`, so that a file's module fixtures are built once).
        # ai-edge-litert: the lite export's tests serve it in a process without TensorFlow.
        "test": ["pytest", "pytest-xdist", "nbclient", "nbformat", "ipykernel", "jax[cpu]",
                 "ai-edge-litert"],
        # Serving a `--kind=lite` export (bert_keras.export.lite.LiteModel) without TensorFlow.
        "lite": ["ai-edge-litert"],
        "tfds": ["tensorflow-datasets"],
        # Training on the Keras JAX backend (KERAS_BACKEND=jax): JAX for the CPU here; on a TPU
        # or GPU install JAX's build for it ("jax[tpu]", "jax[cuda12]"; Colab's TPU runtime has it).
        "jax": ["jax"],
        # The peers of benchmarks/ (keras-hub goes in separately with --no-deps, see
        # benchmarks/requirements.txt, so that it cannot replace keras or tensorflow).
        "bench": ["torch==2.13.0", "transformers", "tokenizers", "onnxruntime", "onnx"],
    },
    entry_points={
        "console_scripts": [
            "bert-keras-main=bert_keras.main_job:cli_main",
        ],
    },
)
