"""Search quality: adaptive ASHA vs random search vs Optuna (TPE + Hyperband) at equal epochs.

Workload (real training, offline data): scikit-learn's bundled digits (1797 8x8 images, fixed
stratified 2/3 train, 1/3 validation split, standardized), a linear `SGDClassifier` trained one
epoch per `partial_fit` call. Seven hyperparameters: alpha and eta0 (log-uniform), the
learning-rate schedule, loss, penalty, l1_ratio and averaging — many settings are poor or
diverge, so there is something to search for. Fidelity = epochs, up to MAX_EPOCHS = 81.
Metric: validation error (1 - accuracy), smaller is better.

Methods, each with the same seed list:
* adaptive ASHA — master_lite's own searcher (`adaptive_asha`, ≤0.37 operations form,
  max_length 81, divisor 3, mode standard), driven in-process by `simulate()` with real training
  as the metric function. A promoted trial continues from the model it had (like resuming from
  its checkpoint), so its epochs are counted once.
* random search — master_lite's hyperparameter sampler; every trial trains the full 81 epochs
  and validates at the end (what the `random` searcher does), for as many trials as ASHA's
  total epochs allow (equal budget).
* Optuna — `TPESampler(seed)` + `HyperbandPruner(min_resource=1, max_resource=81,
  reduction_factor=3)`, a validation every epoch, stopped when it has used ASHA's epochs.

"Best so far" = the lowest validation error of any model the method evaluated, plotted against
the cumulative epochs trained. The ideal the benchmark knows: an oracle that trains only the
best configuration reaches random search's final best within one full-length trial — a ratio
of at most MAX_EPOCHS / budget (less when that configuration is good early); random search
itself needs the whole budget (ratio 1). Target: ASHA reaches random search's final best
with <= 1/3 of random search's epochs, and ends no worse than Optuna.

Run: python bench/bench_search_quality.py [--seeds 5] [--max-trials 243] [--no-record]
(needs scikit-learn, and optuna for the Optuna column: `pip install optuna`); writes its section
of bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time
import warnings
from typing import Any

import numpy as np
from _common import machine_description, package_version, record, verdict  # noqa: E402  (sets sys.path)
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import SGDClassifier
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from master_lite.searcher import sample_hparams, simulate  # noqa: E402

MAX_EPOCHS = 81
DIVISOR = 3
HYPERPARAMETERS: dict[str, Any] = {
    "alpha": {"type": "log", "base": 10, "minval": -7.0, "maxval": -1.0},
    "eta0": {"type": "log", "base": 10, "minval": -5.0, "maxval": 0.0},
    "learning_rate": {
        "type": "categorical",
        "vals": ["optimal", "constant", "invscaling", "adaptive"],
    },
    "loss": {
        "type": "categorical",
        "vals": ["hinge", "log_loss", "modified_huber", "perceptron", "squared_hinge"],
    },
    "penalty": {"type": "categorical", "vals": ["l2", "l1", "elasticnet"]},
    "l1_ratio": {"type": "double", "minval": 0.0, "maxval": 1.0},
    "average": {"type": "categorical", "vals": [False, True]},
}


class Data:
    def __init__(self) -> None:
        digits = load_digits()
        x_train, x_val, y_train, y_val = train_test_split(
            digits.data, digits.target, test_size=1 / 3, random_state=0, stratify=digits.target
        )
        scaler = StandardScaler().fit(x_train)
        self.x_train, self.x_val = scaler.transform(x_train), scaler.transform(x_val)
        self.y_train, self.y_val = y_train, y_val
        self.classes = np.unique(digits.target)


class Model:
    """One trial's model; `train_to(n)` continues from the epochs it already has."""

    def __init__(self, data: Data, hparams: dict, seed: int) -> None:
        self.data = data
        self.epochs = 0
        self.shuffle = np.random.RandomState(seed)
        self.clf = SGDClassifier(
            alpha=hparams["alpha"],
            eta0=hparams["eta0"],
            learning_rate=hparams["learning_rate"],
            loss=hparams["loss"],
            penalty=hparams["penalty"],
            l1_ratio=hparams["l1_ratio"],
            average=hparams["average"],
            random_state=seed,
        )

    def train_to(self, epochs: int) -> int:
        """Train up to `epochs` in total; returns the epochs this call trained."""
        done = 0
        while self.epochs < epochs:
            order = self.shuffle.permutation(len(self.data.y_train))
            self.clf.partial_fit(
                self.data.x_train[order], self.data.y_train[order], classes=self.data.classes
            )
            self.epochs += 1
            done += 1
        return done

    def validation_error(self) -> float:
        error = 1.0 - float(self.clf.score(self.data.x_val, self.data.y_val))
        return error if math.isfinite(error) else 1.0


class Trace:
    """Cumulative epochs and the best validation error seen, after every evaluation."""

    def __init__(self) -> None:
        self.epochs = 0
        self.best = 1.0
        self.points: list[tuple[int, float]] = []

    def record(self, trained: int, error: float) -> None:
        self.epochs += trained
        self.best = min(self.best, error)
        self.points.append((self.epochs, self.best))

    def best_at(self, epochs: int) -> float:
        best = 1.0
        for spent, value in self.points:
            if spent > epochs:
                break
            best = value
        return best

    def epochs_to_reach(self, target: float) -> int | None:
        for spent, value in self.points:
            if value <= target:
                return spent
        return None


def run_asha(data: Data, seed: int, max_trials: int) -> Trace:
    trace = Trace()
    models: dict[int, Model] = {}

    def metric(request_id: int, hparams: dict, length: int) -> float:
        model = models.get(request_id)
        if model is None:
            model = models[request_id] = Model(data, hparams, seed * 100_003 + request_id)
        trained = model.train_to(length)
        error = model.validation_error()
        trace.record(trained, error)
        return error

    config = {
        "searcher": {
            "name": "adaptive_asha",
            "metric": "validation_error",
            "smaller_is_better": True,
            "max_trials": max_trials,
            "max_length": MAX_EPOCHS,
            "divisor": DIVISOR,
            "max_rungs": 5,
            "mode": "standard",
            "max_concurrent_trials": 16,
        },
        "hyperparameters": HYPERPARAMETERS,
        "reproducibility": {"experiment_seed": seed},
    }
    simulation = simulate(config, metric=metric)
    assert simulation.total_length == trace.epochs, (simulation.total_length, trace.epochs)
    return trace


def run_random(data: Data, seed: int, budget: int) -> Trace:
    trace = Trace()
    rng = random.Random(seed)
    for index in range(budget // MAX_EPOCHS):
        hparams = sample_hparams(HYPERPARAMETERS, rng)
        model = Model(data, hparams, seed * 100_003 + index + 1)
        trained = model.train_to(MAX_EPOCHS)
        trace.record(trained, model.validation_error())
    return trace


def run_optuna(data: Data, seed: int, budget: int) -> Trace | None:
    try:
        import optuna
    except ImportError:
        return None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    trace = Trace()

    def objective(trial: Any) -> float:
        hparams = {
            "alpha": 10 ** trial.suggest_float("log_alpha", -7.0, -1.0),
            "eta0": 10 ** trial.suggest_float("log_eta0", -5.0, 0.0),
            "learning_rate": trial.suggest_categorical(
                "learning_rate", HYPERPARAMETERS["learning_rate"]["vals"]
            ),
            "loss": trial.suggest_categorical("loss", HYPERPARAMETERS["loss"]["vals"]),
            "penalty": trial.suggest_categorical("penalty", HYPERPARAMETERS["penalty"]["vals"]),
            "l1_ratio": trial.suggest_float("l1_ratio", 0.0, 1.0),
            "average": trial.suggest_categorical("average", [False, True]),
        }
        model = Model(data, hparams, seed * 100_003 + trial.number + 1)
        error = 1.0
        for epoch in range(1, MAX_EPOCHS + 1):
            if trace.epochs >= budget:  # the budget ends mid-trial: stop quietly
                raise optuna.TrialPruned()
            model.train_to(epoch)
            error = model.validation_error()
            trace.record(1, error)
            trial.report(error, epoch)
            if trial.should_prune():
                raise optuna.TrialPruned()
        return error

    # A fixed study name: the Hyperband pruner assigns trials to brackets by hashing it.
    study = optuna.create_study(
        study_name=f"bench-search-quality-{seed}",
        direction="minimize",
        sampler=optuna.samplers.TPESampler(seed=seed),
        pruner=optuna.pruners.HyperbandPruner(
            min_resource=1, max_resource=MAX_EPOCHS, reduction_factor=DIVISOR
        ),
    )
    while trace.epochs < budget:
        study.optimize(objective, n_trials=1)
    return trace


def fmt_ratio(value: float | None) -> str:
    return "never" if value is None else f"{value:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--max-trials", type=int, default=243)
    parser.add_argument(
        "--no-record",
        dest="record",
        action="store_false",
        help="do not write the section of bench/RESULTS.md",
    )
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=ConvergenceWarning)
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    data = Data()
    print(f"machine: {machine_description()}")
    rows = []
    started = time.perf_counter()
    for seed in range(1, args.seeds + 1):
        t0 = time.perf_counter()
        asha = run_asha(data, seed, args.max_trials)
        budget = asha.epochs
        rand = run_random(data, seed, budget)
        optuna_trace = run_optuna(data, seed, budget)
        target = rand.best  # random search's final best
        asha_reach = asha.epochs_to_reach(target)
        optuna_reach = optuna_trace.epochs_to_reach(target) if optuna_trace else None
        rows.append(
            {
                "seed": seed,
                "budget": budget,
                "random_epochs": rand.epochs,
                "random_best": rand.best,
                "asha_best": asha.best,
                "optuna_best": optuna_trace.best if optuna_trace else None,
                "asha_ratio": None if asha_reach is None else asha_reach / rand.epochs,
                "optuna_ratio": None if optuna_reach is None else optuna_reach / rand.epochs,
                "curves": {
                    name: [trace.best_at(int(budget * f)) for f in (0.1, 0.25, 0.5, 1.0)]
                    for name, trace in (("asha", asha), ("random", rand), ("optuna", optuna_trace))
                    if trace is not None
                },
                "seconds": time.perf_counter() - t0,
            }
        )
        print(
            f"seed {seed} done in {rows[-1]['seconds']:.0f} s (budget {budget} epochs)", flush=True
        )

    lines = [
        f"Digits, SGDClassifier, 7 hyperparameters; adaptive_asha max_trials "
        f"{args.max_trials}, max_length {MAX_EPOCHS} epochs, divisor {DIVISOR}, mode "
        f"standard; budget = ASHA's total epochs (random and Optuna get the same); "
        f"{args.seeds} seeds; scikit-learn {package_version('scikit-learn')}, optuna "
        f"{package_version('optuna')}.",
        "",
        "Best validation error (1 - accuracy) after a fraction of the budget, and the "
        "epochs needed to reach random search's final best as a fraction of random "
        "search's epochs:",
        "",
        "| seed | budget (epochs) | method | @10% | @25% | @50% | @100% | to reach random's best |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        for name in ("asha", "random", "optuna"):
            if name not in row["curves"]:
                continue
            curve = " | ".join(f"{v:.4f}" for v in row["curves"][name])
            ratio = {
                "asha": fmt_ratio(row["asha_ratio"]),
                "random": "1.000",
                "optuna": fmt_ratio(row["optuna_ratio"]),
            }[name]
            lines.append(f"| {row['seed']} | {row['budget']} | {name} | {curve} | {ratio} |")
    lines.append("")
    for name in ("asha", "random", "optuna"):
        bests = [r[f"{name}_best"] for r in rows if r.get(f"{name}_best") is not None]
        if bests:
            lines.append(
                f"* {name} final best error: mean {statistics.mean(bests):.4f}, "
                f"median {statistics.median(bests):.4f}"
            )
    summary = {}
    for name in ("asha", "optuna"):
        ratios = [r[f"{name}_ratio"] for r in rows]
        reached = [r for r in ratios if r is not None]
        summary[name] = (
            statistics.median(reached) if reached else None,
            max(reached) if len(reached) == len(ratios) else None,
        )
        if reached:
            lines.append(
                f"* {name} epochs to reach random's final best / random's epochs: "
                f"median {statistics.median(reached):.3f}, max {max(reached):.3f} "
                f"(reached in {len(reached)}/{len(ratios)} seeds)"
            )
    ideal = MAX_EPOCHS / statistics.mean(r["budget"] for r in rows)
    lines.append(
        f"* ideal: an oracle training only the best configuration needs at most one "
        f"full trial, a ratio <= {ideal:.3f}"
    )
    asha_ratio = summary["asha"][1]
    if asha_ratio is not None:
        lines.append(
            f"* target ASHA ratio <= 0.333 in every seed: worst seed {asha_ratio:.3f} "
            f"-> {verdict(asha_ratio, 1 / 3, at_most=True)}"
        )
    optuna_bests = [r["optuna_best"] for r in rows if r["optuna_best"] is not None]
    if len(optuna_bests) == len(rows):
        asha_mean = statistics.mean(r["asha_best"] for r in rows)
        optuna_mean = statistics.mean(optuna_bests)
        wins = sum(r["asha_best"] <= r["optuna_best"] for r in rows)
        lines.append(
            f"* target ASHA final best no worse than Optuna's: mean {asha_mean:.4f} vs "
            f"{optuna_mean:.4f} -> {verdict(asha_mean, optuna_mean, at_most=True)} "
            f"(ASHA <= Optuna in {wins}/{len(rows)} seeds)"
        )
    lines.append(
        f"* resolution: the validation set has {len(data.y_val)} images, so one image "
        f"is {1 / len(data.y_val):.4f} of error"
    )
    lines.append(f"* wall time {time.perf_counter() - started:.0f} s")
    text = "\n".join(lines)
    print("\n" + text)
    if args.record:
        record("Search quality (bench_search_quality.py)", text)


if __name__ == "__main__":
    main()
