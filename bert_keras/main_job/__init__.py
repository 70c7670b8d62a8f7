"""The main job: raw text to a pre-trained, fine-tuned, exported and served BERT, in one command.

Stages, each a library function of this package, each leaving its output under `work_dir`:

1. vocab          raw text -> `vocab/vocab.txt` (WordPiece, `bert_keras.text.vocab_builder`)
2. data           raw text -> `data/train/*.tfrecord`, `data/heldout/*.tfrecord`
                  (`bert_keras.data.pipeline`, the original masking and next-sentence algorithm)
3. pretrain       TFRecords -> `model/` (a model directory; `bert_keras.pretraining.run`)
4. evaluate       MLM and NSP accuracy on the held-out records, next to the baselines of always
                  answering the most frequent token and the majority label
5. finetune       what pre-training is worth: `model/` and the same architecture freshly
                  initialized, each fine-tuned on a sentence classification task (by default
                  CoLA, bundled in `bert_keras/data/cola`) with the same budget and the same
                  search (`bert_keras.finetuning.transfer`): each side's learning rate and epochs
                  chosen from one grid on held-out *training* rows, then several seeds on the
                  dev set (mean and spread) and a learning curve (`learning_curve.png`). The
                  same comparison, without the curve, on a second task (by default SST-2,
                  `bert_keras/data/sst2`). Beside them, on the same labelled sentences, a
                  released pre-trained BERT (all-MiniLM-L6-v2, converted into
                  `released_model/`; `main_job.released`) with the paper's recipe. The best
                  model of the served task (by default SST-2) is saved as `finetuned/`
6. export         `model/` -> `export/preprocessor`, `export/encoder`; `finetuned/` ->
                  `export/classifier`, a raw-text classifier (SavedModels, `bert_keras.export`)
7. demo           a fresh Python process that imports only TensorFlow and tensorflow-text
                  (`bert_keras/export/serving_demo.py`) reloads the SavedModels with
                  `tf.saved_model.load`, prints the top-5 tokens the model predicts for each
                  [MASK] of a few sentences and classifies a few raw sentences.

A finished stage writes `stages/<name>.json`; a rerun skips finished stages and continues an
interrupted pre-training from its last checkpoint and an interrupted comparison from its last
finished run (`finetune_runs.json`). At the end the job writes `results.json`: the held-out
pre-training accuracies and their baselines, each side's chosen setting, per-seed dev scores and
learning curve, and the seconds of every stage. By default the job pre-trains on passages of 28
public-domain books bundled in `bert_keras/data` and fine-tunes on the bundled CoLA and SST-2
(sources and licences: `bert_keras/data/README.md`).

Example:

>>> from bert_keras.main_job import MainJobOptions, run_main_job
>>> run_main_job(MainJobOptions(work_dir="bert_keras_work"))  # doctest: +SKIP

The modules: `options` (the settings, declared once; the flags come from them), `stages` (one
function per stage and the record of finished ones), `released` (the released model's row),
`plot` (the learning curve), `demo` (serving in a fresh process), `job` (`run_main_job`) and
`cli` (`bert-keras-main`). The bundled data's paths are
`bert_keras.data.bundled`.
"""

from bert_keras.main_job import cli, demo, job, options, plot, released, stages
from bert_keras.main_job.cli import cli_main
from bert_keras.main_job.demo import demo_stage, serve_in_fresh_process
from bert_keras.main_job.job import results_summary, run_main_job
from bert_keras.main_job.options import (DEFAULT_CLASSIFY_LABELS, DEFAULT_CLASSIFY_SENTENCES,
                                         DEFAULT_SENTENCES, LABEL_MEANINGS, RELEASED_MODEL,
                                         RESULTS_NAME, SINGLE_SENTENCE_TASKS, STAGES,
                                         MainJobOptions)
from bert_keras.main_job.plot import majority_baseline
from bert_keras.main_job.released import locate_released_model
from bert_keras.main_job.stages import (PRETRAINED, RANDOM_INIT, RELEASED, Stages,
                                        build_vocab_stage,
                                        check_finetune_inputs, check_inputs, compare_finetuning,
                                        create_data_stage, evaluate_stage, export_stage,
                                        finetune_stage, pretrain_stage, transfer_options,
                                        write_random_init_model_dir)

__all__ = ["MainJobOptions", "run_main_job", "cli_main", "STAGES", "Stages", "results_summary",
           "check_inputs", "check_finetune_inputs", "build_vocab_stage", "create_data_stage",
           "pretrain_stage", "evaluate_stage", "finetune_stage", "export_stage", "demo_stage",
           "transfer_options", "compare_finetuning", "write_random_init_model_dir",
           "serve_in_fresh_process", "PRETRAINED", "RANDOM_INIT", "RELEASED", "RELEASED_MODEL",
           "locate_released_model", "majority_baseline", "DEFAULT_SENTENCES",
           "DEFAULT_CLASSIFY_SENTENCES", "DEFAULT_CLASSIFY_LABELS", "LABEL_MEANINGS",
           "SINGLE_SENTENCE_TASKS", "RESULTS_NAME"]
