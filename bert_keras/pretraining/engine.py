"""What the pre-training recipe (`bert_keras.pretraining.run`) asks of the loop that trains the
model: the interface two engines implement.

- `tensorflow_engine.TensorFlowEngine`: the `tf.function` step of `pretraining.step` under a
  `tf.distribute` strategy (TPU, GPUs, CPUs, several workers), `tf.train.Checkpoint`s
  (`checkpoints/ckpt-<step>.index`, `.data-*`).
- `keras_engine.KerasEngine`: `keras.Model.fit` on a Keras backend other than TensorFlow (JAX),
  data parallel over the local devices, `.npz` checkpoints (`checkpoints/ckpt-<step>.npz`).

The recipe keeps the policy: which checkpoint to resume and which output directory to refuse,
the batch and precision checks, the evaluation's sums and file, the model directory written,
and every message a user reads about them. An engine builds the model, restores and saves its
own checkpoints, runs training steps and gives the sums of evaluation batches. The recipe picks
one engine per run, by the Keras backend (`run.engine_class`).
"""


class LossNotFinite(Exception):
    """Raised by `Engine.train` when a step's loss is not finite, before that step is saved.

    `exact` says whether `step` is the failing step itself (False: the failing step is at or
    before `step`, one of the steps run in one execution)."""

    def __init__(self, loss, step, exact=True):
        super().__init__(f"loss {loss} at step {step}")
        self.loss, self.step, self.exact = loss, step, exact


class Engine:
    """One run's model, optimizer and checkpoints on one backend.

    Made with the run's `PretrainingOptions` and its purpose ("train", "eval" or "export"); a
    `tf.distribute` strategy, where given, is the TensorFlow engine's.
    """

    backend = None  # the Keras backend whose checkpoints the engine writes, for messages
    description = None  # the engine in words, for messages
    loss_scaling = True  # whether float16 training (which needs loss scaling) is supported
    is_chief = True  # whether this process writes the output directory
    replicas = 1  # replicas the global batch is divided among by `train` (beyond data parallel)
    processes = 1  # processes of one run that each read their own share of the record files
    strategy = None  # the `tf.distribute` strategy, for the device's precision

    @staticmethod
    def latest_checkpoint(output_dir):
        """The path of this engine's latest whole checkpoint in `output_dir`, or None."""
        raise NotImplementedError

    def build(self, config):
        """Builds the model of `config` (and the optimizer, to train) under the engine's
        devices, from the current Keras seed."""
        raise NotImplementedError

    def weights(self):
        """{original checkpoint name: variable} of the built model, heads included."""
        raise NotImplementedError

    def restore(self, path):
        """Restores a `latest_checkpoint` (the optimizer too, to train); returns its step."""
        raise NotImplementedError

    @property
    def step(self):
        """The optimizer steps taken (int): 0 when built, a checkpoint's after `restore`."""
        raise NotImplementedError

    def train(self, records, start):
        """Trains from step `start` to `num_train_steps`, saving checkpoints on the way.

        `records(batch_size, start_step=0, drop_remainder=True)` is the run's
        `dataset_fn(input_context)` of `batch_size` records a batch, starting `start_step`
        batches into the record stream. Returns the last metrics (floats); raises
        `LossNotFinite`."""
        raise NotImplementedError

    def check_same_checkpoint(self, latest):
        """Refuses a run whose processes would resume from different checkpoints (`latest`
        here: a path or None), e.g. an output directory that is not one storage shared by all.
        Nothing to check for one process (the TensorFlow engine's workers read the chief's
        checkpoints through `tf.train.Checkpoint`)."""

    def barrier(self, name):
        """Waits until every process of the run has reached the barrier `name`."""

    def batch_sums(self, records):
        """Yields, for each evaluation batch of `records` (as in `train`, read once), the
        {`losses.SUM_NAMES` and "examples": float} of the batch, dropout off."""
        raise NotImplementedError


__all__ = ["Engine", "LossNotFinite"]
