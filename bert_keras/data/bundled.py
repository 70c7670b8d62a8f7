"""The data bundled with the package (see `bert_keras/data/README.md` for sources and licences):
the public-domain book passages the main job pre-trains on and evaluates with, the WikiText-2
articles the notebooks and tests use, and the two labelled tasks the main job fine-tunes on
(CoLA, and SST-2's whole sentences).
"""

import os

DATA_DIR = os.path.dirname(os.path.abspath(__file__))
BOOKS_TRAIN_FILE = os.path.join(DATA_DIR, "books_train.txt")
BOOKS_HELDOUT_FILE = os.path.join(DATA_DIR, "books_heldout.txt")
WIKITEXT_TRAIN_FILE = os.path.join(DATA_DIR, "wikitext_train.txt")
WIKITEXT_HELDOUT_FILE = os.path.join(DATA_DIR, "wikitext_heldout.txt")
COLA_DATA_DIR = os.path.join(DATA_DIR, "cola")
SST2_DATA_DIR = os.path.join(DATA_DIR, "sst2")
# The bundled labelled tasks by their `bert_keras.finetuning.catalog` name.
TASK_DATA_DIRS = {"glue/cola": COLA_DATA_DIR, "glue/sst2": SST2_DATA_DIR}

__all__ = ["DATA_DIR", "BOOKS_TRAIN_FILE", "BOOKS_HELDOUT_FILE", "WIKITEXT_TRAIN_FILE",
           "WIKITEXT_HELDOUT_FILE", "COLA_DATA_DIR", "SST2_DATA_DIR", "TASK_DATA_DIRS"]
