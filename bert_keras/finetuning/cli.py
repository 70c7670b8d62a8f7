r"""`bert-keras finetune`: fine-tunes a model directory on GLUE, SQuAD v1.1/v2.0, SWAG or
CoNLL-2003 NER and evaluates it.

  bert-keras finetune --task=glue/mrpc --data_dir=glue_data/MRPC \
      --init_model_dir=models/minilm --output_dir=runs/mrpc
  bert-keras finetune --task=squad_v2 --data_dir=squad --init_model_dir=models/base \
      --output_dir=runs/squad2 --train_batch_size=48 --num_train_epochs=2
  bert-keras finetune --task=conll2003 --feature_based --data_dir=conll2003 ...

Unset hyper-parameters take the paper's defaults for the task (see
`bert_keras.finetuning.task.FinetuningOptions`). The output directory is a fine-tuned model
directory (with task_config.json) plus eval_results.json, predictions/<split>/ in the task's
official format, TensorBoard logs/ and checkpoints/.
"""

import logging

from bert_keras.common import cli
from bert_keras.finetuning.run import FinetuningRunOptions
from bert_keras.finetuning.task import FinetuningOptions


def main():
    logging.getLogger("bert_keras").setLevel(logging.INFO)
    run = cli.options_from_flags(FinetuningRunOptions)
    result = run.run(**cli.flag_values_of(FinetuningOptions))
    for split, metrics in result.metrics.items():
        shown = ", ".join(f"{key}={value:.4f}" for key, value in metrics.items()
                          if isinstance(value, float))
        print(f"{result.results['task']} {split}: {shown}")
    print(f"wrote {result.output_dir}")
    return 0
