"""Generic API walkthrough: a small torch MLP on scikit-learn's 8x8 digits.

Runs on the master (`det e create const.yaml .` / `adaptive.yaml`) and in a plain `python train.py`
(then the hyperparameters below and a single one-epoch search operation stand in).
"""

import logging

import torch
from sklearn.datasets import load_digits

import determined as det

torch.set_num_threads(1)
BATCH_SIZE = 64
LOCAL_HPARAMS = {"learning_rate": 0.05, "hidden_size": 64}


def make_data(seed):
    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target, dtype=torch.long)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    x, y = x[order], y[order]
    split = int(0.8 * len(x))
    return (x[:split], y[:split]), (x[split:], y[split:])


def evaluate(model, data):
    x, y = data
    with torch.no_grad():
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits, y).item()
        accuracy = (logits.argmax(dim=1) == y).float().mean().item()
    return {"validation_loss": loss, "accuracy": accuracy}


def main(context):
    hparams = context.training.hparams
    torch.manual_seed(context.training.trial_seed)
    (train_x, train_y), validation = make_data(context.training.trial_seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, hparams["hidden_size"]),
        torch.nn.ReLU(),
        torch.nn.Linear(hparams["hidden_size"], 10),
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=hparams["learning_rate"])
    epochs_trained, batches_trained = 0, 0
    if context.latest_checkpoint is not None:
        state = torch.load(context.latest_checkpoint / "state.pt")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        epochs_trained, batches_trained = state["epochs_trained"], state["batches_trained"]
        logging.info(f"resumed from {context.latest_checkpoint} at epoch {epochs_trained}")

    for op in context.training.basic_search():
        while epochs_trained < op.epochs:
            generator = torch.Generator().manual_seed(context.training.trial_seed + epochs_trained)
            order = torch.randperm(len(train_x), generator=generator)
            losses = []
            for start in range(0, len(order), BATCH_SIZE):
                idx = order[start : start + BATCH_SIZE]
                loss = torch.nn.functional.cross_entropy(model(train_x[idx]), train_y[idx])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
                batches_trained += 1
            epochs_trained += 1
            context.training.report_training_metrics(
                batches_trained=batches_trained, metrics={"loss": sum(losses) / len(losses)}
            )
            op.report_progress(epochs_trained)
            with context.checkpoint.save_path() as path:
                torch.save(
                    {
                        "model": model.state_dict(),
                        "optimizer": optimizer.state_dict(),
                        "epochs_trained": epochs_trained,
                        "batches_trained": batches_trained,
                    },
                    path / "state.pt",
                )
            if context.should_preempt():
                return
        metrics = evaluate(model, validation)
        context.training.report_validation_metrics(batches_trained=batches_trained, metrics=metrics)
        op.complete(metrics["validation_loss"])


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    with det.generic.init(hparams=LOCAL_HPARAMS) as context:
        main(context)
