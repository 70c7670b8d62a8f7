"""Token tagging step for step against Hugging Face's `BertForTokenClassification`.

The same tiny BERT (drawn by PyTorch, converted for ours), the same head, a batch of CoNLL
sentences with all four entity types, of mixed lengths, with words cut into several wordpieces
and padding: the loss, the gradients of the head and of an encoder layer, and the weights after
three AdamW steps (warm-up, weight decay off biases and LayerNorm, clipping at 1.0) must agree
to float32 rounding. Ours runs the code `run_finetuning` runs: the task's features, sample
weights and compiled loss, `create_finetuning_optimizer`, Keras' compiled train step.
"""

import dataclasses
import os

import numpy as np
import pytest

from helpers.support import required_module

torch = required_module("torch", 'pip install -e ".[test]"')
transformers = required_module("transformers", 'pip install -e ".[test]"')

import keras  # noqa: E402

from bert_keras.finetuning.run import create_finetuning_optimizer  # noqa: E402
from bert_keras.finetuning.task import FinetuningOptions, get_task  # noqa: E402
from bert_keras.model import checkpoint_names  # noqa: E402
from bert_keras.model.encoder import build_encoder  # noqa: E402
from bert_keras.modeldir.convert import convert_hf_checkpoint  # noqa: E402
from bert_keras.modeldir.model_dir import ModelDir  # noqa: E402

# Words the vocabulary lacks ("blackburn", "commission", "brussels", "thursday") are cut into
# wordpieces; only the first carries the word's tag.
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "eu", "rejects", "german", "call", "to",
         "boycott", "british", "lamb", ".", "peter", "black", "##burn", "bru", "##ss", "##els",
         "the", "european", "com", "##mission", "said", "on", "thurs", "##day", "it", "with",
         "advice", "consumers", "shun", "until", "scientists", "sheep", "in", "new", "york",
         "reuters", "reported", "john", "smith", "of", "ibm", "visited", "paris", ","]
CONLL = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O
to TO B-VP O
boycott VB I-VP O
British JJ B-NP B-MISC
lamb NN I-NP O
. . O O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER

BRUSSELS NNP B-NP B-LOC
Thursday NNP B-NP O

-DOCSTART- -X- -X- O

The DT B-NP O
European NNP I-NP B-ORG
Commission NNP I-NP I-ORG
said VBD B-VP O
on IN B-PP O
Thursday NNP B-NP O
it PRP B-NP O
rejects VBZ B-VP O
German JJ B-NP B-MISC
advice NN I-NP O
to TO B-PP O
consumers NNS B-NP O
to TO B-VP O
shun VB I-VP O
British JJ B-NP B-MISC
lamb NN I-NP O
until IN B-SBAR O
scientists NNS B-NP O
said VBD B-VP O
. . O O

John NNP B-NP B-PER
Smith NNP I-NP I-PER
of IN B-PP O
IBM NNP B-NP B-ORG
visited VBD B-VP O
Paris NNP B-NP B-LOC
, , O O
Reuters NNP B-NP B-ORG
reported VBD B-VP O
. . O O

"""
SEQ_LENGTH = 32
LEARNING_RATE = 1e-3  # large, so that three steps move the weights well past rounding


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("tagging_reference")
    hf_dir, model_dir, data_dir = (os.path.join(root, name) for name in ("hf", "ours", "conll"))
    for folder in (hf_dir, data_dir):
        os.makedirs(folder)
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, classifier_dropout=0.0, num_labels=9)
    encoder = transformers.BertModel(config)  # with the pooler, which a model folder holds
    encoder.save_pretrained(hf_dir)
    reference = transformers.BertForTokenClassification(config)
    reference.bert.load_state_dict(encoder.state_dict(), strict=False)
    with open(os.path.join(hf_dir, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(VOCAB) + "\n")
    convert_hf_checkpoint(hf_dir, model_dir, do_lower_case=True)
    for name in ("train.txt", "dev.txt"):
        with open(os.path.join(data_dir, name), "w", encoding="utf-8") as f:
            f.write(CONLL)
    task = get_task("conll2003", data_dir, model_dir,
                    FinetuningOptions(max_seq_length=SEQ_LENGTH, dropout_rate=0.0))
    data = task.load("train", training=True)
    keras.utils.set_random_seed(1)
    our_config = dataclasses.replace(ModelDir.of(model_dir).config, hidden_dropout_prob=0.0,
                                     attention_probs_dropout_prob=0.0)
    model = task.build_model(build_encoder(our_config))
    weights = ModelDir.of(model_dir)
    checkpoint_names.assign_weights(checkpoint_names.encoder_weight_map(model.encoder),
                                    weights.weights, source=weights.weights_file)
    head = {name: np.asarray(variable) for name, variable in model.head.weight_map().items()}
    with torch.no_grad():  # ours' head in the reference: the updates are compared, not the draws
        reference.classifier.weight.copy_(torch.from_numpy(head["kernel"].T))
        reference.classifier.bias.copy_(torch.from_numpy(head["bias"]))
    return task, data, model, reference


def batch_of(data):
    inputs = {name: np.asarray(value) for name, value in data.inputs.items()}
    labels, weights = np.asarray(data.labels), np.asarray(data.sample_weight)
    their_inputs = {"input_ids": inputs["input_word_ids"], "attention_mask": inputs["input_mask"],
                    "token_type_ids": inputs["input_type_ids"]}
    their_inputs = {name: torch.from_numpy(value).long() for name, value in their_inputs.items()}
    their_labels = torch.from_numpy(np.where(weights > 0, labels, -100)).long()
    return inputs, labels, weights, their_inputs, their_labels


def test_the_batch_has_what_the_real_set_has(setup):
    _, data, _, _ = setup
    inputs, labels, weights, _, _ = batch_of(data)
    real = inputs["input_mask"].sum(1)
    assert len(set(real.tolist())) == len(real)  # mixed lengths, every row padded
    assert real.max() < SEQ_LENGTH
    # Non-first wordpieces: real tokens besides [CLS], [SEP] with weight 0.
    assert (real - 2 - weights.sum(1)).sum() >= 5
    assert {1, 3, 5, 7} <= set(labels[weights > 0].tolist())  # B-PER, B-ORG, B-LOC, B-MISC


def test_loss_gradients_and_three_steps_match_the_reference(setup):
    task, data, model, reference = setup
    inputs, labels, weights, their_inputs, their_labels = batch_of(data)
    import tensorflow as tf

    num_steps, warmup = 10, 1
    model.compile(optimizer=create_finetuning_optimizer(model, LEARNING_RATE, num_steps, warmup),
                  jit_compile=False, **task.compile_args())
    with tf.GradientTape() as tape:
        outputs = model(inputs, training=True)
        loss = model.compute_loss(x=inputs, y=labels, y_pred=outputs, sample_weight=weights,
                                  training=True)
    our_grads = dict(zip([id(v) for v in model.trainable_variables],
                         tape.gradient(loss, model.trainable_variables)))
    their_loss = reference(**their_inputs, labels=their_labels).loss
    their_loss.backward()
    assert float(loss) == pytest.approx(float(their_loss), abs=1e-5)
    # The reference's own mean over the labelled tokens, as a third opinion.
    assert float(their_loss) == pytest.approx(float(torch.nn.functional.cross_entropy(
        reference(**their_inputs).logits.reshape(-1, 9), their_labels.reshape(-1))), abs=1e-6)
    kernel = model.head.weight_map()["kernel"]
    np.testing.assert_allclose(np.asarray(our_grads[id(kernel)]),
                               reference.classifier.weight.grad.numpy().T, atol=1e-5)
    query = checkpoint_names.encoder_weight_map(model.encoder)[
        "bert/encoder/layer_1/attention/self/query/kernel"]
    np.testing.assert_allclose(np.asarray(our_grads[id(query)]),
                               reference.bert.encoder.layer[1].attention.self.query.weight.grad
                               .numpy().T, atol=1e-5)

    reference.zero_grad(set_to_none=True)
    decay = [p for n, p in reference.named_parameters() if "LayerNorm" not in n and "bias" not in n]
    no_decay = [p for n, p in reference.named_parameters() if "LayerNorm" in n or "bias" in n]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=LEARNING_RATE, betas=(0.9, 0.999), eps=1e-6)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: step / warmup if step < warmup else 1 - step / num_steps)
    for _ in range(4):  # the first step has a learning rate of 0 (warm-up)
        ours = model.train_on_batch(inputs, labels, sample_weight=weights, return_dict=True)
        theirs = reference(**their_inputs, labels=their_labels).loss
        optimizer.zero_grad(set_to_none=True)
        theirs.backward()
        torch.nn.utils.clip_grad_norm_(reference.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        assert ours["loss"] == pytest.approx(float(theirs), abs=1e-5)
    moved = np.abs(np.asarray(kernel) - reference.classifier.weight.detach().numpy().T)
    assert moved.max() < 1e-5
    np.testing.assert_allclose(np.asarray(query),
                               reference.bert.encoder.layer[1].attention.self.query.weight
                               .detach().numpy().T, atol=1e-5)
    np.testing.assert_allclose(
        np.asarray(checkpoint_names.encoder_weight_map(model.encoder)[
            "bert/embeddings/word_embeddings"]),
        reference.bert.embeddings.word_embeddings.weight.detach().numpy(), atol=1e-5)
