"""Streamable HTTP: a real ``agents-room serve --http`` process (uvicorn on a free loopback
port) serving two agents, behind a bearer token."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from agents_room.server.http import Address, check_exposure, parse_address
from agents_room.store import InvalidArgument

EXE = str(Path(sys.executable).with_name("agents-room"))
TOKEN = "s3cret-token-for-tests"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(proc: subprocess.Popen, port: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited {proc.returncode}: {proc.stderr.read()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("server did not start listening")


@pytest.fixture
def http_server(tmp_path: Path, repo: Path) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "AGENTS_ROOM_DB": str(tmp_path / "room.db"), "AGENTS_ROOM_TOKEN": TOKEN}
    proc = subprocess.Popen([EXE, "serve", "--http", f"127.0.0.1:{port}"], cwd=repo, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_port(proc, port)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stderr.close()


@asynccontextmanager
async def client(url: str, token: str = TOKEN) -> AsyncIterator[Client]:
    # The transport leaves a client it was given open: close it here.
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http)) as c:
            yield c


async def ok(c: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await c.call_tool(tool, args)
    assert not result.is_error, result.content
    return result.structured_content


@pytest.mark.slow
@pytest.mark.anyio
async def test_token_is_required_and_two_agents_share_one_process(http_server: str, repo: Path) -> None:
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    headers = {"Accept": "application/json, text/event-stream"}
    async with httpx2.AsyncClient(timeout=10) as raw:
        for auth in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
            response = await raw.post(http_server, json=initialize, headers={**headers, **auth})
            assert response.status_code == 401, auth
            assert response.headers["www-authenticate"].startswith("Bearer")
        response = await raw.post(http_server, json=initialize, headers={**headers, "Authorization": f"Bearer {TOKEN}"})
        assert response.status_code == 200

    async with client(http_server) as a, client(http_server) as b:
        alice, bob = await ok(a, "room_join", label="alice"), await ok(b, "room_join", label="bob")
        sa, sb = alice["session_id"], bob["session_id"]
        assert sa != sb
        # Each acts through the credential its room_join returned (server/selves.py; test_selves.py).
        assert (await ok(a, "lease_claim", session_id=alice["credential"], path="README.md"))["ok"] is True
        denied = await ok(b, "lease_claim", session_id=bob["credential"], path=str(repo / "README.md"))
        assert denied["ok"] is False and denied["holder"]["session_id"] == sa
        who = {s["session_id"]: s for s in (await ok(b, "room_who", session_id=bob["credential"]))["sessions"]}
        # one process, many agents: the server's folder, no pid (liveness unknown)
        assert who[sa]["cwd"] == str(repo) and who[sa]["pid"] is None and who[sa]["liveness"] == "unknown"
        result = await b.call_tool("msg_unread", {"session_id": "f" * 16})
        assert result.is_error and result.content[0].text.startswith("unknown_session: ")


@pytest.mark.slow
def test_a_non_loopback_address_without_a_token_is_refused(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "AGENTS_ROOM_TOKEN"}
    done = subprocess.run([EXE, "--db", str(tmp_path / "room.db"), "serve", "--http", f"0.0.0.0:{free_port()}"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "0.0.0.0" in done.stderr and "AGENTS_ROOM_TOKEN" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "room.db").exists()


def test_addresses() -> None:
    assert parse_address("127.0.0.1:8765") == Address("127.0.0.1", 8765)
    assert parse_address("[::1]:80").url == "http://[::1]:80/mcp"
    assert Address("::1", 1).loopback and Address("localhost", 1).loopback and Address("127.0.0.2", 1).loopback
    assert not Address("0.0.0.0", 1).loopback and not Address("192.168.1.4", 1).loopback
    for bad in ("8765", "host:", "127.0.0.1:99999", ":80"):
        with pytest.raises(InvalidArgument, match="--http"):
            parse_address(bad)
    check_exposure(Address("127.0.0.1", 1), None)
    check_exposure(Address("0.0.0.0", 1), "token")
    with pytest.raises(InvalidArgument, match="AGENTS_ROOM_TOKEN"):
        check_exposure(Address("10.0.0.1", 1), None)


CLIENT = """
import asyncio, os, sys
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

async def main(url, token, pid):
    headers = {"Authorization": f"Bearer {token}", "X-Agents-Room-Pid": pid, "X-Agents-Room-Host": "box-2"}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http)) as c:
            joined = await c.call_tool("room_join", {"label": "far", "harness_key": os.environ["AGENTS_ROOM_HARNESS_KEY"]})
            print(joined.structured_content["session_id"] if not joined.is_error else joined.content[0].text, flush=True)
            sys.stdin.readline()  # alive until killed

asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else str(os.getpid())))
"""


def prune_on(host: str, db: Path) -> str:
    env = {**os.environ, "AGENTS_ROOM_DB": str(db), "AGENTS_ROOM_HOST_ID": host}
    done = subprocess.run([EXE, "prune", "--quiet-s", "0"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_session_whose_client_names_its_process_is_pruned_on_its_host_once_that_is_gone(
    tmp_path: Path, repo: Path
) -> None:
    import uuid

    from agents_room.store import Store

    db, port, key = tmp_path / "room.db", free_port(), str(uuid.uuid4())
    env = {**os.environ, "AGENTS_ROOM_DB": str(db), "AGENTS_ROOM_TOKEN": TOKEN, "AGENTS_ROOM_HOST_ID": "box-1"}
    server = subprocess.Popen([EXE, "serve", "--http", f"127.0.0.1:{port}"], cwd=repo, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/mcp"
    agent = None
    try:
        wait_for_port(server, port)
        # An agent on host box-2 (its process carries its harness key, as a harness's does).
        agent = subprocess.Popen([sys.executable, "-c", CLIENT, url, TOKEN], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True, env={**os.environ, "AGENTS_ROOM_HARNESS_KEY": key})
        far = agent.stdout.readline().strip()
        bad = subprocess.run([sys.executable, "-c", CLIENT, url, TOKEN, "-5"], input="\n", capture_output=True,
                             text=True, timeout=60, env={**os.environ, "AGENTS_ROOM_HARNESS_KEY": str(uuid.uuid4())})
        assert bad.stdout.startswith("invalid_argument: X-Agents-Room-Pid: "), bad.stdout + bad.stderr
        async with client(url) as c:  # a client that names no process: unknown, never pruned
            anon = (await ok(c, "room_join", label="anon"))["session_id"]
            who = {s["session_id"]: s for s in (await ok(c, "room_who"))["sessions"]}
        assert (who[far]["pid"], who[far]["host"]) == (agent.pid, "box-2"), who[far]
        assert who[anon]["pid"] is None and who[anon]["liveness"] == "unknown"

        agent.kill()
        agent.wait()
        assert far not in prune_on("box-1", db)  # another host's process: not this host's to prove gone
        assert far in prune_on("box-2", db)  # its own host proves it gone
        with Store.open(db) as store:
            live = {s.session_id for s in store.room_who()}
        assert far not in live and anon in live
    finally:
        for proc in (agent, server):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
        for pipe in (server.stderr, *((agent.stdin, agent.stdout) if agent else ())):
            pipe.close()
