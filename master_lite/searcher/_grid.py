"""Grid search: one trial per point of the hyperparameter grid."""

from __future__ import annotations

from typing import Any

from master_lite.searcher._random import RandomEngine
from master_lite.searcher._trials import TrialFactory


class GridEngine(RandomEngine):
    """Random search's bookkeeping over a fixed list of points.

    Points are handed out from the *end* of the Cartesian list (Determined pops the last
    combination first), and an InvalidHP trial consumes its point: it is not replaced.
    """

    replace_invalid = False

    def __init__(
        self,
        factory: TrialFactory,
        *,
        points: list[dict[str, Any]],
        max_concurrent_trials: int,
        length: int,
    ) -> None:
        super().__init__(
            factory,
            max_trials=len(points),
            max_concurrent_trials=max_concurrent_trials,
            length=length,
        )
        self._points = points

    def _next_hparams(self) -> dict[str, Any] | None:
        return self._points[len(self._points) - 1 - self._created]

    def _can_create_more(self) -> bool:
        return self._created < len(self._points)
