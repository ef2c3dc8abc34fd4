"""A real ``agents-room dashboard`` process on a free loopback port, over a real store file."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

EXE = str(Path(sys.executable).with_name("agents-room"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(proc: subprocess.Popen, port: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"dashboard exited {proc.returncode}: {proc.stderr.read()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError("dashboard did not start listening")


@pytest.fixture
def dashboard() -> Iterator[Callable[..., str]]:
    """``dashboard(db, token=None)`` starts one and returns its base URL; all stop at the end."""
    procs: list[subprocess.Popen] = []

    def start(db: Path, token: str | None = None) -> str:
        port = free_port()
        env = {**os.environ, "AGENTS_ROOM_DB": str(db)}
        env.pop("AGENTS_ROOM_TOKEN", None)
        if token:
            env["AGENTS_ROOM_TOKEN"] = token
        proc = subprocess.Popen([EXE, "dashboard", "--http", f"127.0.0.1:{port}"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        procs.append(proc)
        wait_for_port(proc, port)
        return f"http://127.0.0.1:{port}/"

    yield start
    for proc in procs:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stderr.close()
