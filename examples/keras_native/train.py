"""A Native API example: an MLP on scikit-learn's digits, written as a plain Keras script.

python train.py                 # submit to the master (random search, 3 trials) and exit
python train.py --local         # train here, for searcher.max_length, metrics as a table
python train.py --local --test  # one batch, one validation, one checkpoint: a smoke test
"""

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import determined as det  # noqa: E402

config = {
    "name": "keras-native-digits",
    "hyperparameters": {
        "global_batch_size": 32,
        "hidden": det.Integer(48, 96),
        "learning_rate": det.Log(-2.7, -2.2, base=10),
    },
    "searcher": {
        "name": "random",
        "metric": "val_accuracy",
        "smaller_is_better": False,
        "max_trials": 3,
        "max_length": {"batches": 400},
    },
    "scheduling_unit": 50,
    "min_validation_period": {"batches": 200},
    "max_restarts": 0,
}

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument(
    "--local", action="store_true", help="train in this process instead of submitting"
)
parser.add_argument("--test", action="store_true", help="one batch, validation and checkpoint")
parser.add_argument(
    "--master", default=None, help="master URL (default: DET_MASTER or the local master)"
)
parser.add_argument("--max-batches", type=int, default=None, help="override searcher.max_length")
parser.add_argument("--searcher", choices=["random", "single"], default="random")
parser.add_argument("--seed", type=int, default=None, help="reproducibility.experiment_seed")
args = parser.parse_args()
if args.max_batches:
    config["searcher"]["max_length"] = {"batches": args.max_batches}
if args.searcher == "single":
    config["searcher"] = {**config["searcher"], "name": "single"}
    config["searcher"].pop("max_trials")
    config["hyperparameters"].update(hidden=64, learning_rate=0.003)
if args.seed is not None:
    config["reproducibility"] = {"experiment_seed": args.seed}

context = det.experimental.keras.init(
    config,
    local=args.local,
    test=args.test,
    context_dir=os.path.dirname(os.path.abspath(__file__)),
    master_url=args.master,
)

# Everything below runs in the trial (the script is re-executed there), or here with --local.
import keras  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

x, y = load_digits(return_X_y=True)
x = (x / 16.0).astype("float32")
x_train, x_val, y_train, y_val = train_test_split(x, y, test_size=0.25, random_state=0, stratify=y)

model = context.wrap_model(
    keras.Sequential(
        [
            keras.Input((64,)),
            keras.layers.Dense(context.get_hparam("hidden"), activation="relu"),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
)
model.compile(
    optimizer=keras.optimizers.Adam(context.get_hparam("learning_rate")),
    loss="sparse_categorical_crossentropy",
    metrics=["accuracy"],
)
history = model.fit(x_train, y_train, validation_data=(x_val, y_val.astype(np.int64)), epochs=1)
