"""Writes BERT pre-training TFRecords (masked LM + next sentence) from raw text.

The original `create_pretraining_data.py` flags keep their meaning; the output is sharded:

  python tools/create_pretraining_data.py --input_file='corpus/*.txt' --vocab_file=vocab.txt \
      --output_dir=data/pretraining --do_lower_case --max_seq_length=128 \
      --max_predictions_per_seq=20 --masked_lm_prob=0.15 --dupe_factor=10

  # WikiText-style text, one paragraph per line, " = Title = " lines between articles:
  python tools/create_pretraining_data.py --input_format=paragraphs ...

  # On a cluster: N copies, each with its own --task_index, write disjoint parts.
  python tools/create_pretraining_data.py --num_tasks=N --task_index=$I ...

A rerun with the same flags continues an interrupted run. See docs/pretraining_data.md.
"""

from absl import flags

from bert_keras.common import cli
from bert_keras.data import pipeline as pretraining_pipeline
from bert_keras.data.instances import InstanceOptions

# Every flag comes from the options it sets: the original tool's (InstanceOptions) and the
# run's (PipelineConfig).
cli.define_flags(InstanceOptions)
cli.define_flags(pretraining_pipeline.PipelineConfig)
FLAGS = flags.FLAGS


def main():
    options = InstanceOptions(**cli.flag_values_of(InstanceOptions))
    try:
        options.validate()
    except ValueError as error:
        raise pretraining_pipeline.PipelineError(str(error)) from error
    config = cli.options_from_flags(pretraining_pipeline.PipelineConfig, options=options)
    stats = pretraining_pipeline.run(config)
    print(f"wrote {stats['instances']:,} instances to {config.output_dir}")
    return 0


if __name__ == "__main__":
    cli.run_tool("create_pretraining_data", main)
