"""bert_keras: BERT (Devlin et al., 2019) in Keras 3 on TensorFlow.

The subpackages follow the data's path, and a model directory (config, vocabulary, weights) is
the currency between them; `common/` (atomic file writes) is the ground floor under them all:

    text/         vocabulary, vocabulary builder, the in-graph WordPiece tokenizer, packing,
                  the preprocessor, sentence splitting
    data/         pre-training data: corpus reading, instance creation (masking, next sentence),
                  TFRecord encoding, the parallel writer, the record reader
    model/        config, layers, encoder, pre-training heads and model, checkpoint names
    modeldir/     the model directory (read once, one writer), the loaders built on it,
                  converters of published weights
    pretraining/  input pipeline, dynamic masking, losses, the training step, the run
    finetuning/   task heads and models, the task families (`tasks/`), the run
    metrics/      the paper's metrics (GLUE, SQuAD, CoNLL)
    export/       SavedModels: preprocessor, encoder, raw-text task models
    main_job/     the whole pipeline on the bundled corpus
    commands.py   the `bert-keras` command: one sub-command per step

`optimization` (AdamW, LAMB, the schedule) and `distribution` (strategies) serve both trainers.

Example:

>>> import bert_keras  # doctest: +SKIP
>>> encoder = bert_keras.load_encoder("models/minilm")  # doctest: +SKIP
>>> preprocessor = bert_keras.load_preprocessor("models/minilm", seq_length=128)  # doctest: +SKIP
>>> outputs = encoder(preprocessor(tf.constant(["Hello world!"])))  # doctest: +SKIP
"""

import importlib

__version__ = "0.4.0"

# Public names, imported on first use so that `import bert_keras` stays light.
_EXPORTS = {
    "BertConfig": "bert_keras.model.config",
    "build_encoder": "bert_keras.model.encoder",
    "load_encoder": "bert_keras.modeldir.loading",
    "ModelDir": "bert_keras.modeldir.model_dir",
    "write_model_dir": "bert_keras.modeldir.model_dir",
    "build_pretraining_model": "bert_keras.model.pretraining_model",
    "load_pretraining_model": "bert_keras.modeldir.loading",
    "load_preprocessor": "bert_keras.modeldir.loading",
    "BertPreprocessor": "bert_keras.text.preprocessor",
    "BertTokenizer": "bert_keras.text.tokenizer",
    "bert_pack_inputs": "bert_keras.text.packing",
    "Vocabulary": "bert_keras.text.vocab",
}



def lazy_exports(package, exports):
    """`(__getattr__, __all__)` for a package whose public names load on first use.

    `exports`: {public name: module defining it}. Keeps `import bert_keras...` light: TensorFlow
    loads only when a name that needs it is used.
    """

    def __getattr__(name):
        if name in exports:
            return getattr(importlib.import_module(exports[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__, sorted(exports)


__getattr__, __all__ = lazy_exports("bert_keras", _EXPORTS)
