"""Training refuses the records of a data run split into tasks when a task is missing.

The records are the data tool's own (`pipeline.run` in this process, three tasks of three input
files); the refusal comes from the check training runs before building a model
(`inputs.prepare_records`).
"""

import json
import os

import pytest

from bert_keras.data import manifest, pipeline
from bert_keras.data.instances import InstanceOptions
from bert_keras.pretraining import inputs
from bert_keras.pretraining.options import PretrainingOptions

from helpers import pretraining_run_fixtures as fx

TASKS = 3


@pytest.fixture(scope="module")
def split_run(tmp_path_factory):
    """Tasks 0 and 2 of a run of three; (output folder, options reading every record file)."""
    root = tmp_path_factory.mktemp("split_run")
    vocab = fx.write_vocab(str(root), size=500)
    lines = open(fx.TRAIN_TEXT, encoding="utf-8").read().split("\n")[:600]
    for index in range(TASKS):  # each task takes every third input file: one here
        (root / f"text-{index}.txt").write_text("\n".join(lines[index::TASKS]) + "\n",
                                                encoding="utf-8")
    output_dir = root / "records"
    for task_index in (0, 2):
        pipeline.run(pipeline.PipelineConfig(
            input_files=[str(root / f"text-{index}.txt") for index in range(TASKS)],
            vocab_file=vocab, output_dir=str(output_dir), do_lower_case=True,
            num_output_shards=2, num_workers=1, input_format="paragraphs", progress=False,
            task_index=task_index, num_tasks=TASKS,
            options=InstanceOptions(max_seq_length=32, max_predictions_per_seq=5)))
    options = PretrainingOptions(input_files=f"{output_dir}/*.tfrecord", output_dir="unused",
                                 max_seq_length=32, max_predictions_per_seq=5)
    return output_dir, options


def test_a_missing_task_is_refused_by_name(split_run):
    output_dir, options = split_run
    with open(output_dir / manifest.manifest_name(0, TASKS)) as f:
        assert json.load(f)["num_tasks"] == TASKS
    with pytest.raises(inputs.RecordsError) as refusal:
        inputs.prepare_records(options)
    assert str(refusal.value).startswith(
        f"{output_dir}: the data run was split into 3 tasks (task-00000-of-00003-manifest.json "
        "records num_tasks 3), but no records of task(s) 1 are among the input files")
    assert "--num_tasks=3 --task_index=<each of 1>" in str(refusal.value)


def test_every_task_present_is_accepted(split_run, tmp_path):
    """The same files with task 1's shards beside them (copies of task 0's, renamed: the check
    goes by the tasks present, the records themselves are checked elsewhere)."""
    output_dir, options = split_run
    complete = tmp_path / "complete"
    complete.mkdir()
    for name in os.listdir(output_dir):
        data = (output_dir / name).read_bytes()
        (complete / name).write_bytes(data)
        if name.startswith("task-00000-of-00003-"):
            (complete / name.replace("task-00000-", "task-00001-")).write_bytes(
                data.replace(b'"task_index": 0', b'"task_index": 1'))
    options.input_files = f"{complete}/*.tfrecord"
    files, kind = inputs.prepare_records(options)
    assert len(files) == 6 and kind == inputs.MASKED


def test_a_manifest_that_disagrees_with_the_names_is_refused(tmp_path):
    (tmp_path / "task-00000-of-00002-shard-00000-of-00001.tfrecord").write_bytes(b"")
    (tmp_path / manifest.manifest_name(0, 2)).write_text(json.dumps({"num_tasks": 4}))
    with pytest.raises(inputs.RecordsError, match="records num_tasks 4, but its files are named "
                                                  "for 2 tasks"):
        manifest.check_all_tasks([str(tmp_path / "task-00000-of-00002-shard-00000-of-00001"
                                                  ".tfrecord")])
