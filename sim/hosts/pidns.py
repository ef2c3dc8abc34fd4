"""A host's processes: one PID namespace per host (``unshare --pid --fork --mount-proc``
inside the host's network namespace), so the host's ``/proc`` shows its own processes only,
as on a real machine, and the liveness scans of agents-room see their own host.

The namespace's first process (its init) is a tiny reaper of orphans; every process placed
on the host enters its network, mount (its own ``/proc``) and PID namespaces with
``nsenter`` (:meth:`Host.command`). Killing the init kills every process of the host at once
(the kernel does that when a PID namespace's init dies): the ``kill_host`` fault.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

# PID 1 of a host: reap whatever is orphaned onto it; SIGKILL (from outside) is its end.
INIT = ("import os, time\n"
        "while True:\n"
        "    try:\n"
        "        os.wait()\n"
        "    except ChildProcessError:\n"
        "        time.sleep(0.5)\n")


def children(pid: int) -> list[int]:
    out: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            out += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
    return out


@dataclass
class Host:
    """One simulated host: its name (the host id its agents carry), its network namespace,
    and its PID namespace's init."""

    index: int
    name: str  # h0, h1, ...: AGENTS_ROOM_HOST_ID of its processes
    netns: str
    address: str
    outer: subprocess.Popen | None = None  # unshare, in this PID namespace
    init_pid: int = 0  # the host's PID 1, as this namespace numbers it
    generation: int = 0  # one more after each kill_host

    def start(self, python: str) -> None:
        """A fresh PID namespace for the host (a killed host comes back with a new one)."""
        self.outer = subprocess.Popen(
            ["ip", "netns", "exec", self.netns, "unshare", "--pid", "--fork", "--mount-proc", "--kill-child",
             python, "-c", INIT], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        deadline = time.monotonic() + 10
        while not (kids := children(self.outer.pid)):
            if self.outer.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"host {self.name}: its PID namespace did not start (unshare exited "
                                   f"{self.outer.poll()})")
            time.sleep(0.01)
        self.init_pid = kids[0]

    def command(self, argv: list[str], cwd: str | Path | None = None) -> list[str]:
        """``argv`` run on this host: in its network, mount and PID namespaces."""
        wd = [f"--wd={cwd}"] if cwd else []
        return ["nsenter", "-t", str(self.init_pid), "-n", "-m", "-p", *wd, "--", *argv]

    def pids(self) -> list[int]:
        """Every process of the host (this namespace's numbers): those in its PID namespace."""
        if not self.init_pid:
            return []
        try:
            mine = os.readlink(f"/proc/{self.init_pid}/ns/pid")
        except OSError:
            return []
        out = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{entry}/ns/pid") == mine:
                        out.append(int(entry))
        return out

    def kill_all(self) -> int:
        """SIGKILL the host's init, so the kernel kills every process of its PID namespace;
        waits until they are gone. Returns how many there were."""
        pids = self.pids()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.init_pid, signal.SIGKILL)
        if self.outer is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.outer.wait(timeout=10)
        deadline = time.monotonic() + 10
        while any(Path(f"/proc/{p}").exists() and _state(p) not in ("Z", "") for p in pids):
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
        self.init_pid = 0
        return len(pids)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""
