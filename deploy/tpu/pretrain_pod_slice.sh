#!/bin/bash
# Pre-training on a Cloud TPU pod slice (e.g. v5e-16: four hosts of four chips) on the JAX
# backend: the same command on every host (--worker=all); JAX finds the hosts itself
# (--coordinator_address=auto). The records are read from the bucket (gs://, through
# tf.io.gfile); the vocabulary and the output directory are on the bucket mounted with Cloud
# Storage FUSE on every host, where host 0 writes the checkpoints and the model directory.
#
#   TPU_NAME=my-v5e-16 ZONE=us-west4-a BUCKET=my-bucket deploy/tpu/pretrain_pod_slice.sh
#
# After a preemption, recreate the slice and run this again: every host resumes from the latest
# checkpoint in the bucket. PACKAGE: what pip installs (a wheel or a checkout of bert_keras).
set -euo pipefail
: "${TPU_NAME:?name of the TPU VM slice}" "${ZONE:?its zone}" "${BUCKET:?bucket name}"
PACKAGE=${PACKAGE:-bert_keras}

gcloud compute tpus tpu-vm ssh "${TPU_NAME}" --zone="${ZONE}" --worker=all --command="
  set -e
  pip install --quiet 'jax[tpu]' '${PACKAGE}'
  mkdir -p \$HOME/bucket && (mountpoint -q \$HOME/bucket || gcsfuse --implicit-dirs '${BUCKET}' \$HOME/bucket)
  KERAS_BACKEND=jax bert-keras pretrain --coordinator_address=auto \
    --input_files='gs://${BUCKET}/records/seq128/*.tfrecord' \
    --output_dir=\$HOME/bucket/models/base-phase1 \
    --preset=base --vocab_file=\$HOME/bucket/vocab.txt --train_batch_size=1024 \
    --max_seq_length=128 --max_predictions_per_seq=20 --num_train_steps=250000 \
    --num_warmup_steps=10000 --learning_rate=2e-4 --dtype=bfloat16 \
    --steps_per_execution=200 --save_checkpoints_steps=2000"
