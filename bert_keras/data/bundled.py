"""The data bundled with the package (see `bert_keras/data/README.md` for sources and licences):
the public-domain book passages the main job pre-trains on and evaluates with, the WikiText-2
articles the notebooks and tests use, and the SST-2 sentences the main job fine-tunes on.
"""

import os

DATA_DIR = os.path.dirname(os.path.abspath(__file__))
BOOKS_TRAIN_FILE = os.path.join(DATA_DIR, "books_train.txt")
BOOKS_HELDOUT_FILE = os.path.join(DATA_DIR, "books_heldout.txt")
WIKITEXT_TRAIN_FILE = os.path.join(DATA_DIR, "wikitext_train.txt")
WIKITEXT_HELDOUT_FILE = os.path.join(DATA_DIR, "wikitext_heldout.txt")
DEFAULT_FINETUNE_DATA_DIR = os.path.join(DATA_DIR, "sst2")

__all__ = ["DATA_DIR", "BOOKS_TRAIN_FILE", "BOOKS_HELDOUT_FILE", "WIKITEXT_TRAIN_FILE",
           "WIKITEXT_HELDOUT_FILE", "DEFAULT_FINETUNE_DATA_DIR"]
