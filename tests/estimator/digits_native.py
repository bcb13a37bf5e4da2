"""An Estimator Native API script (the tests' fixture): a DNNClassifier on scikit-learn's digits.

python digits_native.py                 # submit to the master (DET_MASTER) and exit
python digits_native.py --local         # train here for searcher.max_length
python digits_native.py --local --test  # one batch, one validation, one checkpoint
"""

import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import determined as det  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--local", action="store_true")
parser.add_argument("--test", action="store_true")
parser.add_argument("--max-batches", type=int, default=300)
parser.add_argument("--max-records", type=int, default=None, help="max_length in records instead")
parser.add_argument("--seed", type=int, default=1234)
parser.add_argument("--storage", default=None, help="a shared_fs host_path for checkpoints")
args = parser.parse_args()

config = {
    "name": "estimator-native-digits",
    "hyperparameters": {"global_batch_size": 32, "hidden": 32, "learning_rate": 0.05},
    "searcher": {
        "name": "single",
        "metric": "accuracy",
        "smaller_is_better": False,
        "max_length": {"records": args.max_records}
        if args.max_records is not None
        else {"batches": args.max_batches},
    },
    "scheduling_unit": 50,
    "min_validation_period": {"batches": 200},
    # A fixed seed makes the accuracy assertions deterministic, not a draw of the initial weights.
    "reproducibility": {"experiment_seed": args.seed},
    "max_restarts": 0,
}
if args.storage:
    config["checkpoint_storage"] = {
        "type": "shared_fs",
        "host_path": args.storage,
        "storage_path": "ckpts",
    }

context = det.experimental.estimator.init(
    config, local=args.local, test=args.test, context_dir=os.path.dirname(os.path.abspath(__file__))
)

import tensorflow as tf  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

tf.get_logger().setLevel("ERROR")
x, y = load_digits(return_X_y=True)
x = (x / 16.0).astype("float32")
batch = context.get_per_slot_batch_size()


def train_input_fn():
    dataset = tf.data.Dataset.from_tensor_slices(({"x": x[:1400]}, y[:1400]))
    return context.wrap_dataset(dataset).shuffle(1400).repeat().batch(batch)


def eval_input_fn():
    return context.wrap_dataset(
        tf.data.Dataset.from_tensor_slices(({"x": x[1400:]}, y[1400:]))
    ).batch(batch)


estimator = tf.estimator.DNNClassifier(
    hidden_units=[context.get_hparam("hidden")],
    feature_columns=[tf.feature_column.numeric_column("x", shape=(64,))],
    n_classes=10,
    optimizer=lambda: context.wrap_optimizer(
        tf.keras.optimizers.legacy.Adam(context.get_hparam("learning_rate"))
    ),
    config=context.wrap_run_config(tf.estimator.RunConfig()),
)
metrics, exports = context.train_and_evaluate(
    estimator,
    tf.estimator.TrainSpec(
        train_input_fn, max_steps=10**6
    ),  # max_steps is ignored: the searcher decides
    tf.estimator.EvalSpec(eval_input_fn, steps=None),
)
step = int(estimator.get_variable_value("global_step"))
print(
    "RESULT "
    + json.dumps({"metrics": metrics, "global_step": step, "model_dir": estimator.model_dir}),
    flush=True,
)
