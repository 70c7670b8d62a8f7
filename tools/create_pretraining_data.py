"""`bert-keras data` under its earlier name."""

from bert_keras.commands import run

if __name__ == "__main__":
    run("data")
