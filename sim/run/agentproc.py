"""What a fake agent's process needs beside its workload (sim/run/agent.py): starting its
driver while the store is not up yet, and the CPU it and its children (the ``agents-room
serve`` of the mcp driver) spent."""

from __future__ import annotations

import os
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path

from .drivers import Driver

# How long an agent starts its driver again while the store cannot be reached (a nemesis's
# database restart takes well under a second; a partition of the agent's host, its length).
START_RETRY_S = 20.0


def start_driver(open_: Callable[[], Driver], retry_s: float = START_RETRY_S) -> Driver:
    """``open_()``, again every half second (as a harness restarts a server that died at
    start) while the server or the store does not come up, e.g. a replacement agent starting
    while the nemesis has the database down; still down after ``retry_s``, the last error ends
    the agent. Nothing is invoked before the driver is up, so the history has nothing to settle."""
    deadline = time.monotonic() + retry_s
    while True:
        try:
            return open_()
        except ValueError:
            raise  # a driver this run cannot have: no retry makes it one
        except Exception as exc:  # noqa: BLE001 - a server or store that did not come up
            if time.monotonic() >= deadline:
                raise
            print(f"driver did not start ({type(exc).__name__}: {str(exc)[:200]}); starting it again",
                  file=sys.stderr, flush=True)
            time.sleep(0.5)


def self_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def children_cpu_s() -> float:
    """CPU of this process's running children (the ``agents-room serve`` of the mcp driver),
    from /proc: RUSAGE_CHILDREN only counts children that have exited."""
    ticks = 0
    for task in os.listdir("/proc/self/task"):
        try:
            kids = Path(f"/proc/self/task/{task}/children").read_text().split()
        except OSError:
            continue
        for kid in kids:
            try:
                fields = Path(f"/proc/{kid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")
