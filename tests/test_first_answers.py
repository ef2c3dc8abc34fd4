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
