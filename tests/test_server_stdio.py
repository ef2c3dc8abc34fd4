"""End to end over real stdio: ``agents-room serve`` spawned by the SDK's stdio client, as a
harness spawns it. Two agents in two git repositories share a room through one store file."""

from __future__ import annotations

import os
import sys
import uuid
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

EXE = str(Path(sys.executable).with_name("agents-room"))
KEY = str(uuid.uuid4())  # per test process: liveness scans every process of the machine


def agent(db: Path, cwd: Path, **env: str) -> StdioServerParameters:
    # The SDK's stdio client passes the child only HOME, PATH, ... plus env=: the store path
    # and harness variables must be explicit.
    return StdioServerParameters(command=EXE, args=["serve"], env={"AGENTS_ROOM_DB": str(db), **env}, cwd=str(cwd))


async def ok(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    return result.structured_content


async def test_two_agents_in_two_repositories_share_a_room(tmp_path: Path, repo: Path, other_repo: Path) -> None:
    alpha, beta = repo, other_repo  # two real git repositories (conftest's make_repo)
    db = tmp_path / "store" / "room.db"
    claude_env = {"CLAUDECODE": "1", "CLAUDE_CODE_SESSION_ID": KEY, "CLAUDE_PROJECT_DIR": str(beta)}
    async with Client(agent(db, alpha), mode="legacy") as a, AsyncExitStack() as stack:
        # Bob's server runs outside his project folder: $CLAUDE_PROJECT_DIR decides his cwd.
        b = await stack.enter_async_context(Client(agent(db, tmp_path, **claude_env)))
        alice = await ok(a, "room_join", room="team:x", label="alice")
        bob = await ok(b, "room_join", room="team:x", label="bob")
        assert alice["rooms"] == ["repo:alpha", "team:x"] and bob["rooms"] == ["repo:beta", "team:x"]
        sa, sb = alice["session_id"], bob["session_id"]

        who = {s["session_id"]: s for s in (await ok(b, "room_who", session_id=sb))["sessions"]}
        assert (who[sa]["cwd"], who[sa]["harness"], who[sa]["pid"]) == (str(alpha), "unknown", os.getpid())
        assert (who[sb]["cwd"], who[sb]["harness"]) == (str(beta), "claude-code")
        assert who[sa]["liveness"] == who[sb]["liveness"] == "alive"

        # send and receive across repositories
        sent = await ok(a, "msg_send", session_id=sa, to="*", subject="hello", body="I own the README")
        assert sent["recipients"] == [sb]
        got = await ok(b, "msg_recv", session_id=sb)
        assert [(m["sender_label"], m["body"]) for m in got["messages"]] == [("alice", "I own the README")]

        # claim conflict: a relative path in alpha and the same file by absolute path from beta
        readme = alpha / "README.md"
        assert (await ok(a, "lease_claim", session_id=sa, path="README.md"))["ok"] is True
        denied = await ok(b, "lease_claim", session_id=sb, path=str(readme))
        assert denied["ok"] is False and denied["holder"]["session_id"] == sa and "alice" in denied["reason"]
        assert (await ok(b, "msg_send", session_id=sb, to="file:README.md", body="done soon?"))["recipients"] == [sa]

        # drift: bob read it, alice (the lease holder) changed it
        await ok(b, "note_read", session_id=sb, path=str(readme))
        readme.write_text("# alpha, edited by alice\n")
        drift = await ok(b, "drift_check", session_id=sb, path=str(readme))
        assert (drift["severity"], drift["holder"], drift["changed"]) == ("CRITICAL", sa, True)

        # the same chat rejoins through its harness key: same session
        assert (await ok(b, "room_join"))["session_id"] == sb

        await stack.aclose()  # bob's harness exits, and with it the key in its environment
        who = {s["session_id"]: s for s in (await ok(a, "room_who", room="team:x"))["sessions"]}
        assert who[sb]["liveness"] == "gone" and who[sa]["liveness"] == "alive"


async def test_every_tool_and_coded_errors_over_stdio(tmp_path: Path, repo: Path) -> None:
    db = tmp_path / "room.db"
    async with Client(agent(db, repo)) as c:
        assert len((await c.list_tools()).tools) == 18
        s = (await ok(c, "room_join", room="team:y", label="solo"))["session_id"]
        t = (await ok(c, "room_join", label="peer"))["session_id"]
        assert len((await ok(c, "room_who"))["sessions"]) == 2
        assert (await ok(c, "room_set_autonomy_cap", room="team:q", autonomy="notify"))["room"] == "team:q"
        mid = (await ok(c, "msg_send", session_id=t, to=s, body="ping"))["message_id"]
        assert (await ok(c, "msg_unread", session_id=s))["count"] == 1
        assert (await ok(c, "msg_recv", session_id=s, limit=5))["messages"][0]["id"] == mid
        assert await ok(c, "msg_ack", session_id=s, message_id=mid) == {}
        assert (await ok(c, "msg_sent", session_id=t))["messages"][0]["states"] == {s: "acked"}
        assert len((await ok(c, "room_history", session_id=s))["messages"]) == 1
        token = (await ok(c, "lease_claim", session_id=s, path="README.md"))["lease"]["token"]
        assert (await ok(c, "lease_renew", session_id=s, path="README.md"))["token"] > token
        assert (await ok(c, "lease_check", session_id=t, path="README.md"))["free"] is False
        assert [x["mine"] for x in (await ok(c, "lease_list", session_id=s))["leases"]] == [True]
        assert await ok(c, "lease_release", session_id=s, path="README.md") == {}
        assert len((await ok(c, "note_read", session_id=s, path="README.md"))["hash"]) == 64
        assert (await ok(c, "drift_check", session_id=s, path="README.md"))["severity"] == "SAFE"
        assert await ok(c, "room_leave_room", session_id=s, room="team:y") == {}
        assert await ok(c, "room_leave", session_id=t) == {}

        # coded errors survive the JSON-RPC wire intact
        bad = await c.call_tool("lease_claim", {"session_id": s, "path": ["not", "a", "string"]})
        assert bad.is_error and bad.content[0].text.startswith("invalid_argument: path: ")
        gone = await c.call_tool("msg_unread", {"session_id": t})
        assert gone.is_error and gone.content[0].text.startswith(f"unknown_session: session {t} left at ")
        held = await c.call_tool("lease_release", {"session_id": s, "path": "README.md"})
        assert held.is_error and held.content[0].text.startswith("lease_not_held: ")


async def test_directory_leases_over_stdio(tmp_path: Path, repo: Path) -> None:
    """A directory claim denied by a file lease beneath it and a file claim denied by a
    directory lease over it, both ways; `file:` reaching the holder of the directory."""
    db = tmp_path / "room.db"
    (repo / "src" / "api").mkdir(parents=True)
    async with Client(agent(db, repo)) as a, Client(agent(db, repo)) as b:
        sa = (await ok(a, "room_join", room="team:x", label="refactor"))["session_id"]
        sb = (await ok(b, "room_join", room="team:x", label="fixer"))["session_id"]

        granted = await ok(a, "lease_claim", session_id=sa, path="src/api")  # an existing directory
        assert granted["ok"] and granted["lease"]["path"] == f"{repo}/src/api/"
        denied = await ok(b, "lease_claim", session_id=sb, path="src/api/v1/x.py")
        assert denied["ok"] is False and denied["holder"]["session_id"] == sa
        assert denied["holder"]["path"] == f"{repo}/src/api/" and "refactor" in denied["reason"]
        assert (await ok(b, "lease_claim", session_id=sb, path="src/apiary.py"))["ok"]  # beside, not beneath
        check = await ok(b, "lease_check", session_id=sb, path="src/api/v1/x.py")
        assert check["free"] is False and check["lease"]["path"] == f"{repo}/src/api/"
        sent = await ok(b, "msg_send", session_id=sb, to="file:src/api/v1/x.py", subject="may I?")
        assert sent["recipients"] == [sa]

        await ok(a, "lease_release", session_id=sa, path="src/api/")
        await ok(b, "lease_release", session_id=sb, path="src/apiary.py")
        assert (await ok(b, "lease_claim", session_id=sb, path="src/api/v1/x.py", mode="shared"))["ok"]
        denied = await ok(a, "lease_claim", session_id=sa, path="src/")
        assert denied["ok"] is False and denied["holder"]["path"] == f"{repo}/src/api/v1/x.py"
        assert denied["holder"]["session_id"] == sb
        assert (await ok(a, "lease_claim", session_id=sa, path="src/", mode="shared"))["ok"]  # shared meets shared
        listed = {(x["path"], x["session_id"]) for x in (await ok(a, "lease_list", session_id=sa))["leases"]}
        assert (f"{repo}/src/", sa) in listed
