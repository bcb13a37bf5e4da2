"""The one place trials are born: request ids and seeded draws shared by every bracket."""

from __future__ import annotations

import random
from typing import Any

from master_lite.searcher._hparams import sample_hparams
from master_lite.searcher._ops import Create

TRIAL_SEED_LIMIT = 2**31


def rng_state_to_json(rng: random.Random) -> list[Any]:
    version, internal, gauss_next = rng.getstate()
    return [version, list(internal), gauss_next]


def rng_state_from_json(data: list[Any]) -> tuple:
    version, internal, gauss_next = data
    return (version, tuple(internal), gauss_next)


class TrialFactory:
    """Hands out sequential request ids (from 1) and draws hparams then ``trial_seed`` from one
    ``random.Random(experiment_seed)``, so a seed fixes the whole sequence of trials."""

    def __init__(
        self, hparams_spec: dict[str, Any], seed: int, checkpoint: str | None = None
    ) -> None:
        self._spec = hparams_spec
        self._checkpoint = (
            checkpoint  # searcher.source_checkpoint_uuid: every trial warm-starts from it
        )
        self._rng = random.Random(seed)
        self.next_request_id = 1

    def create(self, hparams: dict[str, Any] | None = None) -> Create:
        if hparams is None:
            hparams = sample_hparams(self._spec, self._rng)
        trial_seed = self._rng.randrange(TRIAL_SEED_LIMIT)
        op = Create(
            request_id=self.next_request_id,
            hparams=hparams,
            trial_seed=trial_seed,
            checkpoint=self._checkpoint,
        )
        self.next_request_id += 1
        return op

    def state(self) -> dict[str, Any]:
        return {"next_request_id": self.next_request_id, "rng": rng_state_to_json(self._rng)}

    def load_state(self, state: dict[str, Any]) -> None:
        self.next_request_id = state["next_request_id"]
        self._rng.setstate(rng_state_from_json(state["rng"]))
