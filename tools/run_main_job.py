"""The main job: bundled (or your) raw text -> vocabulary -> TFRecords -> pre-trained tiny BERT ->
SavedModels -> masked-word predictions of the reloaded SavedModels.

  python tools/run_main_job.py --work_dir=bert_keras_work
  python tools/run_main_job.py --input_files=my_corpus/*.txt --preset=mini --num_train_steps=20000

Same as the `bert-keras-main` console script. A rerun with the same --work_dir resumes.
"""

from bert_keras.main_job import cli_main

if __name__ == "__main__":
    cli_main()
