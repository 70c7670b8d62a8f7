"""`bert-keras main` (also `bert-keras-main`) under its earlier name."""

from bert_keras.commands import run

if __name__ == "__main__":
    run("main", program="bert-keras-main")
