r"""`bert-keras convert`: converts a published BERT checkpoint into a bert_keras model directory.

  bert-keras convert --format=hf --input=all-MiniLM-L6-v2/ --output_dir=models/minilm
  bert-keras convert --format=tf1 --input=uncased_L-12_H-768_A-12/bert_model.ckpt \
      --output_dir=models/bert_base_uncased
"""

from bert_keras.common import cli
from bert_keras.modeldir.convert import ConvertOptions


def main():
    options = cli.options_from_flags(ConvertOptions)
    config = options.convert()
    print(f"wrote {options.output_dir}: L={config.num_hidden_layers} H={config.hidden_size} "
          f"A={config.num_attention_heads} vocab={config.vocab_size}")
    return 0
