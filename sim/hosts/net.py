"""The simulated network: a bridge in this namespace, one network namespace per host and one
for the database, each joined to the bridge by a veth pair; addresses from 198.18.0.0/15
(set aside for test networks, RFC 2544) and nothing else, one /24 per run.

A run's subnet is chosen under a lock among the /24s no interface of this namespace uses, so
runs side by side (the test suite's workers) never share one. Names carry a random run id
(``ar<id>...``, within the kernel's 15 characters). What a run made is written to a registry
file under ``/run/agents-room-sim/`` before it is made; :func:`reap` removes what a dead
runner left (namespaces, links, processes, its database) at the next start.

Partition: ``iptables -A OUTPUT -d <db> -j DROP`` and ``-A INPUT -s <db> -j DROP`` inside the
host's namespace: packets vanish both ways, as on a real network cut, with no reset (the
kernel has no netem here; a link set down is the other way, and it is not used).
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import secrets
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

RANGE = ipaddress.ip_network("198.18.0.0/15")
REGISTRY = Path(os.environ.get("SIM_HOSTS_REGISTRY", "/run/agents-room-sim"))
DB_OCTET, BRIDGE_OCTET, FIRST_HOST_OCTET = 1, 254, 10


class NetError(RuntimeError):
    """A command that builds or changes the network failed; the text names it."""


def sh(*argv: str, check: bool = True, netns: str | None = None) -> subprocess.CompletedProcess[str]:
    cmd = ["ip", "netns", "exec", netns, *argv] if netns else list(argv)
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if check and done.returncode:
        raise NetError(f"{' '.join(cmd)}: {done.stderr.strip() or done.stdout.strip() or done.returncode}")
    return done


@dataclass
class Record:
    """What one run made, as the registry keeps it (so that a later start can remove it)."""

    run_id: str
    owner_pid: int
    owner_start: str  # /proc/<pid>/stat's start time: a reused pid is not the owner
    subnet: str
    netns: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)  # temporary folders (the database's)

    @property
    def path(self) -> Path:
        return REGISTRY / f"{self.run_id}.json"

    def save(self) -> None:
        REGISTRY.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self)))
        os.replace(tmp, self.path)


def _start_time(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def _owner_alive(rec: Record) -> bool:
    return bool(rec.owner_start) and _start_time(rec.owner_pid) == rec.owner_start


def kill_netns_processes(netns: str, sig: int = signal.SIGKILL) -> list[int]:
    """Signal every process inside the namespace ``netns``; returns their pids."""
    pids = [int(p) for p in sh("ip", "netns", "pids", netns, check=False).stdout.split()]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
    return pids


def remove(rec: Record) -> None:
    """Remove everything ``rec`` lists, whatever state it is in (idempotent)."""
    for ns in rec.netns:
        for _ in range(50):  # SIGKILL is asynchronous: wait until the namespace is empty
            if not kill_netns_processes(ns):
                break
            time.sleep(0.05)
        sh("ip", "netns", "del", ns, check=False)
    for link in rec.links:
        sh("ip", "link", "del", link, check=False)
    for d in rec.dirs:
        shutil.rmtree(d, ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):
        rec.path.unlink()


def reap() -> list[str]:
    """Remove what runners that are gone left behind; returns their run ids."""
    reaped = []
    if not REGISTRY.exists():
        return reaped
    with _locked():
        for path in sorted(REGISTRY.glob("*.json")):
            try:
                rec = Record(**json.loads(path.read_text()))
            except (OSError, ValueError, TypeError):
                path.unlink(missing_ok=True)
                continue
            if not _owner_alive(rec):
                remove(rec)
                reaped.append(rec.run_id)
    return reaped


@contextlib.contextmanager
def _locked():
    REGISTRY.mkdir(parents=True, exist_ok=True)
    with open(REGISTRY / "lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _used_subnets() -> set[ipaddress.IPv4Network]:
    out = set()
    for line in sh("ip", "-o", "-4", "addr", "show").stdout.splitlines():
        words = line.split()
        if "inet" in words:
            iface = ipaddress.ip_interface(words[words.index("inet") + 1])
            if iface.ip in RANGE:
                out.add(ipaddress.ip_network(f"{iface.ip}/24", strict=False))
    for path in REGISTRY.glob("*.json"):  # chosen, maybe not yet configured
        with contextlib.suppress(OSError, ValueError, KeyError):
            out.add(ipaddress.ip_network(json.loads(path.read_text())["subnet"]))
    return out


@dataclass
class Network:
    """One run's network: ``hosts`` namespaces and the database's, on one bridge."""

    record: Record
    n_hosts: int

    @property
    def subnet(self) -> ipaddress.IPv4Network:
        return ipaddress.ip_network(self.record.subnet)

    def addr(self, octet: int) -> str:
        return str(self.subnet.network_address + octet)

    @property
    def db_addr(self) -> str:
        return self.addr(DB_OCTET)

    def host_addr(self, i: int) -> str:
        return self.addr(FIRST_HOST_OCTET + i)

    def netns(self, i: int) -> str:
        return f"ar{self.record.run_id}h{i}"

    @property
    def db_netns(self) -> str:
        return f"ar{self.record.run_id}db"

    @property
    def bridge(self) -> str:
        return f"ar{self.record.run_id}br"

    # -- making and removing -------------------------------------------------------------------

    @classmethod
    def create(cls, n_hosts: int) -> Network:
        """Choose a free /24 of 198.18.0.0/15, register the run, then build it; on any error
        everything built so far is removed."""
        run_id = secrets.token_hex(2)
        with _locked():
            used = _used_subnets()
            free = next((s for s in RANGE.subnets(new_prefix=24) if s not in used), None)
            if free is None:
                raise NetError("no free /24 left in 198.18.0.0/15 (other runs hold them all)")
            rec = Record(run_id, os.getpid(), _start_time(os.getpid()), str(free))
            net = cls(rec, n_hosts)
            rec.netns = [net.db_netns, *(net.netns(i) for i in range(n_hosts))]
            rec.links = [net.bridge, *(f"ar{run_id}v{i}" for i in range(n_hosts)), f"ar{run_id}vdb"]
            rec.save()
        try:
            net._build()
        except BaseException:
            remove(rec)
            raise
        return net

    def _build(self) -> None:
        prefix = self.subnet.prefixlen
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        sh("ip", "addr", "add", f"{self.addr(BRIDGE_OCTET)}/{prefix}", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        places = [(self.db_netns, f"ar{self.record.run_id}vdb", self.db_addr)]
        places += [(self.netns(i), f"ar{self.record.run_id}v{i}", self.host_addr(i)) for i in range(self.n_hosts)]
        for ns, link, address in places:
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns)
            sh("ip", "link", "set", link, "master", self.bridge)
            sh("ip", "link", "set", link, "up")
            sh("ip", "addr", "add", f"{address}/{prefix}", "dev", "eth0", netns=ns)
            sh("ip", "link", "set", "eth0", "up", netns=ns)
            sh("ip", "link", "set", "lo", "up", netns=ns)

    def close(self) -> None:
        remove(self.record)

    # -- the nemesis's levers --------------------------------------------------------------------

    def _rules(self, i: int) -> list[list[str]]:
        return [["OUTPUT", "-d", self.db_addr, "-j", "DROP"], ["INPUT", "-s", self.db_addr, "-j", "DROP"]]

    def partition(self, i: int) -> None:
        """Cut host ``i`` off the database: its packets to it and the database's to it vanish."""
        for rule in self._rules(i):
            sh("iptables", "-w", "-A", *rule, netns=self.netns(i))

    def heal(self, i: int) -> None:
        for rule in self._rules(i):
            sh("iptables", "-w", "-D", *rule, netns=self.netns(i), check=False)

    def partitioned(self, i: int) -> bool:
        return "DROP" in sh("iptables", "-w", "-S", "OUTPUT", netns=self.netns(i), check=False).stdout
