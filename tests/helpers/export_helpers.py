"""Runs code in a fresh Python process that has TensorFlow and tensorflow-text but not bert_keras.

The package is installed in develop mode, so leaving the repository off `PYTHONPATH` is not
enough: the child puts a meta-path finder in front of every other that refuses `bert_keras`,
drops every `sys.path` entry inside the repository, and checks that `import bert_keras` raises
ImportError before it runs anything else. It works in a temporary directory outside the
repository.

The child code fills a dict `results` (NumPy arrays, strings, numbers, lists); it comes back
to the test through a pickle file. The child has `np`, `tf` (tensorflow-text imported) and
`graph_op_types(concrete_function)`, `xla_compiled_calls(concrete_function)`.

Example:

    results = run_fresh('''
    obj = tf.saved_model.load(EXPORT_DIR)
    results["pooled"] = obj(inputs)["pooled_output"].numpy()
    ''', EXPORT_DIR="/tmp/export", inputs=...)
"""

import inspect
import os
import pickle
import subprocess
import sys
import tempfile
import textwrap

from helpers.support import REPO_ROOT


# Graph checks, here and in the fresh process (the prelude below carries their source).
def graph_op_types(concrete):
    """Every op type in a concrete function's graph, its library functions included."""
    graph_def = concrete.graph.as_graph_def()
    types = {node.op for node in graph_def.node}
    for function in graph_def.library.function:
        types.update(node.op for node in function.node_def)
    return sorted(types)


def xla_compiled_calls(concrete):
    """How many function calls in a concrete function's graph (library included) XLA must
    compile (`jit_compile=True`)."""
    graph_def = concrete.graph.as_graph_def()
    nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
    return sum(1 for node in nodes
               if "_XlaMustCompile" in node.attr and node.attr["_XlaMustCompile"].b)


_PRELUDE = '''
import importlib.abc, os, pickle, sys

class _RefuseBertKeras(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "bert_keras" or name.startswith("bert_keras."):
            raise ImportError(f"{name} may not be imported in this process")
        return None

sys.meta_path.insert(0, _RefuseBertKeras())
_repo = os.path.realpath(REPO_ROOT)
sys.path[:] = [p for p in sys.path
               if p and not os.path.realpath(p).startswith(_repo + os.sep) and os.path.realpath(p) != _repo]
try:
    import bert_keras  # noqa: F401
except ImportError:
    pass
else:
    raise SystemExit("bert_keras is importable in the fresh process")

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops before any load)

with open(_ARGS_PATH, "rb") as _f:
    globals().update(pickle.load(_f))
results = {}

''' + inspect.getsource(graph_op_types) + "\n\n" + inspect.getsource(xla_compiled_calls)

_EPILOGUE = '''
assert not any(name == "bert_keras" or name.startswith("bert_keras.") for name in sys.modules)
with open(_RESULTS_PATH, "wb") as _f:
    pickle.dump(results, _f)
'''


def fresh_env(extra_env=None):
    """The environment of the child: PYTHONPATH without the repository, quiet TensorFlow,
    and `extra_env` (e.g. {"TF_ENABLE_ONEDNN_OPTS": "1"})."""
    env = dict(os.environ, **(extra_env or {}))
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
             if p and not os.path.realpath(p).startswith(os.path.realpath(REPO_ROOT))]
    env["PYTHONPATH"] = os.pathsep.join(parts)
    if not parts:
        env.pop("PYTHONPATH")
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env["CUDA_VISIBLE_DEVICES"] = env.get("CUDA_VISIBLE_DEVICES", "")
    return env


def run_fresh(code, timeout=600, extra_env=None, **args):
    """Runs `code` with `python -c` in a fresh process; returns its `results` dict.

    Keyword arguments become global variables of the child (pickled: arrays, strings, ...);
    `extra_env` is added to its environment.
    Raises AssertionError with the child's output when it fails.
    """
    with tempfile.TemporaryDirectory(prefix="bert_keras_fresh_") as workdir:
        args_path = os.path.join(workdir, "args.pkl")
        results_path = os.path.join(workdir, "results.pkl")
        with open(args_path, "wb") as f:
            pickle.dump(args, f)
        header = (f"REPO_ROOT = {REPO_ROOT!r}\n_ARGS_PATH = {args_path!r}\n"
                  f"_RESULTS_PATH = {results_path!r}\n")
        script = header + _PRELUDE + textwrap.dedent(code) + _EPILOGUE
        process = subprocess.run([sys.executable, "-c", script], cwd=workdir, env=fresh_env(extra_env),
                                 capture_output=True, text=True, timeout=timeout)
        if process.returncode != 0:
            raise AssertionError(f"fresh process failed (exit {process.returncode}):\n"
                                 f"{process.stdout[-4000:]}\n{process.stderr[-8000:]}")
        with open(results_path, "rb") as f:
            return pickle.load(f)


# ----------------------------------------------------------------- tiny model directories
WORDS = ("the", "a", "is", "of", "in", "and", "to", "was", "he", "she", "it", "bob", "alice",
         "paris", "london", "france", "city", "capital", "who", "what", "where", "when", "lives",
         "john", "new", "york", "works", "at", "google", "born", "year", "good", "bad", "movie",
         "un", "##aff", "##able", "##s", "##ing", "##ed", "play", "café", "naïve", "über",
         "1895", "##9", "hello", "world", ".", ",", "!", "?", "'", "-", "(", ")", "$", "%",
         "中", "国", "日", "本")


def word_vocab(extra=()):
    """A small real-word vocabulary: the special tokens, WORDS, single letters as "##" pieces."""
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list(WORDS)
    tokens += [chr(c) for c in range(ord("a"), ord("z") + 1) if chr(c) not in tokens]
    tokens += ["##" + chr(c) for c in range(ord("a"), ord("z") + 1) if "##" + chr(c) not in tokens]
    tokens += [t for t in extra if t not in tokens]
    return tokens


def tiny_config(vocab_size, **overrides):
    import bert_keras

    values = dict(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2,
                  num_attention_heads=2, intermediate_size=64, max_position_embeddings=128)
    values.update(overrides)
    return bert_keras.BertConfig(**values)


def write_pretrained_dir(path, vocab_tokens, do_lower_case=True, seed=0, dtype=None, **config):
    """A model directory with random encoder + pre-training head weights; returns its config."""
    import keras

    from bert_keras.model import checkpoint_names
    from bert_keras.model.pretraining_model import build_pretraining_model, pretraining_weight_map
    from bert_keras.modeldir import model_dir
    from bert_keras.text.vocab import Vocabulary

    keras.utils.set_random_seed(seed)
    bert_config = tiny_config(len(vocab_tokens), **config)
    model = build_pretraining_model(bert_config, dtype=dtype)
    _perturb_zero_weights(pretraining_weight_map(model), seed)
    weights = checkpoint_names.collect_weights(pretraining_weight_map(model))
    model_dir.write_model_dir(path, bert_config, Vocabulary(vocab_tokens), do_lower_case, weights)
    return bert_config


def _perturb_zero_weights(variable_map, seed):
    """Random biases and layer norm parameters, so that every weight matters in a comparison."""
    import numpy as np

    rng = np.random.default_rng(seed)
    for name, variable in variable_map.items():
        if name.endswith(("/bias", "/beta", "output_bias")):
            variable.assign(rng.normal(0, 0.1, variable.shape).astype("float32"))
        elif name.endswith("/gamma"):
            variable.assign(rng.normal(1, 0.1, variable.shape).astype("float32"))


def finetuning_tokenizer(vocab_tokens, directory, do_lower_case=True):
    """The fine-tuning path's word tokenizer (the in-graph one) over `vocab_tokens` (a list of
    tokens or a `Vocabulary`)."""
    from bert_keras.finetuning.tasks.words import WordTokenizer

    path = os.path.join(str(directory), "finetuning_vocab.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(getattr(vocab_tokens, "tokens", vocab_tokens)) + "\n")
    return WordTokenizer(path, do_lower_case=do_lower_case)
