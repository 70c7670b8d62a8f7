"""The main job's last stage: the exported SavedModels served in a fresh process that imports
only TensorFlow and tensorflow-text, on masked sentences and raw sentences to classify.
"""

import json
import os

from bert_keras.common.files import write_text_atomic
from bert_keras.main_job.options import LABEL_MEANINGS

SERVING_DEMO_SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                   "export", "serving_demo.py")


def serve_in_fresh_process(request, work_dir, environment=None):
    """Runs `bert_keras/export/serving_demo.py` on `request` in a new Python process that
    imports only TensorFlow and tensorflow-text (`environment`: variables to set there, e.g.
    `TF_ENABLE_ONEDNN_OPTS`); returns its response dict."""
    import subprocess
    import sys

    request_path = os.path.join(work_dir, "demo_request.json")
    response_path = os.path.join(work_dir, "demo_response.json")
    write_text_atomic(request_path, json.dumps(request, indent=2) + "\n")
    if os.path.exists(response_path):
        os.remove(response_path)
    completed = subprocess.run([sys.executable, SERVING_DEMO_SCRIPT, request_path,
                                response_path], capture_output=True, text=True, check=False,
                               env={**os.environ, **(environment or {})})
    if completed.returncode != 0:
        raise RuntimeError(f"the serving demo process failed (exit {completed.returncode}):\n"
                           f"{completed.stderr[-4000:]}")
    with open(response_path, encoding="utf-8") as f:
        response = json.load(f)
    if response["loaded_modules"]:
        raise RuntimeError(f"the serving process loaded {response['loaded_modules']}")
    return response


def demo_stage(options, paths):
    response = serve_in_fresh_process({
        "preprocessor": paths["preprocessor"], "encoder": paths["encoder"],
        "vocab_file": paths["vocab"], "seq_length": options.max_seq_length,
        "masked_sentences": list(options.sentences), "classifier": paths["classifier"],
        "classify_sentences": list(options.sentences_to_classify())}, paths["root"])
    lines = []
    for sentence, per_mask in zip(options.sentences, response["masked_word_predictions"]):
        lines.append(sentence)
        for candidates in per_mask:
            lines.append("    [MASK] -> " + "  ".join(f"{token} ({p:.2f})" for token, p in candidates))
    meanings = LABEL_MEANINGS.get(options.served_task(), {})
    classifications = []
    for sentence, (label, probability) in zip(options.sentences_to_classify(),
                                              response["classifications"]):
        meaning = meanings.get(label, label)
        classifications.append(f"{meaning:>12} ({probability:.2f})  {sentence}")
    return {"summary": f"{len(options.sentences)} masked sentences, "
                       f"{len(options.sentences_to_classify())} classified, in a fresh process",
            "predictions": lines, "classifications": classifications}
