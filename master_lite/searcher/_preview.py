"""The text `det preview-search` prints: the plan, per bracket and rung, from a seeded simulation."""

from __future__ import annotations

import json
from typing import Any

from master_lite.searcher._simulate import simulate

PREVIEW_HPARAM_SETS = 5


def _with_unit(value: int, unit: str | None) -> str:
    return f"{value} {unit}" if unit else str(value)


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]

    def line(cells: list[str]) -> str:
        return " | ".join(cell.rjust(width) for cell, width in zip(cells, widths, strict=False))

    return [line(headers), "-+-".join("-" * w for w in widths)] + [line(r) for r in rows]


def format_preview(config: dict[str, Any]) -> str:
    """Deterministic for a given config (and seed): what the search will run."""
    simulation = simulate(config)
    searcher = config.get("searcher") or {}
    name = searcher.get("name")
    unit = simulation.unit
    seed = (config.get("reproducibility") or {}).get("experiment_seed") or 0
    out = [
        f"Searcher: {name} (metric: {searcher.get('metric') or '-'}, "
        f"smaller_is_better: {str(searcher.get('smaller_is_better', True)).lower()}, seed: {seed})"
    ]
    if name in ("single", "random", "grid"):
        by_length: dict[int, int] = {}
        for trial in simulation.trials:
            by_length[trial.trained] = by_length.get(trial.trained, 0) + 1
        out += _table(
            ["Trials", "Training length"],
            [[str(n), _with_unit(length, unit)] for length, n in sorted(by_length.items())],
        )
    else:
        for bracket in simulation.brackets:
            out.append("")
            out.append(
                f"Bracket {bracket.index + 1}: {bracket.num_rungs} rung(s), {bracket.max_trials} trial(s), "
                f"up to {bracket.max_concurrent_trials} at once"
            )
            out += [
                "  " + line
                for line in _table(
                    ["Rung", "Length", "Trials"],
                    [
                        [str(r.index), _with_unit(r.length, unit), str(r.trials)]
                        for r in bracket.rungs
                    ],
                )
            ]
        out.append("")
        out.append("(trials per rung come from a simulation with a seeded pseudo-random metric)")
    out.append(f"Total trials: {len(simulation.trials)}")
    out.append(f"Total training length: {_with_unit(simulation.total_length, unit)}")
    out.append("First hyperparameter sets:")
    for trial in simulation.trials[:PREVIEW_HPARAM_SETS]:
        out.append(
            f"  trial {trial.request_id}: {json.dumps(trial.hparams, sort_keys=True, default=str)}"
        )
    return "\n".join(out) + "\n"
