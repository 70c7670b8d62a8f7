"""What a `create_pretraining_data` run reports: its statistics, summed from those of its blocks and
written to `stats.json`, their human-readable summary, and the progress bar on stderr.
"""

import sys
import time

import numpy as np


def sum_stats(block_stats, corpus_stats, config, num_files, block_bytes, seconds):
    """The statistics of a run (the dict written to `stats.json`) from those of its blocks and
    of its corpus reader; `seconds` is the run's wall time."""
    totals = {}
    histogram = np.zeros([config.options.max_seq_length + 1], np.int64)
    for stats in block_stats:
        for key, value in stats.items():
            if key == "length_histogram":
                histogram += np.asarray(value, np.int64)
            else:
                totals[key] = totals.get(key, 0) + value
    instances = totals.get("instances", 0)
    masked = totals.get("masked_tokens", 0)
    replaced = max(1, masked)
    return {
        "input_files": num_files,
        "input_bytes": corpus_stats.get("bytes", 0),
        "input_lines": corpus_stats.get("lines", 0),
        "invalid_utf8_lines": corpus_stats.get("invalid_utf8_lines", 0),
        "skipped_invalid_utf8_lines": corpus_stats.get("skipped_lines", 0),
        "headings_dropped": corpus_stats.get("headings", 0),
        "documents_split_at_block_size": corpus_stats.get("split_documents", 0),
        "blocks": len(block_stats),
        "block_bytes": block_bytes,
        "documents": corpus_stats.get("documents", 0),
        "document_pieces": totals.get("documents", 0),
        "empty_documents_dropped": totals.get("empty_documents", 0),
        "one_sentence_documents": totals.get("one_sentence_documents", 0),
        "sentences": totals.get("sentences", 0),
        "empty_sentences_dropped": totals.get("empty_sentences", 0),
        "sentences_longer_than_max_seq_length": totals.get("long_sentences", 0),
        "tokens": totals.get("tokens", 0),
        "instances": instances,
        "instance_tokens": totals.get("instance_tokens", 0),
        "masked_tokens": masked,
        "masked_fraction": masked / max(1, totals.get("instance_tokens", 0)),
        "random_next_fraction": totals.get("random_next", 0) / max(1, instances),
        "mask_token_share": totals.get("replaced_by_mask", 0) / replaced,
        "kept_token_share": totals.get("kept_original", 0) / replaced,
        "random_token_share": totals.get("replaced_by_random", 0) / replaced,
        "mean_instance_length": totals.get("instance_tokens", 0) / max(1, instances),
        "sequence_length_histogram": histogram.tolist(),
        "num_output_shards": config.num_output_shards,
        "seconds": round(seconds, 3),
    }


def format_stats(stats, bins=8):
    """A human-readable summary of `stats` (what `run` prints)."""
    histogram = np.asarray(stats["sequence_length_histogram"])
    max_length = len(histogram) - 1
    edges = np.linspace(0, max_length + 1, bins + 1).astype(int)
    total = max(1, histogram.sum())
    rows = []
    for low, high in zip(edges[:-1], edges[1:]):
        share = histogram[low:high].sum() / total
        rows.append(f"    {low:4d}-{high - 1:<4d} {100 * share:5.1f}% {'#' * int(share * 50)}")
    lines = [
        f"documents {stats['documents']:,}  sentences {stats['sentences']:,}  "
        f"tokens {stats['tokens']:,}  instances {stats['instances']:,}",
        f"masked fraction {stats['masked_fraction']:.4f}  random next "
        f"{stats['random_next_fraction']:.4f}  replacements [MASK]/kept/random "
        f"{stats['mask_token_share']:.3f}/{stats['kept_token_share']:.3f}/"
        f"{stats['random_token_share']:.3f}",
        f"invalid UTF-8 lines {stats['invalid_utf8_lines']:,} ("
        f"{stats['skipped_invalid_utf8_lines']:,} skipped)  empty documents dropped "
        f"{stats['empty_documents_dropped']:,}  sentences longer than max_seq_length "
        f"{stats['sentences_longer_than_max_seq_length']:,}",
        "sequence lengths:",
    ] + rows
    return "\n".join(lines)


class Progress:
    """A one-line progress bar on stderr (a plain line every 10 s when stderr is not a terminal)."""

    def __init__(self, enabled):
        self.enabled = enabled
        self.start = time.time()
        self.last = 0.0
        self.interactive = sys.stderr.isatty()

    def update(self, phase, fraction, instances, force=False):
        if not self.enabled:
            return
        now = time.time()
        if not force and now - self.last < (0.5 if self.interactive else 10.0):
            return
        self.last = now
        elapsed = now - self.start
        fraction = min(1.0, max(0.0, fraction))
        bar = "#" * int(fraction * 30)
        line = (f"{phase:<7}[{bar:<30}] {100 * fraction:5.1f}%  {instances:,} instances  "
                f"{elapsed:,.1f}s")
        if self.interactive:
            sys.stderr.write("\r" + line.ljust(90) + ("\n" if force else ""))
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()
