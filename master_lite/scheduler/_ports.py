"""Distinct rendezvous ports per allocation, so that two multi-slot trials on one host never
collide on torchrun's store (`C10D_PORT`) or on the ZMQ ports of `DistributedContext`
(`INTER_TRAIN_PROCESS_COMM_PORT_1/_2`).

Ports are handed out from a fixed range, skipping ports held by live allocations and ports that
some other program is listening on right now. Each master starts at a random place in the range:
several masters on one host (one JupyterLab per user) would otherwise all hand out 29500 first,
and a port is only checked when it is handed out, not when the trial binds it. A port is held
until its allocation is gone: the caller passes the allocations still alive on each call, so
nothing has to remember to release.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Iterable

from master_lite.runners._base import TRIAL_PORT_NAMES

# Above torchrun's default (29400) and Determined's ZMQ defaults (12360/12376), below the Linux
# ephemeral range (32768+), so a port we hand out is not taken by some client's outgoing socket.
FIRST_PORT = 29500
LAST_PORT = 32700


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


class PortAllocator:
    def __init__(
        self, first: int = FIRST_PORT, last: int = LAST_PORT, *, start: int | None = None
    ) -> None:
        """Ports `first`..`last`; the first one tried is `start` (default: a random one)."""
        self.first = first
        self.last = last
        self._held: dict[str, list[int]] = {}
        if start is None:
            start = random.randint(first, last)
        if not first <= start <= last:
            raise ValueError(f"start: {start} is outside the port range {first}..{last}")
        self._next = start

    def held(self) -> dict[str, list[int]]:
        return {key: list(ports) for key, ports in self._held.items()}

    def assign(self, allocation_id: str, count: int, *, live: Iterable[str] = ()) -> list[int]:
        """`count` ports for `allocation_id`, distinct from those of every allocation in `live`
        (the holdings of allocations not in `live` are forgotten first)."""
        keep = set(live) | {allocation_id}
        for key in [k for k in self._held if k not in keep]:
            del self._held[key]
        if allocation_id in self._held and len(self._held[allocation_id]) == count:
            return list(self._held[allocation_id])
        taken = {p for ports in self._held.values() for p in ports}
        chosen: list[int] = []
        span = self.last - self.first + 1
        for _ in range(span):
            port = self._next
            self._next = self.first if port >= self.last else port + 1
            if port in taken or not port_is_free(port):
                continue
            chosen.append(port)
            if len(chosen) == count:
                self._held[allocation_id] = chosen
                return list(chosen)
        raise RuntimeError(
            f"no {count} free ports left in {self.first}..{self.last} for "
            f"{allocation_id}: too many trials run at once on this host"
        )

    def trial_ports(self, allocation_id: str, *, live: Iterable[str] = ()) -> dict[str, str]:
        """The trial environment's port variables for one allocation."""
        ports = self.assign(allocation_id, len(TRIAL_PORT_NAMES), live=live)
        return {name: str(port) for name, port in zip(TRIAL_PORT_NAMES, ports, strict=False)}


__all__ = ["PortAllocator", "TRIAL_PORT_NAMES", "port_is_free", "FIRST_PORT", "LAST_PORT"]
