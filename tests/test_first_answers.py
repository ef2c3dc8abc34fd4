"""Issue 17, the answers a new user's agent meets first, read through a real MCP client over
stdio (``agents-room serve`` spawned as a harness spawns it): errors about ``to`` speak of the
recipient, times read as ISO 8601, drift names who held the lease and says when there is no
baseline, a bad value is quoted back."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

EXE = str(Path(sys.executable).with_name("agents-room"))
ISO = re.compile(r"\b20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ\b")
UNIX_SECONDS = re.compile(r"\b1\d{9}\b")


def server(db: Path, cwd: Path) -> StdioServerParameters:
    return StdioServerParameters(command=EXE, args=["serve"], env={"AGENTS_ROOM_DB": str(db)}, cwd=str(cwd))


async def ok(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    return result.structured_content


async def error(client: Client, tool: str, **args: Any) -> str:
    result = await client.call_tool(tool, args)
    assert result.is_error, result.structured_content
    return result.content[0].text


async def test_errors_about_to_speak_of_the_recipient(tmp_path: Path, repo: Path) -> None:
    async with Client(server(tmp_path / "room.db", repo)) as c:
        alice = (await ok(c, "room_join", label="alice"))["session_id"]
        bob = (await ok(c, "room_join", label="bob"))["session_id"]

        by_label = await error(c, "msg_send", session_id=alice, to="bob", body="hi")
        assert by_label.startswith("unknown_session: to: 'bob' is not a session id")
        assert f"did you mean session {bob} (label 'bob')?" in by_label

        nobody = await error(c, "msg_send", session_id=alice, to="carol", body="hi")
        assert nobody.startswith("unknown_session: to: 'carol' is not a session id")
        assert "'*', 'file:<glob>', 'tag:<tag>'" in nobody and "room_who lists who is here" in nobody

        await ok(c, "room_leave", session_id=bob)
        left = await error(c, "msg_send", session_id=alice, to=bob, body="still there?")
        assert left.startswith(f"unknown_session: to: session {bob} (bob) left at ")
        assert ISO.search(left) and "room_who lists who is here" in left
        assert "room_join" not in left  # the caller's own session is fine: no rejoin for nothing
        # the caller's own id, by contrast, is told to rejoin
        mine = await error(c, "msg_unread", session_id=bob)
        assert mine.startswith(f"unknown_session: session {bob} left at ") and "room_join again" in mine


async def test_times_in_texts_are_iso_and_numbers_stay_numbers(tmp_path: Path, repo: Path) -> None:
    async with Client(server(tmp_path / "room.db", repo)) as c:
        alice = (await ok(c, "room_join", label="alice"))["session_id"]
        bob = (await ok(c, "room_join", label="bob"))["session_id"]
        granted = await ok(c, "lease_claim", session_id=alice, path="README.md")
        assert isinstance(granted["lease"]["expires_at"], float)  # programs (the simulator) read it
        denied = await ok(c, "lease_claim", session_id=bob, path="README.md")
        assert denied["ok"] is False and isinstance(denied["holder"]["expires_at"], float)
        assert ISO.search(denied["reason"]) and not UNIX_SECONDS.search(denied["reason"]), denied["reason"]


async def test_drift_names_the_holder_and_says_when_there_is_no_baseline(tmp_path: Path, repo: Path) -> None:
    readme = repo / "README.md"
    async with Client(server(tmp_path / "room.db", repo)) as c:
        alice = (await ok(c, "room_join", label="alice"))["session_id"]
        bob = (await ok(c, "room_join", label="bob"))["session_id"]

        none = await ok(c, "drift_check", session_id=bob, path=str(readme))
        assert (none["severity"], none["baseline"]) == ("SAFE", False)
        assert "note_read was never called" in none["message"]

        await ok(c, "note_read", session_id=bob, path=str(readme))
        same = await ok(c, "drift_check", session_id=bob, path=str(readme))
        assert (same["severity"], same["baseline"]) == ("SAFE", True)

        await ok(c, "lease_claim", session_id=alice, path=str(readme))
        readme.write_text("# changed by alice\n")
        critical = await ok(c, "drift_check", session_id=bob, path=str(readme))
        assert (critical["severity"], critical["holder"]) == ("CRITICAL", alice)
        assert f"session {alice} (alice)" in critical["message"] and ISO.search(critical["message"])


@pytest.mark.parametrize(("tool", "field", "value", "quoted"), [
    ("lease_claim", "mode", "sharde", "'sharde'"),
    ("lease_claim", "ttl_s", 0, "got 0"),
    ("lease_claim", "path", ["a", "b"], '["a", "b"]'),
    ("room_join", "autonomy", "loud", "'loud'"),
    ("room_join", "tags", "x" * 300, "…"),
])
async def test_a_bad_value_is_quoted_back_not_its_type(
    tmp_path: Path, repo: Path, tool: str, field: str, value: Any, quoted: str
) -> None:
    async with Client(server(tmp_path / "room.db", repo)) as c:
        sid = (await ok(c, "room_join"))["session_id"]
        args = {"session_id": sid, "path": "README.md"} if tool == "lease_claim" else {}
        text = await error(c, tool, **{**args, field: value})
        assert text.startswith(f"invalid_argument: {field}: ") and quoted in text, text
        assert not re.search(r"got (string|number|array|integer|str|int|list)\b", text), text
        assert len(text) < 300


async def test_an_agent_sees_which_store_it_is_on_and_when_it_is_alone(tmp_path: Path, repo: Path) -> None:
    db = tmp_path / "shared" / "room.db"
    async with Client(server(db, repo)) as c:
        joined = await ok(c, "room_join", room="team:x", label="alice")
        assert joined["store"] == str(db)
        alone = await ok(c, "room_who", session_id=joined["session_id"])
        assert alone["store"] == str(db) and [m["label"] for m in alone["sessions"]] == ["alice"]
        assert "nobody else is here" in alone["warning"] and str(db) in alone["warning"]
        assert "agents-room doctor" in alone["warning"]
        await ok(c, "room_join", room="team:x", label="bob")
        together = await ok(c, "room_who", session_id=joined["session_id"])
        assert "warning" not in together and len(together["sessions"]) == 2
        assert "nobody else is here" in (await ok(c, "room_who", room="team:empty"))["warning"]


def readme_rows() -> dict[str, str]:
    """The README's tool table: tool -> its "returns" cell."""
    text = (Path(__file__).parents[1] / "README.md").read_text()
    text = text.split("## Tools", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and re.fullmatch(r"[a-z_]+", cells[0]) and cells[0] != "tool":
            rows[cells[0]] = cells[2]
    return rows


def keys(value: Any, prefix: str = "") -> set[str]:
    """Every field name of an answer, nested ones included (a map keyed by session ids is a
    value, not fields)."""
    out: set[str] = set()
    if isinstance(value, dict):
        for k, v in value.items():
            if re.fullmatch(r"[0-9a-f]{16}", k):
                continue
            out.add(k)
            out |= keys(v)
    elif isinstance(value, list):
        for v in value:
            out |= keys(v)
    return out


async def test_the_readme_tool_table_names_every_field_of_every_answer(tmp_path: Path, repo: Path) -> None:
    rows = readme_rows()
    answers: dict[str, dict[str, Any]] = {}
    async with Client(server(tmp_path / "room.db", repo)) as c:
        async def call(tool: str, **args: Any) -> dict[str, Any]:
            answers[tool] = await ok(c, tool, **args)
            return answers[tool]

        a = (await call("room_join", room="team:x", label="alice", tags=["api"]))["session_id"]
        b = (await ok(c, "room_join", room="team:x", label="bob"))["session_id"]
        await call("room_who", session_id=a)
        await call("room_set_autonomy_cap", room="team:x", autonomy="wake")
        mid = (await call("msg_send", session_id=a, to=b, subject="s", body="x"))["message_id"]
        await call("msg_unread", session_id=b)
        await call("msg_recv", session_id=b)
        empty = await ok(c, "msg_recv", session_id=b)
        await call("msg_ack", session_id=b, message_id=mid)
        await call("msg_sent", session_id=a)
        await call("room_history", session_id=a)
        await call("lease_claim", session_id=a, path="README.md", mode="shared")
        await ok(c, "lease_claim", session_id=b, path="README.md", mode="shared")
        await call("lease_renew", session_id=a, path="README.md")
        await call("lease_check", session_id=a, path="README.md")
        await call("lease_list", session_id=a)
        await call("lease_release", session_id=a, path="README.md")
        await call("note_read", session_id=a, path="README.md")
        await call("drift_check", session_id=a, path="README.md")
        await call("room_leave_room", session_id=a, room="team:x")
        await call("room_leave", session_id=a)
    answers["msg_recv"] = {**answers["msg_recv"], **{k: v for k, v in empty.items() if v is not None}}
    assert set(answers) == set(rows), "every tool has a row, every row a tool"
    missing = {tool: sorted(k for k in keys(answer) if not re.search(rf"\b{k}\b", rows[tool]))
               for tool, answer in answers.items()}
    assert not {t: m for t, m in missing.items() if m}, missing
