"""A session acts only as itself (contract §2, server/selves.py): another session's id, copied
from a listing, is refused with a word naming the session the server serves; never a silent act
as someone else. Real ``agents-room serve`` processes: over stdio through the SDK's client, and
over Streamable HTTP with the credential ``room_join`` hands out. Both engines."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from agents_room.store import Store
from test_http import free_port, wait_for_port

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

EXE = str(Path(sys.executable).with_name("agents-room"))
KEY_A = str(uuid.uuid4())  # per test process: liveness scans every process of the machine
KEY_B = str(uuid.uuid4())
TOKEN = "s3cret-token-for-selves"


@pytest.fixture(params=["sqlite", "postgresql"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return request.getfixturevalue("pg_url") if request.param == "postgresql" else str(tmp_path / "store" / "room.db")


def agent(where: str, cwd: Path, key: str | None) -> Client:
    env = {"AGENTS_ROOM_DB": where, **({"AGENTS_ROOM_HARNESS_KEY": key} if key else {})}
    return Client(StdioServerParameters(command=EXE, args=["serve"], env=env, cwd=str(cwd)), mode="legacy")


async def ok(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, (tool, result.content)
    return result.structured_content


async def refused(client: Client, tool: str, **args: Any) -> str:
    result = await client.call_tool(tool, args)
    assert result.is_error, (tool, result.structured_content)
    text = result.content[0].text
    assert text.startswith("unknown_session: "), text
    return text


async def test_a_stdio_server_acts_only_for_its_own_agent(where: str, repo: Path) -> None:
    async with agent(where, repo, KEY_A) as a, agent(where, repo, KEY_B) as b:
        sa = (await ok(a, "room_join", label="alice"))["session_id"]
        sb = (await ok(b, "room_join", label="bob"))["session_id"]
        assert (await ok(b, "lease_claim", session_id=sb, path="README.md"))["ok"] is True
        await ok(b, "msg_send", session_id=sb, to=sa, subject="for alice")
        await ok(a, "msg_send", session_id=sa, to=sb, subject="for bob")  # an id as a name: fine

        # Alice's server, handed Bob's id (as a listing shows it), acts as nobody.
        assert sb in [s["session_id"] for s in (await ok(a, "room_who"))["sessions"]]
        for tool, args in [("msg_recv", {}), ("msg_send", {"to": "*", "subject": "as bob"}),
                           ("lease_release", {"path": "README.md"}), ("room_leave", {}),
                           ("room_who", {}), ("room_history", {}), ("msg_ack", {"message_id": 1})]:
            text = await refused(a, tool, session_id=sb, **args)
            assert sb in text and "'bob'" in text and f"session_id={sa!r}" in text, text
        # ... and nothing happened to Bob: his mail unread, his lease held, his session live.
        assert (await ok(b, "msg_unread", session_id=sb))["count"] == 1
        assert (await ok(b, "lease_check", session_id=sb, path="README.md"))["lease"]["session_id"] == sb
        assert [m["subject"] for m in (await ok(b, "msg_recv", session_id=sb))["messages"]] == ["for bob"]
        # Tools whose session_id is optional work without one.
        assert (await ok(a, "room_history", room="repo:alpha"))["room"] == "repo:alpha"
        assert (await ok(a, "room_set_autonomy_cap", room="team:cap", autonomy="notify"))["room"] == "team:cap"
        # An id naming nothing keeps the store's words; a prefix still says whose it is.
        assert "another store" in (await refused(a, "msg_unread", session_id="0" * 16))
        assert sb in await refused(a, "msg_unread", session_id=sb[:6])
        # One server may serve several sessions it joined itself (a second harness key: a second agent of it).
        sc = (await ok(a, "room_join", harness_key="9c9c9c9c-2222-4e5d-8c3a-2b1f0e9d8c7a"))["session_id"]
        assert (await ok(a, "msg_unread", session_id=sc))["count"] == 0
        await ok(a, "msg_unread", session_id=sa)

    # The harness restarted the server: the id the model holds is still its own (by harness key),
    # without a room_join; another agent's id is still refused, naming the one it serves.
    async with agent(where, repo, KEY_A) as again, agent(where, repo, None) as stranger:
        assert (await ok(again, "msg_recv", session_id=sa))["messages"][0]["subject"] == "for alice"
        assert f"session_id={sa!r}" in await refused(again, "msg_unread", session_id=sb)
        assert "room_join first" in await refused(stranger, "lease_release", session_id=sb, path="README.md")
    with Store.open(where) as store:  # after all that, Bob's lease is still his
        assert store.lease_check(sb, "README.md").lease.session_id == sb


@asynccontextmanager
async def http_client(url: str, mode: str = "auto", **headers: str) -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}", **headers}, timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as c:  # type: ignore[arg-type]
            yield c


@pytest.fixture
def http_url(where: str, repo: Path) -> Iterator[str]:
    """A real ``agents-room serve --http`` on a free loopback port, on the store ``where``."""
    port = free_port()
    env = {**os.environ, "AGENTS_ROOM_DB": where, "AGENTS_ROOM_TOKEN": TOKEN}
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


async def test_over_http_a_session_is_bound_to_its_credential(where: str, http_url: str) -> None:
    url = http_url
    async with http_client(url) as a, http_client(url) as b:  # the sessionless protocol: no connection to bind
        alice = await ok(a, "room_join", label="alice")
        bob = await ok(b, "room_join", label="bob")
        sa, sb, ca, cb = alice["session_id"], bob["session_id"], alice["credential"], bob["credential"]
        assert ca.startswith(f"{sa}.") and cb.startswith(f"{sb}.")
        # The credential is what acts, as session_id; the bare id (a name in every listing) does not.
        claim = await ok(b, "lease_claim", session_id=cb, path="README.md")
        assert claim["lease"]["session_id"] == sb
        assert "credential" in await refused(b, "lease_release", session_id=sb, path="README.md")
        await ok(b, "msg_send", session_id=cb, to=sa, subject="for alice")
        assert (await ok(a, "msg_unread", session_id=ca))["count"] == 1
        forged = f"{sb}.{ca.partition('.')[2]}"  # Bob's id under Alice's MAC
        assert "not a credential" in await refused(a, "lease_release", session_id=forged, path="README.md")
        assert "room_join again" in await refused(a, "msg_recv", session_id=f"{sb}.{'0' * 32}")
        assert (await ok(a, "room_who"))["sessions"]  # listings need no session
    # In a header instead: the request acts for the sessions whose credentials it carries.
    async with http_client(url, **{"X-Agents-Room-Credential": f"{forged}, {ca}"}) as c:
        assert (await ok(c, "msg_recv", session_id=sa))["messages"][0]["subject"] == "for alice"
        text = await refused(c, "lease_release", session_id=sb, path="README.md")
        assert sb in text and "'bob'" in text and f"session_id={ca!r}" in text, text
    # The handshake protocol: the connection that joined (its Mcp-Session-Id) acts for the bare id.
    async with http_client(url, mode="legacy") as d, http_client(url, mode="legacy") as e:
        sd = (await ok(d, "room_join", label="dora"))["session_id"]
        assert (await ok(d, "msg_unread", session_id=sd))["count"] == 0
        assert "'dora'" in await refused(e, "msg_unread", session_id=sd)
        assert "'bob'" in await refused(d, "room_leave", session_id=sb)
    with Store.open(where) as store:  # after all that, Bob is live and holds his lease
        assert store.lease_check(sb, "README.md").lease.session_id == sb


def test_the_simulators_http_driver_acts_through_its_credentials(http_url: str) -> None:
    from sim.run.drivers import HttpDriver, OpError

    driver = HttpDriver(http_url, TOKEN, 30.0)
    other = HttpDriver(http_url, TOKEN, 30.0)
    try:
        me = driver.call("room_join", {"label": "sim-a", "harness": "sim", "harness_key": KEY_A})["session_id"]
        peer = other.call("room_join", {"label": "sim-b", "harness": "sim", "harness_key": KEY_B})["session_id"]
        assert driver.call("lease_claim", {"session_id": me, "path": "README.md"})["ok"] is True
        with pytest.raises(OpError) as refused:  # its peer's bare id is a name, not a key
            other.call("lease_release", {"session_id": me, "path": "README.md"})
        assert refused.value.code == "unknown_session"
        driver.call("room_leave", {"session_id": me})
        with pytest.raises(OpError) as left:  # the stale_session step: the store's words, as before
            driver.call("msg_send", {"session_id": me, "to": "*", "subject": "late"})
        assert left.value.code == "unknown_session" and "left at" in str(left.value)
        assert other.call("lease_claim", {"session_id": peer, "path": "README.md"})["ok"] is True  # freed by the leave
    finally:
        driver.close()
        other.close()
