"""Pre-training that transfers, at an accelerator's budget: the main job's comparison scaled up.

The main job pre-trains a tiny BERT for about four minutes on two CPU cores and compares it
with random initialization on SST-2 (`bert_keras.finetuning.transfer`). This benchmark asks the
same question of a larger budget, on one GPU (or TPU) through Keras' JAX backend, where
TensorFlow is often not installed. It runs in two steps:

1. `prepare` (any machine with TensorFlow): the main job's own vocabulary and data stages
   (`bert_keras.main_job`) on a larger corpus (the books of `--books_dir` without the job's
   held-out pages, plus the bundled WikiText), and the GLUE tasks tokenized by the package's
   task readers; everything is written to one `.npz` file of token ids.
2. `run` (`KERAS_BACKEND=jax`, needs only Keras, JAX and NumPy): for each model size and
   objective, pre-training with the package's model (`build_pretraining_model`), loss
   (`pretraining.losses`) and optimizer (`optimization.create_optimizer`: AdamW, warm-up and
   linear decay, clipping), one `jax.jit` scan of `--steps_per_call` steps at a time over the
   records' static masks (the records stay on the device), held-out MLM
   and NSP accuracy against the most frequent token and the majority label, then the main
   job's fair comparison on each task: each side's learning rate and epochs chosen from one
   grid on the last `--selection_examples` training rows (never on dev), the chosen setting
   with every seed on dev, and a learning curve (one seed a point). The classifier is the
   package's (`finetuning.task_models.build_classifier`, mean of the last layer) with the
   fine-tuning AdamW (`optimization.AdamWeightDecay`, bias correction, epsilon 1e-6, weight
   decay 0.01 but on LayerNorm and biases, clipping 1.0) on the job's schedule (10% warm-up,
   linear decay to 0: `optimization.warmup_linear_decay`), the head drawn by
   `task_models.initial_head_weights` and the random side by `random_encoder_weights`.

Each stage appends to the results JSON as it finishes, so a run stopped by `--time_budget`
(or killed) keeps what it measured; the remaining stages are listed as skipped.

    python benchmarks/bench_transfer_device.py prepare --books_dir=../shared/data/books \\
        --glue_dir=../shared/data/glue --out=.gl/transfer_device.npz
    KERAS_BACKEND=jax python benchmarks/bench_transfer_device.py run \\
        --data=.gl/transfer_device.npz --presets=mini,tiny --steps=6000

writes benchmarks/results/transfer_device_<machine class>.json (`--output` for another file).
"""

import argparse
import filecmp
import glob
import json
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TASKS = {"sst2": ("SST-2", 48), "mrpc": ("MRPC", 128), "rte": ("RTE", 128), "cola": ("CoLA", 64)}
HELDOUT_MARK = " = "


# ------------------------------------------------------------------------------- prepare
def _corpus(books_dir, heldout_file, output):
    """The books of `books_dir` as one file in the main job's paragraph layout (a ` = Title = `
    line starts each book), without any paragraph of the job's held-out pages."""
    with open(heldout_file, encoding="utf-8") as f:
        heldout = {line.strip() for line in f if line.strip() and not line.startswith(HELDOUT_MARK)}
    files = sorted(glob.glob(os.path.join(books_dir, "*.txt")))
    if not files:
        raise SystemExit(f"--books_dir={books_dir}: no .txt files")
    kept = dropped = 0
    with open(output + ".tmp", "w", encoding="utf-8") as out:
        for path in files:
            out.write(f" = {os.path.basename(path)[:-4]} = \n")
            with open(path, encoding="utf-8") as f:
                for line in f:
                    line = line.strip()
                    if not line:
                        continue
                    if line in heldout:
                        dropped += 1
                        continue
                    out.write(line + "\n")
                    kept += 1
    # An unchanged corpus keeps its file (and time stamp), so a rerun reuses the job's records.
    if os.path.exists(output) and filecmp.cmp(output, output + ".tmp", shallow=False):
        os.remove(output + ".tmp")
    else:
        os.replace(output + ".tmp", output)
    return {"books": len(files), "paragraphs": kept, "heldout_paragraphs_left_out": dropped}


def _read_records(directory, max_seq_length, max_predictions):
    import tensorflow as tf

    from bert_keras.data.records import feature_spec

    files = sorted(glob.glob(os.path.join(directory, "*.tfrecord")))
    spec = feature_spec(max_seq_length, max_predictions)
    columns = {name: [] for name in spec}
    for batch in tf.data.TFRecordDataset(files).batch(4096).map(
            lambda records: tf.io.parse_example(records, spec)).as_numpy_iterator():
        for name, value in batch.items():
            columns[name].append(value)
    columns = {name: np.concatenate(values) for name, values in columns.items()}
    return {  # compact dtypes: the file travels to the accelerator's machine
        "input_ids": columns["input_ids"].astype(np.uint16),
        "segment_ids": columns["segment_ids"].astype(np.uint8),
        "masked_lm_positions": columns["masked_lm_positions"].astype(np.uint8),
        "masked_lm_ids": columns["masked_lm_ids"].astype(np.uint16),
        "masked_lm_weights": columns["masked_lm_weights"].astype(np.uint8),
        "next_sentence_labels": columns["next_sentence_labels"].reshape(-1).astype(np.uint8),
    }


def prepare(args):
    import bert_keras
    from bert_keras import main_job
    from bert_keras.data import bundled
    from bert_keras.finetuning.task import FinetuningOptions, get_task
    from bert_keras.finetuning.task_models import random_encoder_weights
    from bert_keras.main_job.options import MainJobOptions
    from bert_keras.modeldir import model_dir

    os.makedirs(args.work_dir, exist_ok=True)
    corpus = os.path.join(args.work_dir, "books.txt")
    stats = _corpus(args.books_dir, bundled.BOOKS_HELDOUT_FILE, corpus)
    inputs = [corpus] + ([bundled.WIKITEXT_TRAIN_FILE] if args.with_wikitext else [])
    options = MainJobOptions(work_dir=args.work_dir, input_files=",".join(inputs),
                             dupe_factor=args.dupe_factor, vocab_size=args.vocab_size,
                             max_seq_length=args.max_seq_length)
    paths = options.paths()
    print("vocab:", main_job.stages.build_vocab_stage(options, paths)["summary"], flush=True)
    print("data:", main_job.stages.create_data_stage(options, paths)["summary"], flush=True)
    arrays = {}
    for split in ("train", "heldout"):
        for name, value in _read_records(paths[f"{split}_data"], options.max_seq_length,
                                         options.max_predictions_per_seq).items():
            arrays[f"{split}/{name}"] = value
    with open(paths["vocab"], encoding="utf-8") as f:
        vocab = [line.rstrip("\n") for line in f]
    config = bert_keras.BertConfig.from_preset("tiny", vocab_size=len(vocab))
    vocab_model = os.path.join(args.work_dir, "vocab_model")
    model_dir.write_model_dir(vocab_model, config, paths["vocab"], True,
                              random_encoder_weights(config, seed=1))
    for task_name in args.tasks.split(","):
        folder, seq = TASKS[task_name]
        task = get_task(f"glue/{task_name}", os.path.join(args.glue_dir, folder), vocab_model,
                        FinetuningOptions(max_seq_length=seq, pooling="mean"))
        for split, data in (("train", task.load("train", training=True)), ("dev", task.load("dev"))):
            for name, value in data.inputs.items():
                arrays[f"{task_name}/{split}/{name}"] = value.astype(
                    np.uint8 if name != "input_word_ids" else np.uint16)
            arrays[f"{task_name}/{split}/labels"] = np.asarray(data.labels).astype(np.int8)
    meta = {"corpus": stats, "inputs": [os.path.basename(p) for p in inputs],
            "dupe_factor": args.dupe_factor, "vocab_size": len(vocab),
            "max_seq_length": options.max_seq_length,
            "max_predictions_per_seq": options.max_predictions_per_seq,
            "tasks": args.tasks.split(",")}
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    tmp = args.out + ".tmp.npz"
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    np.savez_compressed(tmp, **arrays)
    os.replace(tmp, args.out)
    print(f"wrote {args.out} ({os.path.getsize(args.out) / 2**20:.1f} MiB): "
          f"{len(arrays['train/input_ids'])} training and {len(arrays['heldout/input_ids'])} "
          f"held-out records; {json.dumps(meta)}", flush=True)


# ----------------------------------------------------------------------------------- run
class Results:
    """The results JSON, rewritten atomically after each stage."""

    def __init__(self, path, header, name="transfer_device"):
        self.path, self.name = path, name
        self.data = {**header, "stages": {}}
        self.write()

    def add(self, key, value):
        self.data["stages"][key] = value
        self.write()

    def write(self):
        if self.path is None:  # benchmarks/results/transfer_device_<machine class>.json
            import bench_common
            bench_common.write_results(self.name, self.data)
            return
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        with open(self.path + ".tmp", "w") as f:
            json.dump(self.data, f, indent=1)
        os.replace(self.path + ".tmp", self.path)


def _records(data, split):
    keys = ("input_ids", "segment_ids", "masked_lm_positions", "masked_lm_ids",
            "masked_lm_weights", "next_sentence_labels")
    return {key: data[f"{split}/{key}"].astype(np.int32) for key in keys}


def _pretraining_batch(records, index):
    """The model's inputs and labels for the records `index` (JAX arrays on the device)."""
    ids = records["input_ids"][index]
    return {"input_word_ids": ids, "input_mask": (ids > 0).astype(np.int32),
            "input_type_ids": records["segment_ids"][index],
            "masked_lm_positions": records["masked_lm_positions"][index],
            "masked_lm_ids": records["masked_lm_ids"][index],
            "masked_lm_weights": records["masked_lm_weights"][index].astype(np.float32),
            "next_sentence_labels": records["next_sentence_labels"][index]}


def pretrain(config, records, heldout, next_sentence, causal, args, log):
    """Pre-trains one model; returns ({original name: array} of the encoder, metrics)."""
    import jax
    import keras

    from bert_keras import optimization
    from bert_keras.model.pretraining_model import build_pretraining_model, pretraining_weight_map
    from bert_keras.pretraining import losses

    keras.utils.set_random_seed(args.seed)
    policy = None if args.precision == "float32" else "mixed_bfloat16"
    model = build_pretraining_model(config, causal=causal, next_sentence=next_sentence,
                                    dtype=policy)
    variable_map = pretraining_weight_map(model)
    if args.position_init == "sinusoidal":
        table = variable_map["bert/embeddings/position_embeddings"]
        table.assign(sinusoidal_positions(*table.shape, config.initializer_range))
    optimizer = optimization.create_optimizer(
        variable_map, args.learning_rate, args.steps, int(args.steps * args.warmup_fraction),
        mixed_precision=policy or "float32", build=False)
    optimizer.summed_gradients = False
    optimizer.build(model.trainable_variables)
    names = ("input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions")

    def sums_of(trainable, non_trainable, batch, training):
        outputs, non_trainable = model.stateless_call(
            trainable, non_trainable, {k: batch[k] for k in names}, training=training)
        return losses.pretraining_sums(outputs, batch), non_trainable

    def loss_fn(trainable, non_trainable, batch):
        sums, non_trainable = sums_of(trainable, non_trainable, batch, True)
        loss = losses.pretraining_loss(sums, sums["masked_lm_weight_sum"],
                                       sums["next_sentence_count"])
        return loss, (non_trainable, sums)

    @jax.jit
    def steps(state, device_records, indices):  # indices [steps, batch]: one copy per chunk
        def one_step(state, index):
            trainable, non_trainable, optimizer_state = state
            batch = _pretraining_batch(device_records, index)
            (loss, (non_trainable, _)), grads = jax.value_and_grad(loss_fn, has_aux=True)(
                trainable, non_trainable, batch)
            trainable, optimizer_state = optimizer.stateless_apply(optimizer_state, grads,
                                                                   trainable)
            return (trainable, non_trainable, optimizer_state), loss
        return jax.lax.scan(one_step, state, indices)

    @jax.jit
    def eval_sums(state, device_records, index):
        return sums_of(state[0], state[1], _pretraining_batch(device_records, index),
                       False)[0]

    # The records live on the accelerator: a host-to-device copy per step costs more than the
    # step itself there.
    device_records = {k: jax.device_put(v) for k, v in records.items()}
    state = ([v.value for v in model.trainable_variables],
             [v.value for v in model.non_trainable_variables],
             [v.value for v in optimizer.variables])
    rng = np.random.default_rng(args.seed)
    num = len(records["input_ids"])
    order, position = rng.permutation(num), 0
    began, losses_seen, last_log, stopped, done = time.time(), [], time.time(), None, 0
    while done < args.steps:
        chunk = min(args.steps_per_call, args.steps - done)
        indices = []
        for _ in range(chunk):
            if position + args.batch_size > num:
                order, position = rng.permutation(num), 0
            indices.append(order[position:position + args.batch_size])
            position += args.batch_size
        state, chunk_losses = steps(state, device_records, np.stack(indices).astype(np.int32))
        chunk_losses = np.asarray(chunk_losses)
        losses_seen.append((done, float(chunk_losses[0])))
        done += chunk
        if not np.all(np.isfinite(chunk_losses)):
            raise FloatingPointError(f"pre-training loss became {chunk_losses[-1]} by step {done}")
        if time.time() - last_log > 15:
            log(f"  step {done} loss {float(chunk_losses[-1]):.3f} ({time.time() - began:.0f}s)")
            last_log = time.time()
        if args.pretrain_seconds and time.time() - began > args.pretrain_seconds and done < args.steps:
            stopped = done
            break
    losses_seen.append((done, float(chunk_losses[-1])))
    jax.block_until_ready(state[0])
    seconds = time.time() - began
    total = {}
    batch = 256
    device_records = {k: jax.device_put(v) for k, v in heldout.items()}
    for start in range(0, len(heldout["input_ids"]) - batch + 1, batch):
        sums = eval_sums(state, device_records, np.arange(start, start + batch, dtype=np.int32))
        for key, value in sums.items():
            total[key] = total.get(key, 0.0) + float(value)
    metrics = {"steps": stopped or args.steps, "stopped_by_time": bool(stopped),
               "seconds": round(seconds, 1), "loss_trajectory": losses_seen,
               "heldout_masked_lm_accuracy": total["masked_lm_correct"] / total["masked_lm_weight_sum"],
               "heldout_records": int(total.get("examples", 0) or
                                      batch * (len(heldout["input_ids"]) // batch))}
    if next_sentence:
        metrics["heldout_next_sentence_accuracy"] = (total["next_sentence_correct"]
                                                     / total["next_sentence_count"])
    for variable, value in zip(model.trainable_variables, state[0]):
        variable.assign(value)
    weights = {name: np.asarray(variable.numpy(), np.float32)
               for name, variable in variable_map.items() if name.startswith("bert/")}
    return weights, metrics


def sinusoidal_positions(positions, width, scale):
    """[positions, width] sines and cosines of Vaswani et al., scaled to standard deviation
    `scale` (BERT's `initializer_range`, the other embeddings' scale)."""
    position = np.arange(positions)[:, None]
    rate = 1.0 / 10000 ** (np.arange(0, width, 2) / width)
    table = np.zeros((positions, width))
    table[:, 0::2] = np.sin(position * rate)
    table[:, 1::2] = np.cos(position * rate)
    return (table * scale / table.std()).astype(np.float32)


class Finetuner:
    """One jitted classifier (the package's `build_classifier`, mean pooling) for every run of a
    task and model size: a run resets the weights, the optimizer and the seeds."""

    def __init__(self, task, config, num_labels, batch_size=32, eval_batch_size=256):
        import jax
        import keras

        from bert_keras import optimization
        from bert_keras.finetuning.task_models import build_classifier, task_weight_map

        self.task, self.batch_size, self.eval_batch_size = task, batch_size, eval_batch_size
        self.model = build_classifier(config, num_labels=num_labels, pooling="mean")
        self.variables = task_weight_map(self.model)
        self.config = config
        self.optimizer = optimization.AdamWeightDecay(
            learning_rate=1e-3, weight_decay=0.01, epsilon=1e-6, summed_gradients=False,
            global_clipnorm=1.0)
        self.optimizer.exclude_from_weight_decay(
            var_list=optimization.no_decay_variables(self.variables))
        self.optimizer.build(self.model.trainable_variables)
        self.lr_index = [i for i, v in enumerate(self.optimizer.variables)
                         if "learning_rate" in v.path]
        assert len(self.lr_index) == 1, [v.path for v in self.optimizer.variables]
        self.lr_index = self.lr_index[0]
        model, optimizer = self.model, self.optimizer
        ops = keras.ops

        def loss_fn(trainable, non_trainable, inputs, labels, weights):
            logits, non_trainable = model.stateless_call(trainable, non_trainable, inputs,
                                                         training=True)
            per_example = ops.sparse_categorical_crossentropy(labels, logits, from_logits=True)
            return ops.sum(per_example * weights) / ops.maximum(ops.sum(weights), 1.0), non_trainable

        @jax.jit
        def train_step(state, inputs, labels, weights):
            trainable, non_trainable, optimizer_state = state
            (loss, non_trainable), grads = jax.value_and_grad(loss_fn, has_aux=True)(
                trainable, non_trainable, inputs, labels, weights)
            trainable, optimizer_state = optimizer.stateless_apply(optimizer_state, grads, trainable)
            return (trainable, non_trainable, optimizer_state), loss

        @jax.jit
        def predict_step(state, inputs):
            return model.stateless_call(state[0], state[1], inputs, training=False)[0]

        self.train_step, self.predict_step = train_step, predict_step
        self.dropout_seeds = [i for i, v in enumerate(self.model.non_trainable_variables)
                              if "seed_generator" in v.path]

    def _initial_state(self, init_weights, seed):
        from bert_keras.finetuning.task_models import initial_head_weights
        from bert_keras.model import checkpoint_names

        arrays = initial_head_weights(self.variables, self.config.initializer_range, seed)
        encoder = {k: v for k, v in init_weights.items() if k in self.variables}
        checkpoint_names.assign_weights(self.variables, {**encoder, **arrays})
        non_trainable = [v.value for v in self.model.non_trainable_variables]
        for slot, index in enumerate(self.dropout_seeds):
            non_trainable[index] = np.array([seed, slot], non_trainable[index].dtype)
        optimizer_state = [np.zeros(v.shape, v.dtype) for v in self.optimizer.variables]
        return [[v.value for v in self.model.trainable_variables], non_trainable, optimizer_state]

    def run(self, init_weights, train, learning_rate, epochs, seed, evaluate):
        from bert_keras import optimization

        inputs, labels = train
        num = len(labels)
        state = self._initial_state(init_weights, seed)
        steps_per_epoch = math.ceil(num / self.batch_size)
        total = steps_per_epoch * epochs
        warmup = int(total * 0.1)
        step = 0
        losses = []
        for epoch in range(epochs):
            order = np.random.default_rng([seed, epoch]).permutation(num)
            for start in range(0, num, self.batch_size):
                index = order[start:start + self.batch_size]
                pad = self.batch_size - len(index)
                weights = np.concatenate([np.ones(len(index)), np.zeros(pad)]).astype(np.float32)
                index = np.concatenate([index, np.zeros(pad, index.dtype)])
                state[2][self.lr_index] = np.asarray(optimization.warmup_linear_decay(
                    step, learning_rate, warmup, total), np.float32)
                new_state, loss = self.train_step(
                    tuple(state), {k: v[index] for k, v in inputs.items()}, labels[index], weights)
                state = list(new_state)
                step += 1
            losses.append(float(loss))
        if not all(math.isfinite(v) for v in losses):
            raise FloatingPointError(f"fine-tuning loss {losses[-1]} at learning rate {learning_rate}")
        return {name: self.score(state, data) for name, data in evaluate.items()}

    def score(self, state, data):
        """{metric: value} of GLUE's metrics for the task (`glue.compute_metrics`)."""
        from bert_keras.finetuning.glue import data as glue

        inputs, labels = data
        num, batch = len(labels), self.eval_batch_size
        predicted = []
        for start in range(0, num, batch):
            index = np.arange(start, min(num, start + batch))
            index = np.concatenate([index, np.zeros(batch - len(index), index.dtype)])
            logits = self.predict_step(tuple(state[:2]), {k: v[index] for k, v in inputs.items()})
            predicted.append(np.asarray(logits).argmax(-1))
        predicted = np.concatenate(predicted)[:num]
        return {name: float(value) for name, value in
                glue.compute_metrics(self.task, predicted, labels).items()}


def _task_arrays(data, task):
    def split(name):
        inputs = {key: data[f"{task}/{name}/{key}"].astype(np.int32)
                  for key in ("input_word_ids", "input_mask", "input_type_ids")}
        return inputs, data[f"{task}/{name}/labels"].astype(np.int32)
    return split("train"), split("dev")


def _rows(split, index):
    inputs, labels = split
    return {k: v[index] for k, v in inputs.items()}, labels[index]


def compare(finetuner, sides, task_data, args, log):
    """The main job's comparison (`finetuning.transfer`) on arrays: selection on held-out
    training rows, seeds on dev, a learning curve; scored with the task's paper metric (all of
    GLUE's metrics for the task are kept per run)."""
    from bert_keras.finetuning.glue import data as glue

    metric = glue.task_spec(finetuner.task).paper_metric
    train, dev = task_data
    num_rows = len(train[1])
    held_out = _rows(train, np.arange(num_rows - args.selection_examples, num_rows))
    grid = [(float(lr), int(e)) for lr in args.learning_rates.split(",")
            for e in args.epochs.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    headline = _rows(train, np.arange(args.train_examples))
    majority = int(np.bincount(train[1][:args.train_examples]).argmax())
    result = {"metric": metric,
              "majority": glue.compute_metrics(finetuner.task, np.full(len(dev[1]), majority), dev[1]),
              "majority_share": float(max(np.mean(dev[1] == k) for k in np.unique(dev[1])))}
    for side, weights in sides.items():
        began = time.time()
        selection = {}
        for lr, epochs in grid:
            selection[(lr, epochs)] = finetuner.run(weights, headline, lr, epochs, seeds[0],
                                                    {"selection": held_out})["selection"][metric]
        (lr, epochs), _ = max(selection.items(), key=lambda item: item[1])
        dev_runs = [finetuner.run(weights, headline, lr, epochs, seed, {"dev": dev})["dev"]
                    for seed in seeds]
        dev_scores = [run[metric] for run in dev_runs]
        curve = {}
        headline_steps = math.ceil(args.train_examples / finetuner.batch_size) * epochs
        for count in [int(c) for c in args.curve.split(",") if c]:
            if count + args.selection_examples > num_rows:
                continue
            curve_epochs = max(epochs, math.ceil(headline_steps / math.ceil(count / finetuner.batch_size))) \
                if count < args.train_examples else epochs
            curve[count] = finetuner.run(weights, _rows(train, np.arange(count)), lr, curve_epochs,
                                         seeds[0], {"dev": dev})["dev"][metric]
        result[side] = {"selection": {f"lr={k[0]:g},epochs={k[1]}": v for k, v in selection.items()},
                        "chosen": {"learning_rate": lr, "epochs": epochs},
                        "dev": dev_scores, "dev_metrics": dev_runs,
                        "dev_mean": float(np.mean(dev_scores)),
                        "dev_std": float(np.std(dev_scores)), "curve": curve,
                        "seconds": round(time.time() - began, 1)}
        log(f"  {side}: lr {lr:g}, {epochs} epochs, dev {metric} {np.mean(dev_scores):.3f} +- "
            f"{np.std(dev_scores):.3f} ({', '.join(f'{v:.3f}' for v in dev_scores)}); curve "
            + " ".join(f"{k}:{v:.3f}" for k, v in curve.items()))
    return result


# The left-to-right ablation needs next-token targets (`pretraining.dynamic_masking`, TensorFlow);
# it is not offered here.
OBJECTIVES = {"mlm_nsp": dict(next_sentence=True, causal=False),
              "mlm": dict(next_sentence=False, causal=False)}


def run(args):
    import jax
    import keras

    import bert_keras
    from bert_keras.finetuning.task_models import random_encoder_weights

    began = time.time()
    data = np.load(args.data)
    meta = json.loads(bytes(data["meta"]).decode())
    records, heldout = _records(data, "train"), _records(data, "heldout")
    if args.uniform_ids:  # a timing check only: the text becomes noise
        real = records["input_ids"] > 0
        records["input_ids"][real] = np.random.default_rng(0).integers(
            5, meta["vocab_size"], int(real.sum()))
    tasks = [t for t in args.tasks.split(",") if t]
    unigram = np.bincount(records["masked_lm_ids"][records["masked_lm_weights"] > 0])
    most_frequent = int(unigram.argmax())
    weights_h = heldout["masked_lm_weights"] > 0
    header = {
        "device": str(jax.devices()[0].device_kind), "backend": keras.backend.backend(),
        "jax": jax.__version__, "keras": keras.__version__, "data": meta,
        "options": {k: v for k, v in vars(args).items() if k != "func"},
        "training_records": int(len(records["input_ids"])),
        "heldout_baselines": {
            "most_frequent_token": float(np.mean(heldout["masked_lm_ids"][weights_h] == most_frequent)),
            "next_sentence_majority": float(max(np.mean(heldout["next_sentence_labels"] == k)
                                                for k in (0, 1)))}}
    results = Results(args.output, header, args.name)

    def log(message):
        print(f"[{time.time() - began:5.0f}s] {message}", flush=True)

    log(f"{header['device']}: {len(records['input_ids'])} training records, baselines "
        f"{header['heldout_baselines']}")
    plan = []
    for preset in args.presets.split(","):
        for objective in args.objectives.split(","):
            plan.append((preset, objective))
    skipped = []
    finetuners = {}
    for preset, objective in plan:
        if time.time() - began > args.time_budget:
            skipped.append(f"{preset}/{objective}")
            continue
        config = bert_keras.BertConfig.from_preset(preset, vocab_size=meta["vocab_size"],
                                                   max_position_embeddings=max(
                                                       512, meta["max_seq_length"]))
        log(f"pre-training {preset} {objective}: {args.steps} steps of {args.batch_size}")
        try:
            pretrained, metrics = pretrain(config, records, heldout, args=args, log=log,
                                           **OBJECTIVES[objective])
        except FloatingPointError as error:  # recorded; the other stages still run
            log(f"  failed: {error}")
            results.add(f"{preset}/{objective}", {"preset": preset, "objective": objective,
                                                  "failed": str(error)})
            continue
        log(f"  done: {metrics['steps']} steps in {metrics['seconds']}s, held-out MLM "
            f"{metrics['heldout_masked_lm_accuracy']:.3f}"
            + (f", NSP {metrics['heldout_next_sentence_accuracy']:.3f}"
               if "heldout_next_sentence_accuracy" in metrics else ""))
        stage = {"preset": preset, "objective": objective, "pretraining": metrics, "tasks": {}}
        for task in tasks:
            if time.time() - began > args.time_budget:
                stage["tasks"][task] = "skipped: --time_budget"
                continue
            train, dev = _task_arrays(data, task)
            key = (preset, task)
            if key not in finetuners:
                finetuners[key] = Finetuner(task, config, int(train[1].max()) + 1)
            sides = {"pre-trained": pretrained}
            if objective == args.objectives.split(",")[0]:
                sides["random init"] = random_encoder_weights(config, args.seed)
            log(f"fine-tuning {task} ({preset}, {objective})")
            stage["tasks"][task] = compare(finetuners[key], sides, (train, dev), args, log)
            results.add(f"{preset}/{objective}", stage)
        results.add(f"{preset}/{objective}", stage)
    results.data["skipped"] = skipped
    results.data["seconds"] = round(time.time() - began, 1)
    results.write()
    log(f"wrote {args.output}" + (f"; skipped {skipped}" if skipped else ""))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("prepare", help="vocabulary, records and tasks to one .npz (TensorFlow)")
    p.add_argument("--books_dir", required=True)
    p.add_argument("--glue_dir", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--work_dir", default="/tmp/bert_keras_transfer_device")
    p.add_argument("--tasks", default="sst2,mrpc,cola")
    p.add_argument("--dupe_factor", type=int, default=5)
    p.add_argument("--vocab_size", type=int, default=5000)
    p.add_argument("--max_seq_length", type=int, default=128)
    p.add_argument("--with_wikitext", type=int, default=1)
    p.set_defaults(func=prepare)
    r = commands.add_parser("run", help="pre-train and compare on the JAX backend")
    r.add_argument("--data", required=True)
    r.add_argument("--output", default=None,
                   help="a JSON file; by default the run `--name` in "
                        "benchmarks/results/transfer_device_<machine class>.json")
    r.add_argument("--name", default="transfer_device",
                   help="the run's name there (transfer_device_<variant>)")
    r.add_argument("--presets", default="mini")
    r.add_argument("--objectives", default="mlm_nsp", help=f"of {sorted(OBJECTIVES)}; the first "
                   "is also compared with random initialization")
    r.add_argument("--tasks", default="sst2")
    r.add_argument("--steps", type=int, default=6000)
    r.add_argument("--batch_size", type=int, default=256)
    r.add_argument("--steps_per_call", type=int, default=100,
                   help="Pre-training steps per compiled call (a scan over the chunk).")
    r.add_argument("--learning_rate", type=float, default=1e-3)
    r.add_argument("--warmup_fraction", type=float, default=0.05)
    r.add_argument("--precision", default="bfloat16", choices=("bfloat16", "float32"))
    r.add_argument("--pretrain_seconds", type=float, default=0,
                   help="Stop a pre-training run early after this long (0: never); recorded.")
    r.add_argument("--time_budget", type=float, default=1e9,
                   help="Start no new stage after this many seconds.")
    r.add_argument("--position_init", default="normal", choices=("normal", "sinusoidal"),
                   help="Position embeddings at the start of pre-training: BERT's truncated "
                   "normal, or sines and cosines at the same scale.")
    r.add_argument("--uniform_ids", type=int, default=0,
                   help="Timing check: replace the records' tokens by uniformly drawn ids, as "
                   "bench_pretraining_step.py's batches are (a step slower on real text than on "
                   "these points at the embedding gradient's scatter of repeated ids).")
    r.add_argument("--seed", type=int, default=12345)
    r.add_argument("--train_examples", type=int, default=1000)
    r.add_argument("--selection_examples", type=int, default=500)
    r.add_argument("--learning_rates", default="1e-4,3e-4,1e-3,3e-3")
    r.add_argument("--epochs", default="3,6")
    r.add_argument("--seeds", default="1,2,3")
    r.add_argument("--curve", default="100,300,3000")
    r.set_defaults(func=run)
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse_args()
    arguments.func(arguments)
