"""The main job: bundled (or your) raw text -> vocabulary -> TFRecords -> pre-trained tiny BERT ->
fine-tuned on SST-2 (and the same from random initialization) -> SavedModels -> masked-word
predictions and sentence classifications of the SavedModels reloaded in a fresh process;
the figures in <work_dir>/results.json.

  python tools/run_main_job.py --work_dir=bert_keras_work
  python tools/run_main_job.py --input_files=my_corpus/*.txt --preset=mini --num_train_steps=20000

Same as the `bert-keras-main` console script. A rerun with the same --work_dir resumes.
"""

from bert_keras.main_job import cli_main

if __name__ == "__main__":
    cli_main()
