"""The servers count every call (store/callcounts.py): a real ``agents-room serve`` over stdio,
counted by tool, session and outcome, reads riding the process's writes, the rest written at
its clean exit; the hook's news path counts its read in the write it makes anyway."""

from __future__ import annotations

import uuid

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from agents_room.store import Store

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

EXE = str(Path(sys.executable).with_name("agents-room"))
KEY = str(uuid.uuid4())  # per test process: liveness scans every process of the machine


def counts(db: Path) -> dict[tuple[str, str, str], int]:
    conn = sqlite3.connect(db)
    try:
        found: dict[tuple[str, str, str], int] = {}
        for sid, tool, outcome, n in conn.execute("SELECT session_id, tool, outcome, n FROM call_counts"):
            found[sid, tool, outcome] = found.get((sid, tool, outcome), 0) + n
        return found
    finally:
        conn.close()


async def call(client: Client, tool: str, **args: Any) -> Any:
    return await client.call_tool(tool, args)


async def test_a_stdio_server_counts_every_call_by_tool_session_and_outcome(tmp_path: Path, repo: Path) -> None:
    db = tmp_path / "store" / "room.db"
    params = StdioServerParameters(command=EXE, args=["serve"], env={"AGENTS_ROOM_DB": str(db)}, cwd=str(repo))
    other = Store.open(db)
    rival = other.room_join(cwd=str(repo), pid=None).session_id
    other.lease_claim(rival, "taken.py")
    other.close()
    async with Client(params, mode="legacy") as a:
        me = (await call(a, "room_join")).structured_content["session_id"]
        for _ in range(3):
            await call(a, "msg_unread", session_id=me)  # reads: no write of their own
        await call(a, "lease_check", session_id=me, path="x.py")
        await call(a, "lease_claim", session_id=me, path="taken.py")  # denied
        await call(a, "msg_unread", session_id="ffffffffffffffff")  # unknown_session
        await call(a, "lease_release", session_id=me, path="never.py")  # lease_not_held
        await call(a, "room_history", session_id=me, limit=0)  # invalid_argument
        await call(a, "no_such_tool")  # not a tool: not counted (its name is the caller's text)
        mid = counts(db)
        # the denied claim's write carried the reads counted before it (itself: the next write)
        assert mid[me, "msg_unread", "ok"] == 3 and (me, "lease_check", "ok") in mid
        assert (me, "room_join", "ok") in mid and (me, "lease_claim", "denied") not in mid
    found = counts(db)  # the server exited cleanly: what was left is written
    assert found[me, "lease_claim", "denied"] == 1
    assert found[me, "lease_release", "lease_not_held"] == 1
    assert found[me, "room_history", "invalid_argument"] == 1
    assert found["ffffffffffffffff", "msg_unread", "unknown_session"] == 1
    assert sum(found.values()) == 9
    assert not any("no_such_tool" in k for k in found)
    conn = sqlite3.connect(db)
    gaps = conn.execute("SELECT sum(n) FROM call_gaps WHERE session_id = ?", (me,)).fetchone()[0]
    conn.close()
    assert gaps == 7  # one gap between each of its 8 calls


def test_the_hook_news_path_counts_its_read_in_its_own_write(tmp_path: Path, repo: Path) -> None:
    db = tmp_path / "store" / "room.db"
    with Store.open(db) as s:
        me = s.room_join(cwd=str(repo), pid=None, harness_key=KEY).session_id
        peer = s.room_join(cwd=str(repo), pid=None).session_id
        s.msg_send(peer, "*", subject="ping")
    event = json.dumps({"session_id": KEY, "hook_event_name": "UserPromptSubmit"})
    env = {"AGENTS_ROOM_DB": str(db), "PATH": "/usr/bin:/bin"}
    said = subprocess.run([EXE, "hook"], input=event, capture_output=True, text=True, env=env, check=True).stdout
    assert "ping" in said
    assert counts(db).get((me, "hook_news", "ok")) == 1
    # the quiet path (nothing new) opens no store and counts nothing
    subprocess.run([EXE, "hook"], input=event, capture_output=True, text=True, env=env, check=True)
    assert counts(db).get((me, "hook_news", "ok")) == 1
