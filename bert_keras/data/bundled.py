"""The data bundled with the package (see `bert_keras/data/README.md` for sources and licences):
the WikiText-2 articles the main job pre-trains on and evaluates with, and the SST-2 sentences
it fine-tunes on. The notebooks and the main job read the paths from here.
"""

import os

DATA_DIR = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TRAIN_FILE = os.path.join(DATA_DIR, "wikitext_train.txt")
DEFAULT_HELDOUT_FILE = os.path.join(DATA_DIR, "wikitext_heldout.txt")
DEFAULT_FINETUNE_DATA_DIR = os.path.join(DATA_DIR, "sst2")

__all__ = ["DATA_DIR", "DEFAULT_TRAIN_FILE", "DEFAULT_HELDOUT_FILE", "DEFAULT_FINETUNE_DATA_DIR"]
