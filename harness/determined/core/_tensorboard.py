"""TensorBoard integration of the Core API.

AUTO mode is accepted but writes no event files: master_lite has no TensorBoard task and the
harness stays free of TensorFlow/tensorboard imports, so reports are only counted. MANUAL mode
copies files the user wrote into `get_tensorboard_path()` to checkpoint storage when asked.
"""

from __future__ import annotations

import enum
import pathlib
import shutil
import tempfile
from collections.abc import Callable


class TensorboardMode(str, enum.Enum):
    AUTO = "AUTO"
    MANUAL = "MANUAL"

    def __str__(self) -> str:
        return self.value


class TensorboardManager:
    def __init__(
        self,
        mode: TensorboardMode,
        storage_base: pathlib.Path | None,
        experiment_id: int,
        trial_id: int,
        rank: int = 0,
    ) -> None:
        self.mode = TensorboardMode(mode)
        self.path = (
            pathlib.Path(tempfile.gettempdir()) / "determined-tensorboard" / f"trial-{trial_id}"
        )
        self._target = (
            None
            if storage_base is None
            else storage_base
            / "tensorboard"
            / "experiment"
            / str(experiment_id)
            / "trial"
            / str(trial_id)
        )
        self._rank = rank
        self.reports_seen = 0

    def on_metrics(self, group: str, steps_completed: int, metrics: dict) -> None:
        self.reports_seen += 1

    def upload(
        self,
        selector: Callable[[pathlib.Path], bool],
        mangler: Callable[[pathlib.Path, int], pathlib.Path],
    ) -> None:
        if self.mode is TensorboardMode.AUTO:
            raise RuntimeError(
                "upload_tensorboard_files() is only for tensorboard_mode=TensorboardMode.MANUAL; "
                "pass it to det.core.init()"
            )
        if self._target is None or not self.path.is_dir():
            return
        for file in sorted(p for p in self.path.rglob("*") if p.is_file()):
            if not selector(file):
                continue
            relative = pathlib.Path(mangler(file.relative_to(self.path), self._rank))
            destination = self._target / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(file, destination)
