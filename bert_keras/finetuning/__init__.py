"""Fine-tuning with `keras.Model.fit`: the task families (`glue/`, `squad/`, `swag/`, `conll/`,
each with its reader, task, heads and serving; what they share in `tasks/`; names and the list
of families in `catalog`), fine-tuned model directories (`task_models`), `run_finetuning`, and
many runs in one process (`sweep`) for comparing initializations fairly (`transfer`).
"""

from bert_keras import lazy_exports

__getattr__, __all__ = lazy_exports("bert_keras.finetuning", {
    "run_finetuning": "bert_keras.finetuning.run",
    "create_finetuning_optimizer": "bert_keras.finetuning.run",
    "make_dataset": "bert_keras.finetuning.run",
    "predict": "bert_keras.finetuning.run",
    "FinetuningOptions": "bert_keras.finetuning.task",
    "get_task": "bert_keras.finetuning.task",
    "parse_task_name": "bert_keras.finetuning.catalog",
    "TaskData": "bert_keras.finetuning.task",
    "FinetuningSweep": "bert_keras.finetuning.sweep",
    "TransferOptions": "bert_keras.finetuning.transfer",
    "compare_initializations": "bert_keras.finetuning.transfer",
})
