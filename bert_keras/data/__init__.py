"""Pre-training data: corpus reading, the original masking and next-sentence algorithm,
`tf.train.Example` encoding and the parallel, resumable writer of pre-training TFRecords.

The bundled WikiText sample lives here too (`wikitext_train.txt`, `wikitext_heldout.txt`; see
README.md).
"""

from bert_keras import lazy_exports

__getattr__, __all__ = lazy_exports("bert_keras.data", {
    "PipelineConfig": "bert_keras.data.pipeline",
    "PipelineError": "bert_keras.data.pipeline",
    "InstanceOptions": "bert_keras.data.instances",
    "RecordsError": "bert_keras.data.records",
    "iter_documents": "bert_keras.data.corpus",
})
