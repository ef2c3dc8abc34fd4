"""A real ``agents-room dashboard`` process on a free loopback port, over a real store file."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_http import free_port, wait_for_port  # tests/ is on the path: the helpers serve --http's tests use

EXE = str(Path(sys.executable).with_name("agents-room"))


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
