"""A v1 canned Estimator (`tf.compat.v1.estimator.DNNClassifier`) on scikit-learn's iris, as an
`EstimatorTrial` written the way Determined 0.13's examples are (mnist_estimator): TensorFlow and the
`determined.estimator` names imported at the top, a training dataset that does not repeat (the
harness repeats it), a parsing serving_input_receiver_fn, and a `det.estimator.RunHook`.

Run with `entrypoint: iris_v1_trial:IrisTrial` (the tests' fixture; no downloads).
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from determined import estimator  # noqa: E402
from determined.estimator import (  # noqa: E402
    EstimatorTrial,
    EstimatorTrialContext,
    ServingInputReceiverFn,
)

NUM_FEATURES = 4
NUM_CLASSES = 3
FEATURE = "measurements"

CONFIG = {
    "hyperparameters": {
        "global_batch_size": 16,
        "learning_rate": 0.01,
        "hidden_layer_1": 16,
        "hidden_layer_2": 16,
    },
    "searcher": {
        "name": "single",
        "metric": "accuracy",
        "smaller_is_better": False,
        "max_length": {"batches": 200},
    },
    "min_validation_period": {"batches": 100},
    "scheduling_unit": 50,
    "reproducibility": {"experiment_seed": 7},
    "max_restarts": 0,
}


def iris_split():
    """(train_x, train_y, validation_x, validation_y): 120 and 30 shuffled, standardized rows of iris."""
    from sklearn.datasets import load_iris

    x, y = load_iris(return_X_y=True)
    order = np.random.RandomState(0).permutation(len(x))
    x = (x - x.mean(axis=0)) / x.std(axis=0)  # standardized: no dead ReLUs whatever the seed
    x, y = x[order].astype("float32"), y[order].astype("int64")
    return x[:120], y[:120], x[120:], y[120:]


class CheckpointNote(estimator.RunHook):
    """Writes a note into every checkpoint and records the callbacks it hears."""

    def __init__(self) -> None:
        self.events = []

    def on_checkpoint_load(self, checkpoint_dir: str) -> None:
        self.events.append("load")

    def on_checkpoint_end(self, checkpoint_dir: str) -> None:
        with open(os.path.join(checkpoint_dir, "note.txt"), "w") as f:
            f.write("written by a RunHook\n")
        self.events.append("checkpoint")

    def on_trial_close(self) -> None:
        self.events.append("close")


class IrisTrial(EstimatorTrial):
    def __init__(self, context: EstimatorTrialContext) -> None:
        self.context = context
        self.rank = self.context.distributed.get_rank()
        self.note = CheckpointNote()

    def build_estimator(self) -> tf.estimator.Estimator:
        optimizer = tf.compat.v1.train.AdamOptimizer(
            learning_rate=self.context.get_hparam("learning_rate"),
        )
        # Call `wrap_optimizer` immediately after creating your optimizer.
        optimizer = self.context.wrap_optimizer(optimizer)
        return tf.compat.v1.estimator.DNNClassifier(
            feature_columns=[tf.feature_column.numeric_column(FEATURE, shape=(NUM_FEATURES,))],
            n_classes=NUM_CLASSES,
            hidden_units=[
                self.context.get_hparam("hidden_layer_1"),
                self.context.get_hparam("hidden_layer_2"),
            ],
            config=tf.estimator.RunConfig(tf_random_seed=self.context.get_trial_seed()),
            optimizer=optimizer,
        )

    def _input_fn(self, x, y, shuffle: bool = False):
        def _fn() -> tf.data.Dataset:
            dataset = tf.data.Dataset.from_tensor_slices(({FEATURE: x}, y))
            # Call `wrap_dataset` immediately after creating your dataset.
            dataset = self.context.wrap_dataset(dataset)
            if shuffle:
                dataset = dataset.shuffle(len(x), seed=self.context.get_trial_seed())
            return dataset.batch(self.context.get_per_slot_batch_size())

        return _fn

    def build_serving_input_receiver_fns(self) -> dict[str, ServingInputReceiverFn]:
        column = tf.feature_column.numeric_column(FEATURE, shape=(NUM_FEATURES,))
        return {
            "iris_parsing": tf.estimator.export.build_parsing_serving_input_receiver_fn(
                tf.feature_column.make_parse_example_spec([column])
            )
        }

    def build_train_spec(self) -> tf.estimator.TrainSpec:
        train_x, train_y, _, _ = iris_split()
        return tf.estimator.TrainSpec(
            self._input_fn(train_x, train_y, shuffle=True), hooks=[self.note]
        )

    def build_validation_spec(self) -> tf.estimator.EvalSpec:
        _, _, val_x, val_y = iris_split()
        return tf.estimator.EvalSpec(self._input_fn(val_x, val_y), steps=None)
