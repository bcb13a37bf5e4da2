"""TensorBoard integration of the Core API.

The harness writes no event files itself (it stays free of TensorFlow/tensorboard imports); a
user's or framework's TensorBoard writer puts them into `get_tensorboard_path()`. AUTO mode (as in
Determined) copies the files there that are new or changed to checkpoint storage
(`tensorboard/experiment/<id>/trial/<id>/`) after every metrics report — in a background thread,
so a large event file never holds up the training loop — and once more when the core context
closes (events written after the last report); MANUAL mode copies them when the user calls
`train.upload_tensorboard_files()`.
"""

from __future__ import annotations

import enum
import pathlib
import secrets
import shutil
import tempfile
import threading
from collections.abc import Callable

# Reports can come every few milliseconds (a tight loop reporting every 100 steps): the background
# copy runs at most this often, so its wake-ups do not take the GIL from training at that rate.
# close() still copies whatever changed since.
MIN_SYNC_INTERVAL_S = 1.0


class TensorboardMode(str, enum.Enum):
    AUTO = "AUTO"
    MANUAL = "MANUAL"

    def __str__(self) -> str:
        return self.value


class TensorboardManager:
    """Where a trial's TensorBoard files go (`path`) and their copy to checkpoint storage.

    Args:
        mode: AUTO (copied after every report and at close) or MANUAL (on request).
        storage_base: the checkpoint storage directory; None: nothing is copied.
        experiment_id: the trial's experiment (part of the storage path).
        trial_id: the trial (part of both paths).
        rank: this process's rank (passed to MANUAL mode's name mangler).
    """

    def __init__(
        self,
        mode: TensorboardMode,
        storage_base: pathlib.Path | None,
        experiment_id: int,
        trial_id: int,
        rank: int = 0,
    ) -> None:
        self.mode = TensorboardMode(mode)
        # A directory of this run's own: a fixed name per trial id would hand a trial the event
        # files that a trial of the same id (of another master, or an earlier root dir) left.
        # Created by whoever writes into it (TensorBoard's writers do), as in Determined.
        self.path = (
            pathlib.Path(tempfile.gettempdir())
            / "determined-tensorboard"
            / f"trial-{trial_id}-rank-{rank}-{secrets.token_hex(6)}"
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
        self._synced: dict[pathlib.Path, tuple[int, int]] = {}  # file -> (mtime_ns, size) copied
        self._lock = threading.Lock()  # one copy at a time (the syncer, close, upload)
        self._wake = threading.Event()
        self._closed = threading.Event()  # ends the syncer's pause between copies
        self._closing = False
        self._syncer: threading.Thread | None = None

    def on_metrics(self, group: str, steps_completed: int, metrics: dict) -> None:
        """After a training or validation report: in AUTO mode, wake the background copy."""
        self.reports_seen += 1
        if self.mode is not TensorboardMode.AUTO or self._target is None or self._closing:
            return
        if self._syncer is None:
            self._syncer = threading.Thread(
                target=self._sync_loop, name="determined-tensorboard-sync", daemon=True
            )
            self._syncer.start()
        self._wake.set()

    def _sync_loop(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._closing:
                return
            self._copy_all()
            self._closed.wait(MIN_SYNC_INTERVAL_S)

    def _copy_all(self) -> None:
        self._copy(lambda _: True, lambda path, _: path)

    def close(self) -> None:
        """Stop the background copy and, in AUTO mode, copy what changed since (idempotent)."""
        if self._closing:
            return
        self._closing = True
        if self._syncer is not None:
            self._wake.set()
            self._closed.set()
            self._syncer.join()
        if self.mode is TensorboardMode.AUTO:
            self._copy_all()
            if self._target is not None:  # every file is in checkpoint storage now
                shutil.rmtree(self.path, ignore_errors=True)

    def _copy(
        self,
        selector: Callable[[pathlib.Path], bool],
        mangler: Callable[[pathlib.Path, int], pathlib.Path],
    ) -> None:
        """Copy the selected files under `path` that changed since they were last copied."""
        with self._lock:
            self._copy_changed(selector, mangler)

    def _copy_changed(
        self,
        selector: Callable[[pathlib.Path], bool],
        mangler: Callable[[pathlib.Path, int], pathlib.Path],
    ) -> None:
        if self._target is None or not self.path.is_dir():
            return
        for file in sorted(p for p in self.path.rglob("*") if p.is_file()):
            try:
                stat = file.stat()
            except OSError:  # removed meanwhile
                continue
            if self._synced.get(file) == (stat.st_mtime_ns, stat.st_size) or not selector(file):
                continue
            relative = pathlib.Path(mangler(file.relative_to(self.path), self._rank))
            destination = self._target / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(file, destination)
            self._synced[file] = (stat.st_mtime_ns, stat.st_size)

    def upload(
        self,
        selector: Callable[[pathlib.Path], bool],
        mangler: Callable[[pathlib.Path, int], pathlib.Path],
    ) -> None:
        """MANUAL mode: copy the selected files now (see `TrainContext.upload_tensorboard_files`)."""
        if self.mode is TensorboardMode.AUTO:
            raise RuntimeError(
                "upload_tensorboard_files() is only for tensorboard_mode=TensorboardMode.MANUAL; "
                "pass it to det.core.init()"
            )
        self._copy(selector, mangler)
