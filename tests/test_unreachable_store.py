"""Servers that outlive their database: a real PostgreSQL cluster is stopped, ``agents-room
serve`` (stdio, through the SDK's stdio client; and ``--http``) and ``agents-room dashboard``
start anyway, every call is refused in one clean ``store_error:`` line saying the store is
unreachable and that the next call tries again, then the cluster is started and the next
call is served, by the same process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from test_http import client, free_port, wait_for_port

import pgcluster
from agents_room.store import Store

pytestmark = [pytest.mark.slow, pytest.mark.postgres_only]

EXE = str(Path(sys.executable).with_name("agents-room"))
SOME_SESSION = "0123456789abcdef"


@pytest.fixture(scope="module")
def cluster() -> Iterator[pgcluster.Cluster]:
    """A cluster of this module's own: its tests stop and start it (the shared one stays up)."""
    try:
        import psycopg  # noqa: F401

        started = pgcluster.start_cluster()
    except (ImportError, LookupError, RuntimeError) as exc:
        pytest.skip(f"no PostgreSQL server to test against: {exc}")
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def down_store(cluster: pgcluster.Cluster) -> Iterator[str]:
    """A store URL whose schema exists, on a cluster that is down when the test starts; the
    cluster runs again after the test, whatever happened."""
    url = pgcluster.new_schema(cluster)
    Store.open(url).close()  # the schema, so that the dashboard (which never creates) finds a store
    cluster.halt()
    try:
        yield url
    finally:
        with_up(cluster)


def with_up(cluster: pgcluster.Cluster) -> None:
    if not (cluster.data / "postmaster.pid").exists():
        cluster.resume()


def assert_refused_cleanly(text: str) -> None:
    assert text.startswith("store_error: "), text
    assert "unreachable" in text and "tries to connect again" in text, text
    assert "Traceback" not in text and "\n" not in text, text


def server_env(url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "AGENTS_ROOM_TOKEN"}
    return {**env, "AGENTS_ROOM_DB": url}


def stop(proc: subprocess.Popen) -> str:
    """Stop a server started with ``stderr=PIPE``; what it wrote there."""
    proc.terminate()
    proc.wait(timeout=10)
    stderr = proc.stderr.read()
    proc.stderr.close()
    return stderr


@pytest.mark.anyio
async def test_a_stdio_server_started_while_the_database_is_down_serves_once_it_is_back(
    down_store: str, cluster: pgcluster.Cluster, repo: Path
) -> None:
    params = StdioServerParameters(command=EXE, args=["serve"], env={"AGENTS_ROOM_DB": down_store}, cwd=str(repo))
    async with Client(params) as agent:
        for tool, args in (("room_join", {"label": "early"}), ("lease_list", {"session_id": SOME_SESSION}),
                           ("room_who", {})):
            result = await agent.call_tool(tool, args)
            assert result.is_error, (tool, result.content)
            assert_refused_cleanly(result.content[0].text)
        cluster.resume()
        joined = await agent.call_tool("room_join", {"label": "back"})
        assert not joined.is_error, joined.content
        me = joined.structured_content["session_id"]
        claim = await agent.call_tool("lease_claim", {"session_id": me, "path": "README.md"})
        assert not claim.is_error and claim.structured_content["ok"] is True, claim.content


@pytest.mark.anyio
async def test_an_http_server_started_while_the_database_is_down_serves_once_it_is_back(
    down_store: str, cluster: pgcluster.Cluster, repo: Path
) -> None:
    port = free_port()
    env = {**server_env(down_store), "AGENTS_ROOM_TOKEN": "t0ken-for-this-test"}
    proc = subprocess.Popen([EXE, "serve", "--http", f"127.0.0.1:{port}"], cwd=repo, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_port(proc, port)
        async with client(f"http://127.0.0.1:{port}/mcp", token="t0ken-for-this-test") as agent:
            refused = await agent.call_tool("room_join", {"label": "early"})
            assert refused.is_error
            assert_refused_cleanly(refused.content[0].text)
            cluster.resume()
            joined = await agent.call_tool("room_join", {"label": "back"})
            assert not joined.is_error, joined.content
    finally:
        stderr = stop(proc)
    assert "Traceback" not in stderr, stderr
    assert "unreachable" in stderr  # the start said why it serves without a store


def test_the_dashboard_started_while_the_database_is_down_shows_data_once_it_is_back(
    down_store: str, cluster: pgcluster.Cluster
) -> None:
    port = free_port()
    proc = subprocess.Popen([EXE, "dashboard", "--http", f"127.0.0.1:{port}"], env=server_env(down_store),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_port(proc, port)
        url = f"http://127.0.0.1:{port}/snapshot.json"
        refused = httpx2.get(url, timeout=30)
        assert refused.status_code == 503, refused.text
        assert_refused_cleanly(refused.json()["error"])
        assert httpx2.get(f"http://127.0.0.1:{port}/", timeout=30).status_code == 200  # the page itself serves
        cluster.resume()
        shown = httpx2.get(url, timeout=30)
        assert shown.status_code == 200, shown.text
        assert "rooms" in json.loads(shown.text)
    finally:
        stderr = stop(proc)
    assert "Traceback" not in stderr, stderr


def test_a_bad_location_is_still_refused_at_start(tmp_path: Path) -> None:
    cases = ((["serve"], "relative/room.db", "relative path"), (["dashboard"], "mysql://h/db", "scheme mysql://"))
    for argv, setting, words in cases:
        done = subprocess.run([EXE, *argv], env=server_env(setting), cwd=tmp_path, capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL)
        assert done.returncode == 1, (argv, done.stderr)
        assert words in done.stderr and "Traceback" not in done.stderr, (argv, done.stderr)
