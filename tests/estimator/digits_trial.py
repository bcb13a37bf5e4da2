"""An `EstimatorTrial` (the tests' fixture): a custom model_fn on scikit-learn's digits.

Run with `entrypoint: digits_trial:DigitsTrial`, or `python digits_trial.py` to submit it with
`det.experimental.create()` (DET_MASTER).
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import determined as det  # noqa: E402
from determined import estimator as det_estimator  # noqa: E402

CONFIG = {
    "hyperparameters": {"global_batch_size": 32, "learning_rate": 0.01},
    "searcher": {
        "name": "single",
        "metric": "accuracy",
        "smaller_is_better": False,
        "max_length": {"records": 9600},
    },
    "scheduling_unit": 100,
    "reproducibility": {"experiment_seed": 4321},
    "max_restarts": 0,
}


def _digits():
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    return (x / 16.0).astype("float32"), y.astype("int64")


def model_fn(features, labels, mode, params):
    import tensorflow as tf

    hidden = tf.keras.layers.Dense(32, activation="relu")(features["x"])
    logits = tf.keras.layers.Dense(10)(hidden)
    predictions = tf.argmax(logits, axis=1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"class": predictions})
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    if mode == tf.estimator.ModeKeys.EVAL:
        accuracy = tf.compat.v1.metrics.accuracy(labels=labels, predictions=predictions)
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={"accuracy": accuracy})
    optimizer = params["optimizer"]
    train_op = optimizer.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


class DigitsTrial(det_estimator.EstimatorTrial):
    def build_estimator(self):
        import tensorflow as tf

        optimizer = self.context.wrap_optimizer(
            tf.compat.v1.train.AdamOptimizer(self.context.get_hparam("learning_rate"))
        )
        return tf.estimator.Estimator(
            model_fn,
            params={"optimizer": optimizer},
            config=self.context.wrap_run_config(tf.estimator.RunConfig()),
        )

    def build_train_spec(self):
        import tensorflow as tf

        x, y = _digits()
        batch = self.context.get_per_slot_batch_size()

        def input_fn():
            dataset = tf.data.Dataset.from_tensor_slices(({"x": x[:1400]}, y[:1400]))
            return self.context.wrap_dataset(dataset).shuffle(1400).repeat().batch(batch)

        return tf.estimator.TrainSpec(input_fn)

    def build_validation_spec(self):
        import tensorflow as tf

        x, y = _digits()

        def input_fn():
            return tf.data.Dataset.from_tensor_slices(({"x": x[1400:]}, y[1400:])).batch(64)

        return tf.estimator.EvalSpec(input_fn, steps=None)

    def build_serving_input_receiver_fns(self):
        import tensorflow as tf

        def serving_input_receiver_fn():
            x = tf.compat.v1.placeholder(tf.float32, [None, 64], name="x")
            return tf.estimator.export.ServingInputReceiver({"x": x}, {"x": x})

        return {"digits": serving_input_receiver_fn}


if __name__ == "__main__":
    exp_id = det.experimental.create(
        DigitsTrial, CONFIG, context_dir=os.path.dirname(os.path.abspath(__file__))
    )
    print(f"create() returned {exp_id}")
