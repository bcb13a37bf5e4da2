"""What the launchers share: where this container sits in the trial, the rank environment of a
worker, the network interface of the rendezvous, and running one child with signals forwarded."""

import array
import ipaddress
import json
import os
import signal
import socket
import struct
import subprocess
import sys
from collections.abc import Mapping

from determined.common.util import routed_address
from determined.launch import _lifetime

# Forwarded from a launcher to the single child it runs (Determined's forward_signals set).
FORWARDED_SIGNALS = [
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGWINCH", "SIGBREAK")
    if hasattr(signal, name)
]


class LaunchError(Exception):
    """The launcher cannot run here; the message says why and what to do."""


class NodeLayout:
    """Where this container sits in the trial: the part of ClusterInfo a launcher needs."""

    def __init__(
        self,
        *,
        container_addrs: list[str],
        container_rank: int,
        slot_ids: list[int],
        container_slot_counts: list[int] | None = None,
    ):
        self.container_addrs = container_addrs
        self.container_rank = container_rank
        self.slot_ids = slot_ids
        if container_slot_counts is None or len(container_slot_counts) != len(container_addrs):
            # Unknown: assume every container has as many slots as this one.
            container_slot_counts = [len(slot_ids)] * len(container_addrs)
        self.container_slot_counts = container_slot_counts

    @property
    def num_nodes(self) -> int:
        return len(self.container_addrs)

    @property
    def procs_per_node(self) -> int:
        # A CPU-only trial (slots_per_trial: 0) still runs one process.
        return max(1, len(self.slot_ids))

    def procs_on(self, container_rank: int) -> int:
        return max(1, self.container_slot_counts[container_rank])

    @property
    def total_procs(self) -> int:
        return sum(self.procs_on(c) for c in range(self.num_nodes))

    @property
    def first_rank(self) -> int:
        """The global rank of this container's first worker."""
        return sum(self.procs_on(c) for c in range(self.container_rank))

    @property
    def chief_ip(self) -> str:
        return self.container_addrs[0]

    @classmethod
    def from_env(cls, launcher: str = "determined.launch.torch_distributed") -> "NodeLayout":
        """Read the DET_* variables the resource manager sets (docs/internals.md)."""
        if "DET_SLOT_IDS" not in os.environ or "DET_CONTAINER_ADDRS" not in os.environ:
            raise LaunchError(
                f"{launcher} must run inside a Determined trial (DET_SLOT_IDS and "
                "DET_CONTAINER_ADDRS are not set). Submit the script with `det experiment "
                "create`, or run the script directly (or under torchrun) when testing locally."
            )
        try:
            slot_ids = [int(s) for s in json.loads(os.environ["DET_SLOT_IDS"])]
            addrs = [str(a) for a in json.loads(os.environ["DET_CONTAINER_ADDRS"])]
            rank = int(os.environ.get("DET_CONTAINER_RANK", "0"))
            counts_text = os.environ.get("DET_CONTAINER_SLOT_COUNTS")
            counts = [int(c) for c in json.loads(counts_text)] if counts_text else None
        except (ValueError, TypeError) as e:
            raise LaunchError(
                "malformed DET_SLOT_IDS / DET_CONTAINER_ADDRS / DET_CONTAINER_RANK / "
                f"DET_CONTAINER_SLOT_COUNTS: {e}"
            ) from e
        if not addrs:
            raise LaunchError("DET_CONTAINER_ADDRS is an empty list")
        if not 0 <= rank < len(addrs):
            raise LaunchError(
                f"DET_CONTAINER_RANK={rank} is outside the {len(addrs)} container address(es)"
            )
        return cls(
            container_addrs=addrs,
            container_rank=rank,
            slot_ids=slot_ids,
            container_slot_counts=counts,
        )


def rank_environment(
    *, rank: int, size: int, local_rank: int, local_size: int, cross_rank: int, cross_size: int
) -> dict[str, str]:
    """A worker's place in the job under the names torchrun and DeepSpeed use, so that
    ``DistributedContext.from_torch_distributed()`` and ``from_deepspeed()`` both work."""
    values = {
        "RANK": rank,
        "WORLD_SIZE": size,
        "LOCAL_RANK": local_rank,
        "LOCAL_WORLD_SIZE": local_size,
        "LOCAL_SIZE": local_size,
        "GROUP_RANK": cross_rank,
        "GROUP_WORLD_SIZE": cross_size,
        "CROSS_RANK": cross_rank,
        "CROSS_SIZE": cross_size,
    }
    return {name: str(value) for name, value in values.items()}


def single_process_environment() -> dict[str, str]:
    return rank_environment(rank=0, size=1, local_rank=0, local_size=1, cross_rank=0, cross_size=1)


# The variables that name the interface gloo (torch.distributed's CPU backend) and NCCL use
# between nodes. Left alone they pick the first interface that is up, which on a host with a
# container bridge or a second NIC may not reach the other nodes at all.
RENDEZVOUS_INTERFACE_VARIABLES = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")
_SIOCGIFCONF = 0x8912


def _ipv4_interfaces() -> dict[str, str]:
    """{IPv4 address: interface} of every configured address (SIOCGIFCONF; aliases such as
    eth0:1 under their interface's name). Empty where the ioctl is not available."""
    try:
        import fcntl
    except ImportError:  # not a Unix
        return {}
    size = 40 if struct.calcsize("P") == 8 else 32  # sizeof(struct ifreq)
    buffer = array.array("B", bytes(size * 256))
    pointer, _ = buffer.buffer_info()
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            answer = fcntl.ioctl(
                sock.fileno(), _SIOCGIFCONF, struct.pack("iL", len(buffer), pointer)
            )
    except OSError:
        return {}
    length = struct.unpack("iL", answer)[0]
    data = buffer.tobytes()[:length]
    found: dict[str, str] = {}
    for offset in range(0, length - size + 1, size):
        name = data[offset : offset + 16].split(b"\0", 1)[0].decode(errors="replace")
        found[socket.inet_ntoa(data[offset + 20 : offset + 24])] = name.split(":", 1)[0]
    return found


def _ipv6_interfaces() -> dict[str, str]:
    """{IPv6 address: interface} from /proc/net/if_inet6 (Linux)."""
    found: dict[str, str] = {}
    try:
        with open("/proc/net/if_inet6") as table:
            for line in table:
                fields = line.split()
                if len(fields) >= 6 and len(fields[0]) == 32:
                    found[str(ipaddress.IPv6Address(int(fields[0], 16)))] = fields[5]
    except (OSError, ValueError):
        pass
    return found


def interface_of(address: str) -> str | None:
    """The name of this host's interface that holds `address` (None: not found)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return None
    table = _ipv4_interfaces() if ip.version == 4 else _ipv6_interfaces()
    return table.get(str(ip))


def interface_toward(address: str) -> str | None:
    """The interface this host reaches `address` through: the one holding the source address
    the routing table picks (the chief's own interface on the chief itself)."""
    source = routed_address(address)
    return interface_of(source) if source else None


def rendezvous_interface_environment(layout: NodeLayout, env: Mapping[str, str]) -> dict[str, str]:
    """GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME for a trial across nodes: the interface that
    routes to the chief (or DET_INTER_NODE_NETWORK_INTERFACE when the resource manager names
    one); a variable the user set is left alone, and a trial on one node gets nothing."""
    if layout.num_nodes <= 1:
        return {}
    missing = [name for name in RENDEZVOUS_INTERFACE_VARIABLES if not env.get(name, "").strip()]
    if not missing:
        return {}
    name = env.get("DET_INTER_NODE_NETWORK_INTERFACE", "").strip() or interface_toward(
        layout.chief_ip
    )
    if not name:
        return {}
    return {variable: name for variable in missing}


def legacy_trial_script(trial: str) -> list[str]:
    """``--trial model_def:MyTrial`` (deprecated in Determined 0.38) as a script to run."""
    return ["python3", "-m", "determined.exec.harness", trial]


def exit_status(returncode: int) -> int:
    """A Popen return code as a shell reports it (killed by signal N -> 128 + N)."""
    return 128 - returncode if returncode < 0 else returncode


def run_one(cmd: list[str], env: dict[str, str], launcher: str) -> int:
    """Run ``cmd`` in the foreground with signals forwarded; its exit status."""
    try:
        proc = subprocess.Popen(cmd, env=env)
    except OSError as e:
        print(f"{launcher}: cannot run {cmd[0]!r}: {e}", file=sys.stderr)
        return 127
    _lifetime.SignalForwarder(proc).install(FORWARDED_SIGNALS)
    return exit_status(proc.wait())
