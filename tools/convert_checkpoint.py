"""Converts a published BERT checkpoint into a bert_keras model directory.

  python tools/convert_checkpoint.py --format=hf --input=all-MiniLM-L6-v2/ --output_dir=models/minilm
  python tools/convert_checkpoint.py --format=tf1 --input=uncased_L-12_H-768_A-12/bert_model.ckpt \
      --output_dir=models/bert_base_uncased
"""

from absl import app, flags

from bert_keras.modeldir import convert

FLAGS = flags.DEFINE_enum("format", "hf", ["hf", "tf1"], "hf: a Hugging Face BERT directory with "
                          "model.safetensors; tf1: an original release checkpoint prefix.")
INPUT = flags.DEFINE_string("input", None, "The input directory (hf) or checkpoint prefix (tf1).",
                            required=True)
OUTPUT_DIR = flags.DEFINE_string("output_dir", None, "The model directory to write.", required=True)
DO_LOWER_CASE = flags.DEFINE_enum("do_lower_case", "auto", ["auto", "true", "false"],
                                  "The vocabulary's casing; auto reads tokenizer_config.json or "
                                  "infers it from the vocabulary.")


def main(argv):
    del argv
    lower = {"auto": None, "true": True, "false": False}[DO_LOWER_CASE.value]
    if FLAGS.value == "hf":
        config = convert.convert_hf_checkpoint(INPUT.value, OUTPUT_DIR.value, do_lower_case=lower)
    else:
        config = convert.convert_tf1_checkpoint(INPUT.value, OUTPUT_DIR.value, do_lower_case=lower)
    print(f"wrote {OUTPUT_DIR.value}: L={config.num_hidden_layers} H={config.hidden_size} "
          f"A={config.num_attention_heads} vocab={config.vocab_size}")


if __name__ == "__main__":
    app.run(main)
