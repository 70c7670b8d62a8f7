r"""`bert-keras data`: writes BERT pre-training TFRecords (masked LM + next sentence) from raw text.

The original `create_pretraining_data.py` flags keep their meaning; the output is sharded:

  bert-keras data --input_file='corpus/*.txt' --vocab_file=vocab.txt \
      --output_dir=data/pretraining --do_lower_case --max_seq_length=128 \
      --max_predictions_per_seq=20 --masked_lm_prob=0.15 --dupe_factor=10

  # WikiText-style text, one paragraph per line, " = Title = " lines between articles:
  bert-keras data --input_format=paragraphs ...

  # On a cluster: N copies, each with its own --task_index, write disjoint parts.
  bert-keras data --num_tasks=N --task_index=$I ...

A rerun with the same flags continues an interrupted run. The flags are those of the original
tool (`InstanceOptions`) and of the run (`PipelineConfig`). See docs/pretraining_data.md.
"""

from bert_keras.common import cli
from bert_keras.data import pipeline
from bert_keras.data.instances import InstanceOptions


def main():
    options = InstanceOptions(**cli.flag_values_of(InstanceOptions))
    try:
        options.validate()
    except ValueError as error:
        raise pipeline.PipelineError(str(error)) from error
    config = cli.options_from_flags(pipeline.PipelineConfig, options=options)
    stats = pipeline.run(config)
    print(f"wrote {stats['instances']:,} instances to {config.output_dir}")
    return 0
