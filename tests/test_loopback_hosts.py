"""DNS rebinding: the dashboard and ``serve --http`` check Host and Origin on every loopback
address, ``[::1]`` and ``127.0.0.2`` too (the SDK's own check covers ``127.0.0.1``,
``localhost`` and ``::1`` only; the dashboard's covered IPv4 only). Real processes, raw HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest

from agents_room.store import Store

EXE = str(Path(sys.executable).with_name("agents-room"))
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def started(args: list[str], host: str, port: int, env: dict[str, str]) -> subprocess.Popen:
    proc = subprocess.Popen([EXE, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"exited {proc.returncode}: {proc.stderr.read()}")
        try:
            socket.create_connection((host, port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError("did not start listening")


@pytest.mark.slow
@pytest.mark.parametrize("host", ["::1", "127.0.0.2"])
def test_a_foreign_host_or_origin_is_refused_on_every_loopback_address(tmp_path: Path, repo: Path, host: str) -> None:
    db = tmp_path / "room.db"
    Store.open(db).close()
    env = {k: v for k, v in os.environ.items() if k != "AGENTS_ROOM_TOKEN"}
    env["AGENTS_ROOM_DB"] = str(db)
    named = f"[{host}]" if ":" in host else host
    serve_port, dash_port = free_port(host), free_port(host)
    procs = [started(["serve", "--http", f"{named}:{serve_port}"], host, serve_port, env),
             started(["dashboard", "--http", f"{named}:{dash_port}"], host, dash_port, env)]
    try:
        with httpx2.Client(timeout=30) as http:
            mcp, page = f"http://{named}:{serve_port}/mcp", f"http://{named}:{dash_port}/"

            def post(**headers: str) -> int:
                return http.post(mcp, json=INITIALIZE, headers={**MCP_HEADERS, **headers}).status_code

            def get(**headers: str) -> int:
                return http.get(page, headers=headers).status_code

            for ask in (post, get):
                assert ask(Host=f"evil.example:{serve_port}") == 400, ask
                assert ask(Host="evil.example") == 400, ask
                assert ask(Origin="http://evil.example") == 403, ask
                assert ask(Origin="null") == 403, ask
            assert post() == 200 and get() == 200  # its own name, no Origin: a client that is no page
            assert post(Host=f"localhost:{serve_port}", Origin=f"http://localhost:{serve_port}") == 200
            assert get(Origin=f"http://{named}:{dash_port}") == 200
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=30)
            proc.stderr.close()
