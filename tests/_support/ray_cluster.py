"""A multi-node Ray cluster on one machine: every node in a network namespace of its own.

    with NetnsCluster(base_dir, workers=2) as cluster:    # needs root, iproute2 and iptables
        cluster.head.ip, cluster.workers[0].ip, cluster.gateway   # 10.213.N.10/11/12, .1
        cluster.address                                   # "10.213.N.10:6379", the Ray head
        master = NodeMaster(cluster, root_dir)            # master-lite on the head, --host 0.0.0.0
        cluster.kill_node(cluster.workers[0])             # SIGKILL raylet, workers and trials
        cluster.partition(cluster.workers[1]); cluster.heal(cluster.workers[1])
        cluster.stop_head()                               # the head's Ray processes only
        cluster.restore()                                 # every node up again
        cluster.trial_processes()                         # trials still running anywhere
    cluster.leftovers()                                   # [] once it is torn down

Layout: the tag is `ntns<pid of this process>`; a bridge `<tag>b` in the machine's own namespace
with the gateway address `.1` (servers the nodes share, an S3 server, bind it there); one
namespace `<tag>-<node>` per node with a veth pair (`<tag>v<i>` on the bridge, `eth0` inside)
and its own address; each node has its own directories under `base_dir/<node>/` (Ray's temp dir,
`TMPDIR`, where the Ray actor unpacks a trial's work dir, and `HOME`): nothing on disk is shared
by the nodes but the interpreter. Two runs never share a name, and the namespaces and links of a
run whose process is gone are removed before a new cluster starts.

Processes of a node are found by their network namespace (`ip netns pids`) and by the tag in
their environment (`NTNS_CLUSTER`), never by name: `ray stop` would stop every Ray on the
machine. A node's processes are Ray's own (gcs, raylet, agents, workers), the trials the workers
started, and whatever was started there as a spawned process (`NodeMaster`, `spawn`), which
`kill_node` and `stop_head` spare.
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from tests._support.master import MasterProcess
from tests._support.process import child_env
from tests._support.waiting import wait_until

PREFIX = "ntns"
TAG_ENV = "NTNS_CLUSTER"  # in every node process's environment: finds them after teardown
RAY_PORT = 6379
# Ray system settings of every node (Ray reads RAY_<setting>). Ray's defaults take ~15-30 s to
# call a node dead; these make it ~10 s (shorter ones declared live nodes of a busy machine
# dead), and a raylet that lost its GCS gives up after 10 s instead of 60 s.
RAY_SETTINGS = {
    "RAY_health_check_initial_delay_ms": "2000",
    "RAY_health_check_period_ms": "2000",
    "RAY_health_check_timeout_ms": "2000",
    "RAY_health_check_failure_threshold": "5",
    "RAY_gcs_rpc_server_reconnect_timeout_s": "10",
    "RAY_enable_metrics_collection": "0",
    # A raylet waits for its agents (Python processes: slow to import on a busy machine).
    "RAY_agent_register_timeout_ms": "180000",
}


def _run(*argv: str, check: bool = True, netns: str | None = None) -> str:
    full = ["ip", "netns", "exec", netns, *argv] if netns else list(argv)
    done = subprocess.run(full, capture_output=True, text=True, timeout=60)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(full)} exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def netns_available() -> str | None:
    """None when this machine can build the cluster, else why not (for a clear failure)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "`ip` (iproute2) is not installed: make test-deps"
    probe = f"{PREFIX}probe{os.getpid()}"
    try:
        _run("ip", "netns", "add", probe)
    except RuntimeError as exc:
        return f"cannot create a network namespace: {exc}"
    _run("ip", "netns", "delete", probe, check=False)
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _namespaces() -> list[str]:
    return [line.split()[0] for line in _run("ip", "netns", "list").splitlines() if line.strip()]


def _netns_pids(netns: str) -> set[int]:
    try:
        return {int(p) for p in _run("ip", "netns", "pids", netns).split()}
    except RuntimeError:  # the namespace is gone: nothing runs in it
        return set()


def _kill_pids(pids: set[int], sig: int = signal.SIGKILL) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _descendants(roots: set[int]) -> set[int]:
    """`roots` and every process below them (from /proc's parent pids)."""
    children: dict[int, list[int]] = {}
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found, todo = set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, ()))
    return found


def remove_stale(prefix: str = PREFIX) -> None:
    """Remove the namespaces (killing what runs in them) and links of earlier runs whose
    process is gone (their names carry its pid)."""
    pattern = re.compile(rf"^{prefix}(\d+)")
    for netns in _namespaces():
        match = pattern.match(netns)
        if match and not _pid_alive(int(match.group(1))):
            _kill_pids(_netns_pids(netns))
            _run("ip", "netns", "delete", netns, check=False)
    for line in _run("ip", "-o", "link", "show").splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        match = pattern.match(name)
        if match and not _pid_alive(int(match.group(1))):
            _run("ip", "link", "delete", name, check=False)


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 in 10.213.0.0/16 that no interface of this machine uses."""
    used = _run("ip", "-o", "-4", "addr", "show")
    for third in range(os.getpid() % 200, os.getpid() % 200 + 250):
        net = ipaddress.IPv4Network(f"10.213.{third % 250}.0/24")
        if f" 10.213.{third % 250}." not in used:
            return net
    raise RuntimeError("no free 10.213.x.0/24 subnet for the test cluster")


@dataclasses.dataclass
class Node:
    """One machine of the cluster: a namespace, an address, its own directories."""

    name: str  # "head", "worker1", ...
    netns: str
    ip: str
    dir: pathlib.Path
    num_cpus: int
    head: bool = False
    spawned: set[int] = dataclasses.field(default_factory=set)  # spawn()ed processes

    @property
    def ray_dir(self) -> pathlib.Path:
        return self.dir / "ray"

    @property
    def tmp_dir(self) -> pathlib.Path:
        return self.dir / "tmp"

    def pids(self) -> set[int]:
        """Every process in the node's network namespace."""
        return _netns_pids(self.netns)

    def raylet_alive(self) -> bool:
        """Whether the node's raylet (Ray's node manager) runs."""
        return any("/raylet/raylet " in _cmdline(pid) for pid in self.pids())

    def ray_pids(self) -> set[int]:
        """The node's processes but those `spawn` started (and their children)."""
        return self.pids() - _descendants({p for p in self.spawned if _pid_alive(p)})


class NetnsCluster:
    """A Ray head and `workers` worker nodes, each in a network namespace (module docstring).

    Args:
        base_dir: where the nodes' directories go (`<base_dir>/<node>/`): a short path, since
            Ray's Unix sockets live below it and such a path has at most 107 bytes.
        workers: number of worker nodes.
        num_cpus: Ray CPUs per node (the master's CPU slots on a GPU-less cluster).
        env: extra environment of every node's Ray processes (and so of their workers).
    """

    def __init__(
        self,
        base_dir: pathlib.Path,
        *,
        workers: int = 2,
        num_cpus: int = 1,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.base_dir = pathlib.Path(base_dir)
        self.tag = f"{PREFIX}{os.getpid()}"
        self.bridge = f"{self.tag}b"
        self.env = dict(env or {})
        self.subnet: ipaddress.IPv4Network | None = None
        self.gateway = ""
        self.nodes: list[Node] = []
        self._workers = workers
        self._num_cpus = num_cpus
        self._forward_rule: list[str] | None = None

    @property
    def head(self) -> Node:
        return self.nodes[0]

    @property
    def workers(self) -> list[Node]:
        return self.nodes[1:]

    @property
    def address(self) -> str:
        return f"{self.head.ip}:{RAY_PORT}"

    # -- network --------------------------------------------------------------------------------
    def _build_network(self) -> None:
        remove_stale()
        self.subnet = _free_subnet()
        hosts = list(self.subnet.hosts())
        self.gateway = str(hosts[0])
        _run("ip", "link", "add", self.bridge, "type", "bridge")
        _run("ip", "addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")
        # With br_netfilter, bridged frames go through the FORWARD chain: a host whose policy
        # drops (Docker's) would cut the nodes off from each other.
        if shutil.which("iptables"):
            rule = ["FORWARD", "-i", self.bridge, "-o", self.bridge, "-j", "ACCEPT"]
            if subprocess.run(["iptables", "-I", *rule], capture_output=True).returncode == 0:
                self._forward_rule = rule
        names = ["head"] + [f"worker{i}" for i in range(1, self._workers + 1)]
        for index, name in enumerate(names):
            node = Node(
                name=name,
                netns=f"{self.tag}-{name}",
                ip=str(hosts[9 + index]),
                dir=self.base_dir / name,
                num_cpus=self._num_cpus,
                head=index == 0,
            )
            outside = f"{self.tag}v{index}"
            _run("ip", "netns", "add", node.netns)
            _run("ip", "link", "add", outside, "type", "veth", "peer", "name", "eth0", "netns",
                 node.netns)  # fmt: skip
            _run("ip", "link", "set", outside, "master", self.bridge)
            _run("ip", "link", "set", outside, "up")
            _run("ip", "addr", "add", f"{node.ip}/24", "dev", "eth0", netns=node.netns)
            _run("ip", "link", "set", "eth0", "up", netns=node.netns)
            _run("ip", "link", "set", "lo", "up", netns=node.netns)
            node.ray_dir.mkdir(parents=True, exist_ok=True)
            node.tmp_dir.mkdir(parents=True, exist_ok=True)
            (node.dir / "home").mkdir(parents=True, exist_ok=True)
            self.nodes.append(node)

    # -- processes ------------------------------------------------------------------------------
    def node_env(self, node: Node, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """A node's environment: its own TMPDIR and HOME, RAY_SETTINGS, `env`."""
        env = child_env({**RAY_SETTINGS, **self.env, **(extra or {})})
        env["TMPDIR"] = str(node.tmp_dir)
        # Its own HOME too: Ray reads ~/.ray (an auth token there turns token auth on).
        env["HOME"] = str(node.dir / "home")
        env[TAG_ENV] = self.tag
        return env

    def spawn(
        self,
        node: Node,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        log_path: pathlib.Path | None = None,
    ) -> subprocess.Popen:
        """Start `argv` in `node`'s namespace, in a session of its own (a master, say): its
        environment is `env` as given (see `node_env`). `kill_node`/`stop_head` spare it."""
        log = open(log_path or os.devnull, "ab")  # noqa: SIM115 - the child keeps it
        try:
            process = subprocess.Popen(
                ["ip", "netns", "exec", node.netns, *argv],  # exec: the pid is argv's own
                env=dict(env) if env is not None else self.node_env(node),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            log.close()
        node.spawned.add(process.pid)
        return process

    def start_node(self, node: Node, timeout: float = 120, attempts: int = 4) -> None:
        """`ray start` on `node` (the head with the GCS on RAY_PORT) and wait until the cluster
        counts it alive. Ray gives a raylet a fixed 30 s to register, which a busy machine can
        miss: a failed start is cleared away (the node's processes killed) and tried again."""
        failures = []
        for _ in range(attempts):
            try:
                self._start_node_once(node, timeout)
                return
            except (RuntimeError, AssertionError, subprocess.TimeoutExpired) as exc:
                failures.append(str(exc)[-1500:])
                self.kill_node(node)
        raise RuntimeError(
            f"Ray did not start on {node.name} in {attempts} attempts (is the machine "
            "overloaded?): " + "\n---\n".join(failures)
        )

    def _start_node_once(self, node: Node, timeout: float) -> None:
        ray = str(pathlib.Path(sys.executable).parent / "ray")
        argv = [
            ray, "start", f"--node-ip-address={node.ip}", f"--num-cpus={node.num_cpus}",
            "--num-gpus=0", f"--temp-dir={node.ray_dir}", "--disable-usage-stats",
            "--include-log-monitor=false",  # the master collects trial output itself
        ]  # fmt: skip
        if node.head:
            argv += [f"--port={RAY_PORT}", "--head", "--include-dashboard=false"]
        else:
            argv += [f"--address={self.address}"]
        done = subprocess.run(
            ["ip", "netns", "exec", node.netns, *argv],
            env=self.node_env(node),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"ray start on {node.name} exited {done.returncode}: "
                f"{(done.stdout + done.stderr)[-1500:]}"
            )
        wait_until(
            lambda: node.ip in self.alive_node_ips(),
            timeout=timeout,
            what=f"Ray node {node.name} ({node.ip}) to join",
            interval=0.5,
        )

    def start_workers(self, nodes: Sequence[Node], timeout: float = 120) -> None:
        """`start_node` on several worker nodes side by side (each start takes seconds)."""
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=max(1, len(nodes))) as pool:
            for future in [pool.submit(self.start_node, node, timeout) for node in nodes]:
                future.result()

    def alive_node_ips(self) -> set[str]:
        """The addresses of the nodes the Ray head counts alive (asked from inside the head's
        namespace; empty when the head does not answer)."""
        script = (
            "import json, sys\n"
            "from ray._raylet import GcsClient\n"
            "from ray.core.generated import gcs_pb2\n"
            f"client = GcsClient(address={self.address!r})\n"
            "nodes = client.get_all_node_info(timeout=5)\n"
            "alive = gcs_pb2.GcsNodeInfo.GcsNodeState.ALIVE\n"
            "print(json.dumps([n.node_manager_address for n in nodes.values()"
            " if n.state == alive]))\n"
        )
        done = subprocess.run(
            ["ip", "netns", "exec", self.head.netns, sys.executable, "-c", script],
            env=self.node_env(self.head),
            capture_output=True,
            text=True,
            timeout=60,
        )
        if done.returncode != 0:
            return set()
        import json

        try:
            return set(json.loads(done.stdout.strip().splitlines()[-1]))
        except (ValueError, IndexError):
            return set()

    def kill_node(self, node: Node) -> None:
        """SIGKILL every Ray process of `node` (raylet, agents, workers; the GCS on the head)
        and the trials they run; what `spawn` started there stays."""
        wait_until(lambda: not _kill_or_empty(node), timeout=30, what=f"{node.name} to die")

    def stop_head(self) -> None:
        """The head's Ray processes die (GCS included); a master spawned there stays up."""
        self.kill_node(self.head)

    def partition(self, node: Node) -> None:
        """Drop every packet in and out of `node` but its own loopback's (as a cut cable
        between machines looks: connections hang, nothing is refused)."""
        for chain, flag in (("INPUT", "-i"), ("OUTPUT", "-o")):
            _run("iptables", "-A", chain, "!", flag, "lo", "-j", "DROP", netns=node.netns)

    def heal(self, node: Node) -> None:
        """Undo `partition`."""
        _run("iptables", "-F", netns=node.netns)

    def restore(self) -> None:
        """Bring every node back (healed, leftovers killed, Ray started): a lost head means a
        new cluster, which every worker must join again."""
        alive = self.alive_node_ips()
        missing = [node for node in self.workers if node.ip not in alive]
        if self.head.ip not in alive:
            self.kill_node(self.head)
            self.start_node(self.head)
            missing = list(self.workers)
        for node in missing:
            self.heal(node)
            self.kill_node(node)
        if missing:
            self.start_workers(missing)

    # -- life -----------------------------------------------------------------------------------
    def start(self) -> NetnsCluster:
        try:
            self._build_network()
            self.start_node(self.head)
            self.start_workers(self.workers)
        except BaseException:
            self.close()
            raise
        return self

    def processes(self) -> set[int]:
        """Every process of the cluster: in its namespaces, or started with its tag in the
        environment (every node's processes have it, and so do the trials they start)."""
        found = _tagged_pids(self.tag)
        for node in self.nodes:
            found |= node.pids()
        return found

    def trial_processes(self) -> set[int]:
        """The cluster's processes that are trials (`DET_TRIAL_ID` in their environment)."""
        return {pid for pid in self.processes() if "DET_TRIAL_ID" in _environ(pid)}

    def leftovers(self) -> list[str]:
        """What still runs of the cluster ("pid cmdline" each; [] when nothing)."""
        return [f"{pid} {_cmdline(pid)}" for pid in sorted(self.processes())]

    def close(self) -> None:
        """Kill everything in every node, then remove the namespaces, links and the rule."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            pids = self.processes()
            if not pids:
                break
            _kill_pids(pids)
            time.sleep(0.1)  # SIGKILLed processes take a moment to be reaped
        for node in self.nodes:
            _run("ip", "netns", "delete", node.netns, check=False)
        for index in range(len(self.nodes)):
            _run("ip", "link", "delete", f"{self.tag}v{index}", check=False)
        _run("ip", "link", "delete", self.bridge, check=False)
        if self._forward_rule:
            subprocess.run(["iptables", "-D", *self._forward_rule], capture_output=True)
            self._forward_rule = None

    def __enter__(self) -> NetnsCluster:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _kill_or_empty(node: Node) -> bool:
    """SIGKILL the node's processes but the spawned ones; True while some were still there."""
    pids = node.ray_pids()
    _kill_pids(pids)
    return bool(pids)


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = pathlib.Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:  # gone, or a kernel thread
        return {}
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def _tagged_pids(tag: str) -> set[int]:
    found = set()
    needle = f"{TAG_ENV}={tag}\0".encode()
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if needle in (entry / "environ").read_bytes():
                    found.add(int(entry.name))
            except OSError:
                continue
    return found


def _cmdline(pid: int) -> str:
    try:
        raw = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "(gone)"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()[:300]


class NodeMaster(MasterProcess):
    """`python -m master_lite` on a node of the cluster (the head by default), as a deployment
    runs it: `--host 0.0.0.0 --port PORT --advertised-url http://<node>:PORT`, resource manager
    `ray` at the cluster's head. `url` is the advertised one (the tests reach it over the
    bridge); `stop_head`/`kill_node` leave it running.

    Args:
        cluster: the cluster.
        root_dir: the master's root dir (the master's own disk).
        node: where it runs; the head by default.
        port: its port (the node's own network namespace: free).
        env: more environment on top of the node's.
    """

    def __init__(
        self,
        cluster: NetnsCluster,
        root_dir: pathlib.Path,
        *,
        node: Node | None = None,
        port: int = 8080,
        env: Mapping[str, str] | None = None,
        start_timeout: float = 180,
    ) -> None:
        self.cluster = cluster
        self.node = node or cluster.head
        url = f"http://{self.node.ip}:{port}"
        super().__init__(
            root_dir,
            cpu_slots=None,
            extra_args=["--host", "0.0.0.0", "--port", str(port), "--advertised-url", url],
            env={
                "MASTER_LITE_RESOURCE_MANAGER": "ray",
                "MASTER_LITE_RAY_ADDRESS": cluster.address,
                **(env or {}),
            },
            start_timeout=start_timeout,
        )

    def command(self) -> list[str]:
        return ["ip", "netns", "exec", self.node.netns, *super().command()]

    def environment(self) -> dict[str, str]:
        return self.cluster.node_env(self.node, self.env)

    def start(self, timeout: float = 180) -> None:
        super().start(timeout)
        self.node.spawned.add(self.pid)


__all__ = [
    "RAY_SETTINGS",
    "NetnsCluster",
    "Node",
    "NodeMaster",
    "PREFIX",
    "TAG_ENV",
    "RAY_PORT",
    "netns_available",
    "remove_stale",
]
