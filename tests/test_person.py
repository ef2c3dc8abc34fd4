"""A person in the room (issue 30): ``agents-room send`` and ``agents-room inbox`` as real
processes, on each engine; agents see the person through a real MCP client."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from agents_room.store import Clock, Store
from agents_room.store.people import person_key

EXE = str(Path(sys.executable).with_name("agents-room"))


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgresql":
        return request.getfixturevalue("pg_url")
    return str(tmp_path / "store" / "room.db")


@pytest.fixture
def room(location: str):
    with Store.open(location, clock=Clock(), busy_timeout_s=2.0) as s:
        yield s


def person(location: str, *args: str, cwd: Path, stdin: str = "", user: str = "carol",
           **more: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "AGENTS_ROOM_DB": location, "USER": user, **more}
    return subprocess.run([EXE, *args], capture_output=True, text=True, cwd=cwd, env=env, input=stdin, timeout=60)


def ok(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0 and not done.stderr, (done.stdout, done.stderr)
    return done.stdout


def sent(done: subprocess.CompletedProcess) -> dict[str, Any]:
    return json.loads(ok(done))


def humans(store: Store) -> list[Any]:
    return [m for m in store.room_who() if m.harness == "human"]


def test_a_person_speaks_to_agents_as_one_session(room: Store, location: str, repo: Path, other_repo: Path) -> None:
    agent = room.room_join(cwd=str(repo), pid=None, label="alice", tags=["api"]).session_id
    first = sent(person(location, "send", "--json", "*", "hello", "from a person", cwd=repo))
    assert first["recipients"] == [agent] and first["warning"] is None
    got = room.msg_recv(agent).messages
    assert [(m.sender, m.sender_label, m.sender_harness, m.subject, m.body) for m in got] == [
        (first["session_id"], "carol", "human", "hello", "from a person")]
    # The same session at the next command, from another folder, with a room and a new label;
    # the body from standard input.
    again = sent(person(location, "send", "--json", "--room", "team:x", "--label", "boss", "tag:api", "again", "-",
                        cwd=other_repo, stdin="line 1\nline 2\n"))
    assert again["session_id"] == first["session_id"] and again["recipients"] == [agent]
    assert room.msg_recv(agent).messages[0].body == "line 1\nline 2\n"
    [me] = humans(room)
    assert (me.session_id, me.label, me.liveness, me.autonomy, me.pid) == (first["session_id"], "boss", "unknown",
                                                                           "hold", None)
    assert me.rooms == ["repo:alpha", "repo:beta", "team:x"]


def test_a_selector_that_matches_nobody_warns_as_msg_send_does(room: Store, location: str, repo: Path) -> None:
    out = ok(person(location, "send", "tag:nobody", "hello", cwd=repo))
    assert "it reached 0 sessions" in out and "warning: selector 'tag:nobody' matched nobody" in out


@pytest.mark.parametrize("args", [["0123456789abcdef", "s"], ["*", "s", "--reply-to", "999"], ["*", "x" * 201]])
def test_a_send_that_fails_joins_nobody(room: Store, location: str, repo: Path, args: list[str]) -> None:
    """The person's join and the message are one transaction: a refused send leaves no session."""
    room.room_join(cwd=str(repo), pid=None, label="alice")
    done = person(location, "send", *args, cwd=repo)
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith("agents-room: ") and "Traceback" not in done.stderr
    assert humans(room) == []


def test_inbox_reads_and_acks_what_agents_sent_the_person(room: Store, location: str, repo: Path) -> None:
    assert "you have no session" in ok(person(location, "inbox", cwd=repo))
    agent = room.room_join(cwd=str(repo), pid=None, label="alice").session_id
    me = sent(person(location, "send", "--json", "*", "question", cwd=repo))["session_id"]
    mid = room.msg_send(agent, me, "answer", "yes\nand more").message_id
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(room.msg_sent(agent)[0].sent))
    out = ok(person(location, "inbox", cwd=repo))
    assert out.splitlines() == [f"#{mid} from {agent} (alice), {at}: answer", "    yes", "    and more"]
    assert room.msg_sent(agent)[0].states == {me: "acked"}
    assert "no new messages" in ok(person(location, "inbox", cwd=repo))
    other = person(location, "inbox", "--json", cwd=repo, user="dave")  # $USER is a label, not the person
    assert json.loads(other.stdout)["session_id"] == me


def test_the_hook_tells_an_agent_the_mail_is_from_a_person(room: Store, location: str, repo: Path) -> None:
    """The installed hook (a real process) announces a person's message as a person's, and an
    agent's as an agent's."""
    from agents_room.harnesses.install import hook_command

    key = str(uuid.uuid4())
    agent = room.room_join(cwd=str(repo), pid=None, label="alice", harness="claude-code", harness_key=key).session_id
    bob = room.room_join(cwd=str(repo), pid=None, label="bob").session_id
    me = sent(person(location, "send", "--json", agent, "deploy is frozen", cwd=repo))["session_id"]
    room.msg_send(bob, agent, subject="rebase please")
    payload = {"session_id": key, "cwd": str(repo), "hook_event_name": "UserPromptSubmit"}
    done = subprocess.run(shlex.split(hook_command()), input=json.dumps(payload), capture_output=True, text=True,
                          env={**os.environ, "AGENTS_ROOM_DB": location}, timeout=60)
    text = json.loads(ok(done))["hookSpecificOutput"]["additionalContext"]
    assert f"from carol ({me}), a person; bob ({bob})." in text
    assert "from carol (a person): deploy is frozen" in text and "from bob: rebase please" in text


def test_the_person_key_is_one_per_user_and_host() -> None:
    assert person_key("h1", 1000, "carol") == person_key("h1", 1000, "carol")
    assert len({person_key("h1", 1000, "carol"), person_key("h2", 1000, "carol"), person_key("h1", 1001, "carol"),
                person_key("h1", 1000, "dave")}) == 4


@pytest.mark.anyio
@pytest.mark.slow
async def test_a_person_opens_the_room_before_any_agent(location: str, repo: Path, tmp_path: Path) -> None:
    """Issue 49: before any agent has joined, the looking commands say there is no room yet and
    exit 0; a person's send makes the store as a join would, reaches 0 sessions without an
    error, and an agent that joins later (a real MCP server over stdio) reads it in room_history."""
    home = tmp_path / "home"  # doctor looks for other stores there: none on a new machine
    home.mkdir()
    for args in (["inbox"], ["who"], ["doctor"]):
        done = person(location, *args, cwd=repo, HOME=str(home))
        assert done.returncode == 0 and not done.stderr, (args, done.stdout, done.stderr)
        assert "agents-room send" in done.stdout and "nothing was created" in done.stdout, done.stdout
    if not location.startswith("postgres"):
        assert not Path(location).parent.exists()  # only looked
    first = person(location, "send", "*", "kickoff", "take the parser; I take the docs", cwd=repo)
    assert first.returncode == 0 and not first.stderr, first.stderr
    assert "it reached 0 sessions; it stays in the history of repo:alpha" in ok(first)
    if not location.startswith("postgres"):
        store_file = Path(location)
        assert (store_file.parent.stat().st_mode & 0o777, store_file.stat().st_mode & 0o777) == (0o700, 0o600)
    server = StdioServerParameters(command=EXE, args=["serve"], env={"AGENTS_ROOM_DB": location}, cwd=str(repo))
    async with Client(server, mode="legacy") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert "before you joined are not delivered to you: room_history shows them" in str(
            tools["room_join"].description)  # the joining agent is told where to look
        sid = (await client.call_tool("room_join", {"label": "bob"})).structured_content["session_id"]
        history = (await client.call_tool("room_history", {"session_id": sid})).structured_content
        unread = (await client.call_tool("msg_recv", {"session_id": sid})).structured_content["messages"]
    assert history["room"] == "repo:alpha"
    [said] = history["messages"]
    assert (said["subject"], said["body"], said["sender_harness"]) == ("kickoff", "take the parser; I take the docs",
                                                                        "human")
    assert unread == []  # said before bob joined: history, not mail


@pytest.mark.anyio
@pytest.mark.slow
async def test_agents_see_a_person_through_mcp(tmp_path: Path, repo: Path) -> None:
    db = tmp_path / "store" / "room.db"
    server = StdioServerParameters(command=EXE, args=["serve"], env={"AGENTS_ROOM_DB": str(db)}, cwd=str(repo))
    async with Client(server, mode="legacy") as client:
        joined = await client.call_tool("room_join", {"label": "alice"})
        sid = joined.structured_content["session_id"]
        me = sent(person(str(db), "send", "--json", "*", "hello", "body", cwd=repo))["session_id"]
        got = (await client.call_tool("msg_recv", {"session_id": sid})).structured_content
        [message] = got["messages"]
        assert (message["sender"], message["sender_label"], message["sender_harness"]) == (me, "carol", "human")
        who = (await client.call_tool("room_who", {"session_id": sid})).structured_content["sessions"]
        assert {s["session_id"]: s["harness"] for s in who} == {sid: "unknown", me: "human"}
        history = (await client.call_tool("room_history", {"session_id": sid})).structured_content["messages"]
        assert history[0]["sender_harness"] == "human"
