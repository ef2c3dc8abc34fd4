"""The MCP adapter in memory (``Client(server)``): every tool, every error code, the published
schemas, and that a call waiting for the write lock leaves the event loop free."""

from __future__ import annotations

import uuid

import os
import re
import sqlite3
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from agents_room.harnesses.identity import Identity
from agents_room.server import INSTRUCTIONS, build_server
from agents_room.store import ERROR_CODES

pytestmark = pytest.mark.anyio

# The contract's table (§6): tool -> (required arguments, optional arguments).
CONTRACT: dict[str, tuple[set[str], set[str]]] = {
    "room_join": (set(), {"room", "extra_rooms", "label", "tags", "autonomy", "harness", "harness_key"}),
    "room_leave": ({"session_id"}, set()),
    "room_leave_room": ({"session_id", "room"}, set()),
    "room_who": (set(), {"session_id", "room"}),
    "room_set_autonomy_cap": ({"autonomy"}, {"session_id", "room"}),
    "msg_send": ({"session_id", "to"}, {"subject", "body", "reply_to", "ttl_s"}),
    "msg_recv": ({"session_id"}, {"limit"}),
    "msg_ack": ({"session_id", "message_id"}, set()),
    "msg_unread": ({"session_id"}, set()),
    "msg_sent": ({"session_id"}, {"limit"}),
    "room_history": (set(), {"session_id", "room", "limit"}),
    "lease_claim": ({"session_id", "path"}, {"ttl_s", "mode"}),
    "lease_renew": ({"session_id", "path"}, {"ttl_s"}),
    "lease_release": ({"session_id", "path"}, set()),
    "lease_check": ({"session_id", "path"}, set()),
    "lease_list": ({"session_id"}, set()),
    "note_read": ({"session_id", "path"}, set()),
    "drift_check": ({"session_id", "path"}, set()),
}
KEY = str(uuid.uuid4())  # per test process: liveness scans every process of the machine


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store" / "room.db"


@pytest.fixture
def identity(repo: Path) -> Identity:
    return Identity(str(repo), os.getpid(), "test-harness", None)


@pytest.fixture
def server(db: Path, identity: Identity):
    return build_server(db, identity=identity)


async def ok(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def fail(client: Client, tool: str, args: dict[str, Any], code: str) -> str:
    result = await client.call_tool(tool, args)
    assert result.is_error, result.structured_content
    text = result.content[0].text
    assert text.startswith(f"{code}: "), text
    assert "Error executing tool" not in text and "Traceback" not in text
    return text


async def join(client: Client, **args: Any) -> str:
    return (await ok(client, "room_join", **args))["session_id"]


# -- the published surface ------------------------------------------------------------------


async def test_exactly_the_contract_tools_with_their_argument_names(server) -> None:
    async with Client(server) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
    assert set(tools) == set(CONTRACT)
    for name, (required, optional) in CONTRACT.items():
        schema = tools[name].input_schema
        assert set(schema["properties"]) == required | optional, name
        assert set(schema.get("required", [])) == required, name


async def test_schemas_carry_types_and_descriptions_for_the_model(server) -> None:
    async with Client(server) as c:
        listed = (await c.list_tools()).tools
    for tool in listed:
        assert len(tool.description or "") > 80, tool.name
        assert "Errors:" in tool.description, tool.name
        for arg, prop in tool.input_schema["properties"].items():
            assert prop.get("description"), (tool.name, arg)
            types = {prop.get("type")} | {alt.get("type") for alt in prop.get("anyOf", [])}
            assert types - {None, "null"}, (tool.name, arg, prop)
        # Results are structured: every tool publishes an object output schema.
        assert (tool.output_schema or {}).get("type") == "object", (tool.name, tool.output_schema)


async def test_instructions_explain_the_flow(server) -> None:
    async with Client(server) as c:
        assert c.instructions == INSTRUCTIONS
    assert "room_join" in INSTRUCTIONS and "session_id" in INSTRUCTIONS and "harness key" in INSTRUCTIONS
    for code in ERROR_CODES:
        assert code in INSTRUCTIONS


def test_the_first_line_of_the_instructions_stands_alone() -> None:
    # Codex shows the model only the first line of a deferred server's instructions (issue 28):
    # it must be a whole sentence that names the server and where to start.
    first, _, rest = INSTRUCTIONS.partition("\n")
    assert first.startswith("agents-room") and first.rstrip().endswith(".") and "room_join" in first
    assert rest.startswith("\n")  # a paragraph of its own, not the start of a wrapped one


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_results_are_structured_and_repeated_as_json_text(server, mode: str) -> None:
    import json

    async with Client(server, mode=mode) as c:
        result = await c.call_tool("room_join", {"label": "alice"})
        assert not result.is_error
        assert json.loads(result.content[0].text) == result.structured_content
        assert "\n" not in result.content[0].text  # one line: the SDK's indented form costs context
        assert re.fullmatch(r"[0-9a-f]{16}", result.structured_content["session_id"])


# -- sessions and rooms ----------------------------------------------------------------------


async def test_room_join_fills_cwd_pid_and_harness_from_the_identity(server, repo: Path) -> None:
    async with Client(server) as c:
        joined = await ok(c, "room_join", label="alice", tags=["api"], room="team:x", extra_rooms=["team:y"])
        assert joined["rooms"] == ["repo:alpha", "team:x", "team:y"]
        assert joined["autonomy"] == "notify" and joined["rejoined"] is False
        me = (await ok(c, "room_who", session_id=joined["session_id"]))["sessions"][0]
        assert me["cwd"] == str(repo) and me["harness"] == "test-harness" and me["pid"] == os.getpid()
        assert me["liveness"] == "alive" and me["tags"] == ["api"]
        other = await ok(c, "room_join", harness="codex")
        who = {s["session_id"]: s for s in (await ok(c, "room_who"))["sessions"]}
        assert who[other["session_id"]]["harness"] == "codex"


async def test_room_join_rejoins_with_the_harness_key_from_the_environment(db: Path, repo: Path) -> None:
    server = build_server(db, identity=Identity(str(repo), os.getpid(), "claude-code", KEY))
    async with Client(server) as c:
        first = await ok(c, "room_join", autonomy="wake")
        again = await ok(c, "room_join", room="team:x", autonomy="hold")
        assert again["session_id"] == first["session_id"] and again["rejoined"] is True
        assert again["autonomy"] == "wake" and "stays wake" in again["warning"]
        text = await fail(c, "msg_unread", {"session_id": KEY}, "unknown_session")
        assert f"harness key of session {first['session_id']}" in text


@pytest.mark.parametrize(("lever", "state"), [(None, "undeliverable"), ("channel", "stored")])
async def test_wake_lever_seam_reaches_the_store(db: Path, identity: Identity, lever: str | None, state: str) -> None:
    server = build_server(db, identity=identity, wake_lever=lever)
    async with Client(server) as c:
        a, b = await join(c), await join(c, autonomy="wake")
        await ok(c, "msg_send", session_id=a, to=b, subject="hi")
        sent = (await ok(c, "msg_sent", session_id=a))["messages"]
        assert sent[0]["states"] == {b: state}


async def test_room_leave_and_leave_room(server) -> None:
    async with Client(server) as c:
        a = await join(c, room="team:x")
        assert await ok(c, "room_leave_room", session_id=a, room="team:x") == {}
        assert (await ok(c, "room_who", room="team:x"))["sessions"] == []
        text = await fail(c, "room_leave_room", {"session_id": a, "room": "team:x"}, "invalid_argument")
        assert text.startswith("invalid_argument: room: ")
        assert await ok(c, "room_leave", session_id=a) == {}
        assert "left at" in await fail(c, "msg_unread", {"session_id": a}, "unknown_session")


async def test_room_set_autonomy_cap_lowers_members(server) -> None:
    async with Client(server) as c:
        a = await join(c, autonomy="wake")
        assert await ok(c, "room_set_autonomy_cap", session_id=a, autonomy="hold") == {
            "room": "repo:alpha", "autonomy": "hold"}
        assert (await ok(c, "room_who", room="repo:alpha"))["sessions"][0]["autonomy"] == "hold"
        assert (await ok(c, "room_set_autonomy_cap", room="team:q", autonomy="notify"))["room"] == "team:q"
        text = await fail(c, "room_set_autonomy_cap", {"autonomy": "hold"}, "invalid_argument")
        assert text.startswith("invalid_argument: room: ")


# -- messages ----------------------------------------------------------------------------------


async def test_message_flow_send_recv_ack_sent_history(server) -> None:
    async with Client(server) as c:
        a, b = await join(c, label="alice"), await join(c, label="bob")
        sent = await ok(c, "msg_send", session_id=a, to="*", subject="plan", body="I take the parser")
        assert sent["recipients"] == [b] and sent["warning"] is None
        assert await ok(c, "msg_unread", session_id=b) == {"count": 1}
        got = await ok(c, "msg_recv", session_id=b, limit=10)
        assert [m["subject"] for m in got["messages"]] == ["plan"] and got["inbox"] is None
        assert got["messages"][0]["sender_label"] == "alice"
        assert await ok(c, "msg_ack", session_id=b, message_id=sent["message_id"]) == {}
        mine = (await ok(c, "msg_sent", session_id=a, limit=5))["messages"]
        assert mine[0]["states"] == {b: "acked"} and mine[0]["pending"] == 0
        history = await ok(c, "room_history", session_id=b)
        assert history["room"] == "repo:alpha" and [m["body"] for m in history["messages"]] == ["I take the parser"]
        empty = await ok(c, "msg_recv", session_id=b)
        assert empty["messages"] == []
        assert empty["inbox"]["deliveries_total"] == 1 and empty["inbox"]["rooms"] == ["repo:alpha"]


async def test_msg_send_to_nobody_warns(server) -> None:
    async with Client(server) as c:
        a = await join(c)
        sent = await ok(c, "msg_send", session_id=a, to="tag:nobody", body="x")
        assert sent["recipients"] == [] and "matched nobody" in sent["warning"]


async def test_msg_ack_of_a_message_never_received_is_not_recipient(server) -> None:
    async with Client(server) as c:
        a, b = await join(c), await join(c)
        mid = (await ok(c, "msg_send", session_id=a, to=b, body="x"))["message_id"]
        await fail(c, "msg_ack", {"session_id": a, "message_id": mid}, "not_recipient")
        text = await fail(c, "msg_ack", {"session_id": b, "message_id": mid}, "invalid_argument")
        assert text.startswith("invalid_argument: message_id: ") and "msg_recv" in text


# -- leases, reads ------------------------------------------------------------------------------


async def test_lease_tools(server, repo: Path) -> None:
    async with Client(server) as c:
        a, b = await join(c, label="alice"), await join(c, label="bob")
        claim = await ok(c, "lease_claim", session_id=a, path="src/x.py", ttl_s=60)
        assert claim["ok"] is True and claim["lease"]["path"] == str(repo / "src/x.py")
        assert claim["holder"] is None  # a grant names its lease once (the store's holder is the same record)
        denied = await ok(c, "lease_claim", session_id=b, path=str(repo / "src/x.py"), mode="shared")
        assert denied["ok"] is False and denied["lease"] is None
        assert denied["holder"]["session_id"] == a and "alice" in denied["reason"]
        renewed = await ok(c, "lease_renew", session_id=a, path="src/x.py", ttl_s=120)
        assert renewed["token"] > claim["lease"]["token"] and renewed["path"] == str(repo / "src/x.py")
        check = await ok(c, "lease_check", session_id=b, path="src/x.py")
        assert check["free"] is False and check["lease"]["session_id"] == a
        listed = (await ok(c, "lease_list", session_id=b))["leases"]
        assert [(x["session_id"], x["mine"]) for x in listed] == [(a, False)]
        text = await fail(c, "lease_release", {"session_id": b, "path": "src/x.py"}, "lease_not_held")
        assert a in text
        assert await ok(c, "lease_release", session_id=a, path="src/x.py") == {}
        assert (await ok(c, "lease_check", session_id=b, path="src/x.py"))["free"] is True
        await fail(c, "lease_renew", {"session_id": a, "path": "src/x.py"}, "lease_not_held")


async def test_note_read_and_drift_check(server, repo: Path) -> None:
    async with Client(server) as c:
        a, b = await join(c), await join(c)
        readme = repo / "README.md"
        digest = (await ok(c, "note_read", session_id=a, path="README.md"))["hash"]
        assert re.fullmatch(r"[0-9a-f]{64}", digest)
        assert (await ok(c, "drift_check", session_id=a, path="README.md"))["severity"] == "SAFE"
        readme.write_text("changed\n")
        minor = await ok(c, "drift_check", session_id=a, path="README.md")
        assert (minor["severity"], minor["changed"], minor["holder"]) == ("MINOR", True, None)
        await ok(c, "note_read", session_id=a, path="README.md")
        await ok(c, "lease_claim", session_id=b, path="README.md")
        readme.write_text("changed again\n")
        critical = await ok(c, "drift_check", session_id=a, path="README.md")
        assert (critical["severity"], critical["holder"]) == ("CRITICAL", b)
        text = await fail(c, "note_read", {"session_id": a, "path": "missing.txt"}, "invalid_argument")
        assert text.startswith("invalid_argument: path: ")


# -- errors ------------------------------------------------------------------------------------


async def test_unknown_session_names_what_was_meant(server) -> None:
    async with Client(server) as c:
        a = await join(c, label="alice")
        assert a in await fail(c, "lease_list", {"session_id": a[:6]}, "unknown_session")
        assert a in await fail(c, "msg_recv", {"session_id": "alice"}, "unknown_session")
        assert "another store" in await fail(c, "msg_unread", {"session_id": "0" * 16}, "unknown_session")


@pytest.mark.parametrize(("tool", "args", "field"), [
    ("lease_claim", {"session_id": "0" * 16, "path": 5}, "path"),
    ("lease_claim", {"session_id": "0" * 16, "path": "x", "ttl_s": True}, "ttl_s"),
    ("lease_claim", {"session_id": "0" * 16, "path": "x", "ttl_s": 1.5}, "ttl_s"),
    ("lease_claim", {"session_id": "0" * 16, "path": "x", "mode": "weird"}, "mode"),
    ("lease_claim", {"session_id": None, "path": "x"}, "session_id"),
    ("lease_claim", {"session_id": "0" * 16}, "path"),
    ("lease_claim", {"session_id": "0" * 16, "path": "x", "sesion_id": "y"}, "sesion_id"),
    ("room_join", {"tags": "api"}, "tags"),
    ("room_join", {"tags": ["ok", 3]}, "tags[1]"),
    ("room_join", {"autonomy": "max"}, "autonomy"),
    ("msg_ack", {"session_id": "0" * 16, "message_id": "seven"}, "message_id"),
    ("msg_recv", {"session_id": "0" * 16, "limit": [1]}, "limit"),
    ("room_who", {"room": {"name": "x"}}, "room"),
])
async def test_argument_type_errors_name_the_field(server, tool: str, args: dict, field: str) -> None:
    async with Client(server) as c:
        text = await fail(c, tool, args, "invalid_argument")
        assert text.startswith(f"invalid_argument: {field}: "), text


@pytest.mark.parametrize(("tool", "args", "field"), [
    ("room_join", {"label": "x" * 65}, "label"),
    ("room_join", {"room": "Team"}, "room"),
    ("room_join", {"harness_key": "not-a-uuid"}, "harness_key"),
    ("msg_recv", {"limit": 0}, "limit"),
    ("msg_send", {"to": "*", "subject": "s" * 201}, "subject"),
    ("msg_send", {"to": "*", "ttl_s": 0}, "ttl_s"),
    ("lease_claim", {"path": "x", "ttl_s": 86401}, "ttl_s"),
    ("lease_claim", {"path": "a\x00b"}, "path"),
    # A lone surrogate reaches a Python caller (not the JSON wire): refused, not a crash in SQLite.
    ("room_join", {"label": "a\ud800"}, "label"),
    ("lease_claim", {"path": "a\udcff"}, "path"),
    ("msg_send", {"to": "file:\ud800"}, "to"),
    ("msg_send", {"to": "*", "body": "\ud800"}, "body"),
    ("msg_unread", {"session_id": "\ud800"}, "session_id"),
])
async def test_bounds_are_refused_naming_the_field(server, tool: str, args: dict, field: str) -> None:
    async with Client(server) as c:
        if tool != "room_join":
            args = {"session_id": await join(c), **args}
        text = await fail(c, tool, args, "invalid_argument")
        assert text.startswith(f"invalid_argument: {field}: "), text


async def test_unknown_tool_is_a_coded_error(server) -> None:
    async with Client(server) as c:
        result = await c.call_tool("room_joni", {})
    assert result.is_error and result.content[0].text.startswith("invalid_argument: name: ")


async def test_store_busy_when_the_write_lock_is_held(db: Path, identity: Identity) -> None:
    server = build_server(db, identity=identity, busy_timeout_s=0.2)
    async with Client(server) as c:
        a = await join(c)
        blocker = sqlite3.connect(db, isolation_level=None)
        try:
            blocker.execute("BEGIN IMMEDIATE")
            await fail(c, "lease_claim", {"session_id": a, "path": "x"}, "store_busy")
        finally:
            blocker.close()
        assert (await ok(c, "lease_claim", session_id=a, path="x"))["ok"] is True
        assert (await ok(c, "lease_claim", session_id=a, path="x"))["reason"] == "extended"


async def test_store_error_when_the_database_fails(server, db: Path) -> None:
    async with Client(server) as c:
        a = await join(c)
        other = sqlite3.connect(db, isolation_level=None)
        other.execute("DROP TABLE leases")
        other.close()
        text = await fail(c, "lease_claim", {"session_id": a, "path": "x"}, "store_error")
        assert "leases" in text


async def test_an_unexpected_exception_is_a_short_store_error(server) -> None:
    def explode(session_id: str) -> dict:
        """A tool that crashes (only in this test)."""
        raise RuntimeError("disk on fire\nsecond line of internals")

    server.add_tool(explode)
    async with Client(server) as c:
        text = await fail(c, "explode", {"session_id": "x"}, "store_error")
    assert text == "store_error: unexpected RuntimeError in explode: disk on fire"


async def test_a_call_waiting_for_the_write_lock_leaves_the_event_loop_free(db: Path, identity: Identity) -> None:
    # A long busy timeout, so a blocked event loop would hold list_tools for ~30 s: the bound
    # below tells the two apart on a machine loaded enough to make a free loop slow.
    server = build_server(db, identity=identity, busy_timeout_s=30.0)
    async with Client(server) as c:
        a = await join(c)
        blocker = sqlite3.connect(db, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        outcome: dict[str, Any] = {}

        async def claim() -> None:
            outcome["claim"] = await c.call_tool("lease_claim", {"session_id": a, "path": "x"})

        async with anyio.create_task_group() as tg:
            tg.start_soon(claim)
            await anyio.sleep(0.2)  # the claim is now waiting on the lock in a worker thread
            start = time.monotonic()
            assert len((await c.list_tools()).tools) == 18
            assert time.monotonic() - start < 10.0
            assert "claim" not in outcome
            blocker.execute("ROLLBACK")
            blocker.close()
        assert outcome["claim"].structured_content["ok"] is True


async def test_concurrent_calls_behind_a_held_lock_each_wait_a_bounded_time(db: Path, identity: Identity) -> None:
    # One process serving many calls (HTTP): each waits at most about two busy timeouts (its
    # turn on the connection, then SQLite's lock), not its place in the queue times one.
    server = build_server(db, identity=identity, busy_timeout_s=0.5)
    async with Client(server) as c:
        a = await join(c)
        blocker = sqlite3.connect(db, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        texts: list[str] = []

        async def claim(i: int) -> None:
            texts.append(await fail(c, "lease_claim", {"session_id": a, "path": f"f{i}"}, "store_busy"))

        start = time.monotonic()
        try:
            async with anyio.create_task_group() as tg:
                for i in range(6):
                    tg.start_soon(claim, i)
        finally:
            blocker.close()
        assert len(texts) == 6
        assert time.monotonic() - start < 2.0  # unbounded, the sixth would wait 6 x 0.5 s
