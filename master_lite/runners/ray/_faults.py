"""How the Ray driver tells a lost node from a failed trial (docs/distributed.md, "Faults").

* An actor whose poll fails while Ray lists its node as dead (or no longer lists it) was lost
  with its node: the run ends as *lost*, named as such in the trial's log ("node 10.0.0.2 (node
  id …) was lost"), and the master requeues the trial without counting a failure, avoiding
  that node for the trial's next attempts.
* An actor that has not answered a poll for `HEARTBEAT_SECONDS` (each poll returns within
  `_POLL_SECONDS`) is on a node that is partitioned away or dying before Ray says so: the same.
  Ray itself declares a node dead after its head's health checks fail
  (`health_check_period_ms` x `health_check_failure_threshold`, 3 s x 5 by default).
* Otherwise (the actor's worker died, the trial crashed) the run failed as before.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterable, Mapping
from typing import Any

HEARTBEAT_SECONDS = 10.0
# Ray marks a node dead a moment after the actors on it fail: how long to look for that.
_NODE_DEATH_WAIT_SECONDS = 3.0


def silent_ranks(heard: Mapping[int, float], waiting: Iterable[int], now: float) -> list[int]:
    """The ranks, among those with a poll outstanding, not heard from for HEARTBEAT_SECONDS."""
    return sorted(r for r in waiting if now - heard.get(r, now) > HEARTBEAT_SECONDS)


def node_is_dead(
    cluster: Any, node_id: str, exc: BaseException, wait: float = _NODE_DEATH_WAIT_SECONDS
) -> bool:
    """Whether the actor error `exc` came from its node's loss: Ray says the node died, or lists
    it as dead (or not at all), or the node's raylet does not accept connections (Ray declares
    the node dead only after its health checks fail), looking for up to `wait` seconds."""
    text = str(exc).lower()
    if "node" in text and ("has died" in text or "node died" in text or "is dead" in text):
        if "worker process has died" not in text:
            return True
    deadline = time.monotonic() + wait
    while True:
        try:
            nodes = {n["node_id"]: n for n in cluster.nodes()}
        except Exception:  # noqa: BLE001 - the head is gone too: the bridge's watchdog says so
            return False
        node = nodes.get(node_id)
        if node is None or not node["alive"] or not _raylet_answers(node):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.5)


def _raylet_answers(node: Mapping[str, Any]) -> bool:
    address, port = node.get("address"), node.get("manager_port")
    if not address or not port:
        return True  # nothing to probe: trust Ray's word
    try:
        with socket.create_connection((str(address), int(port)), timeout=2):
            return True
    except OSError:
        return False


def node_loss(place: Mapping[str, Any], exc: BaseException | None) -> dict:
    """The loss record of a container's node: its id, address and the cause in words."""
    node_id, address = place.get("node_id"), place.get("ip")
    if exc is None:
        cause = (
            f"node {address} (node id {node_id}) did not answer for {HEARTBEAT_SECONDS:.0f} s: "
            "it was lost (partitioned or down)"
        )
    else:
        cause = f"node {address} (node id {node_id}) was lost"
    return {"node_id": node_id, "address": address, "cause": cause}


def end_lost(driver: Any, run: Any, rank: int, exc: BaseException | None, exited: int) -> dict:
    """`rank`'s node was lost: record it, say so in the trial's log and stop the other
    containers (the caller ends the run as killed; the master requeues it)."""
    loss = node_loss(run.placements[rank], exc)
    driver.losses[run.spec.allocation_id] = loss
    others = len(run.actors) - 1 - exited
    driver._master_line(
        run,
        f"{run.spec.allocation_id} container {rank}: {loss['cause']}"
        + ("; stopping the other containers" if others > 0 else ""),
    )
    return loss


def selector(
    pool: str, *, default: bool, pools: Iterable[str], avoid: Iterable[str], label: str
) -> dict:
    """The bundles' label selector of a run in `pool` (nodes labelled `label`=pool; the default
    pool: nodes that name no other pool) avoiding the nodes in `avoid`."""
    chosen: dict[str, str] = {}
    others = sorted(p for p in pools if p != pool)
    if not default:
        chosen[label] = pool
    elif others:
        chosen[label] = f"!in({','.join(others)})"
    avoided = sorted(set(avoid))
    if avoided:
        chosen["ray.io/node-id"] = f"!in({','.join(avoided)})"
    return chosen


__all__ = ["HEARTBEAT_SECONDS", "end_lost", "node_is_dead", "node_loss", "selector", "silent_ranks"]
