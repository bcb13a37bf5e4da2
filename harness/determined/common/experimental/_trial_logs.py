"""`Trial`'s logs: reading them (filtered, tailed, paged) and following them while it runs.

A base class of `determined.common.experimental.trial.Trial`; nothing here is public by itself.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from determined.common import api
from determined.common.experimental import metrics

# How often following (logs, metrics) asks the master again while the trial runs.
FOLLOW_INTERVAL_S = 0.5
# Records asked for per request when paging through logs or metrics.
PAGE = 1000


class TrialLogs:
    """`Trial.iter_logs` and its deprecated alias `logs`."""

    # Provided by `Trial`; declared for the type checker only.
    id: int
    _session: api.Session

    if TYPE_CHECKING:

        def _terminal(self) -> bool: ...

    # -- logs --------------------------------------------------------------------------------

    def iter_logs(
        self,
        follow: bool = False,
        *,
        head: int | None = None,
        tail: int | None = None,
        container_ids: list[str] | None = None,
        rank_ids: list[int] | None = None,
        stdtypes: list[str] | None = None,
        min_level: Any = None,
        timestamp_before: str | int | None = None,
        timestamp_after: str | int | None = None,
        sources: list[str] | None = None,
        search_text: str | None = None,
    ) -> Iterator[str]:
        """The trial's log lines, each ending with a newline (as Determined's do).

        Args:
            follow: keep yielding new lines until the trial ends (a terminal state).
            head: only the first this many lines.
            tail: only the last this many lines.
            container_ids: not supported (trials here run in no containers): must be None.
            rank_ids: only lines of these ranks.
            stdtypes: only these streams ("stdout", "stderr"; the master's own lines about
                the trial are "master"); default all.
            min_level: not supported (lines here have no level): must be None.
            timestamp_before: only lines before this time (RFC 3339 text or epoch seconds).
            timestamp_after: only lines after this time (RFC 3339 text or epoch seconds).
            sources: not supported: must be None.
            search_text: only lines containing this text.

        Returns:
            An iterator of lines.

        Raises:
            ValueError: more than one of follow, head and tail; or a negative head or tail.
            NotImplementedError: container_ids, min_level or sources given.
            determined.common.api.errors.NotFoundException: no trial has this id.
        """
        if sum((head is not None, tail is not None, bool(follow))) > 1:
            raise ValueError("at most one of head, tail, or follow may be set")
        for name, value in (("head", head), ("tail", tail)):
            if value is not None and value < 0:
                raise ValueError(f"{name} must be non-negative, got {value}")
        for name, given in (
            ("container_ids", container_ids),
            ("min_level", min_level),
            ("sources", sources),
        ):
            if given is not None:
                raise NotImplementedError(
                    f"Trial.iter_logs({name}=...): log lines here have no {name}"
                )
        after = _epoch(timestamp_after)
        before = _epoch(timestamp_before)
        if head == 0:
            return

        def keep(log: dict) -> bool:
            if rank_ids is not None and log.get("rank") not in rank_ids:
                return False
            if stdtypes is not None and log.get("stream") not in stdtypes:
                return False
            if search_text is not None and search_text not in str(log.get("line", "")):
                return False
            if after is not None or before is not None:
                moment = metrics.parse_time(log.get("time")).timestamp()
                if after is not None and moment <= after:
                    return False
                if before is not None and moment >= before:
                    return False
            return True

        # One rank or stream is a master-side filter; several are filtered here.
        params: dict[str, Any] = {}
        if rank_ids is not None and len(rank_ids) == 1:
            params["rank"] = rank_ids[0]
        if stdtypes is not None and len(stdtypes) == 1:
            params["stream"] = stdtypes[0]
        path = f"/trials/{self.id}/logs"
        if tail is not None and not any((rank_ids, stdtypes, search_text, after, before)):
            for log in self._session.get(path, {**params, "tail": tail})["logs"]:
                yield _line(log)
            return
        kept: list[dict] = []
        after_id = 0
        while True:
            # Read the state before the lines: once it is terminal, the lines read after it
            # are all the trial wrote.
            ended = not follow or self._terminal()
            while True:
                page = self._session.get(path, {**params, "after_id": after_id, "limit": PAGE})
                logs = page["logs"]
                for log in logs:
                    if not keep(log):
                        continue
                    if tail is not None:
                        kept.append(log)
                        del kept[: max(0, len(kept) - tail)]
                        continue
                    yield _line(log)
                    if head is not None:
                        head -= 1
                        if head <= 0:
                            return
                if logs:
                    after_id = max(after_id, max(int(log["id"]) for log in logs))
                if len(logs) < PAGE:
                    break
            if ended:
                break
            time.sleep(FOLLOW_INTERVAL_S)
        for log in kept:
            yield _line(log)

    def logs(self, *args: Any, **kwargs: Any) -> Iterable[str]:
        """Deprecated in Determined (FutureWarning): the same as `iter_logs`.

        Args:
            *args: as for `iter_logs` (`follow` first).
            **kwargs: as for `iter_logs`.

        Returns:
            An iterator of log lines.
        """
        warnings.warn(
            "Trial.logs() has been deprecated and will be removed in a future version."
            "Please call Trial.iter_logs() instead.",
            FutureWarning,
            stacklevel=2,
        )
        return self.iter_logs(*args, **kwargs)


def _line(log: dict) -> str:
    text = str(log.get("line", ""))
    return text if text.endswith("\n") else text + "\n"


def _epoch(moment: str | int | None) -> float | None:
    if moment is None:
        return None
    if isinstance(moment, (int, float)) and not isinstance(moment, bool):
        return float(moment)
    if isinstance(moment, str):
        try:
            return metrics.parse_time(moment).timestamp()
        except ValueError as e:
            raise ValueError(f"Timestamp {moment} has an invalid format.") from e
    raise ValueError("timestamp_before and timestamp_after must be either str or int types.")
