"""Each real CLI (Claude Code, Codex, Gemini CLI) runs one whole turn against the scripted model
(sim/harness/) through the server ``agents-room install`` wrote: join, claim, send, recv. The
turn is held in the middle (the model's policy waits) while the test reads the store: the
session carries the harness's name and is alive. The model was shown each tool's answer, and
those answers are the store's own (the lease token, the message ids). No process of the turn
outlives it."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from harnesscli import binary, git_project

from agents_room.store import Store
from sim.harness.clis import prepare
from sim.harness.process import alive, descendants
from sim.harness.script import Request, Say, ToolCall
from sim.harness.model import ScriptedModel

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("harness", ["claude-code", "codex", "gemini"])
def test_one_turn_joins_claims_sends_and_receives(harness: str, cli_home: Path) -> None:
    cli = binary(harness)
    project = git_project(cli_home / "proj")
    db = cli_home / "room.db"
    with Store.open(db) as store:
        peer = store.room_join(cwd=str(project), pid=os.getpid(), label="peer").session_id
    looked = threading.Event()
    said: dict[str, str] = {}

    def policy(request: Request) -> object:
        step = len(agent.requests)
        if step == 1:
            return [ToolCall("room_join", {"label": f"{harness}-agent"})]
        if step == 2:
            said["me"] = request.result_of("room_join").data()["session_id"]
            return [ToolCall("lease_claim", {"session_id": said["me"], "path": "src/x.py"})]
        if step == 3:
            assert looked.wait(120), "the test never looked at the store"
            return [ToolCall("msg_send", {"session_id": said["me"], "to": peer, "body": f"from {harness}"})]
        if step == 4:
            return [ToolCall("msg_recv", {"session_id": said["me"]})]
        return Say("done")

    with ScriptedModel() as model:
        agent = model.agent(harness, policy)
        launch = prepare(harness, cli, cli_home, project, str(db), agent.url, name=harness)  # type: ignore[arg-type]
        turn = launch.start_turn("join the room, claim src/x.py, tell the peer, read your mail")
        try:
            claimed = agent.wait_for(lambda r: any(t.name == "lease_claim" for t in r.tool_results()),
                                     what="lease_claim's answer", timeout=120, stop=turn.exited)
            # the turn is held here: the session is the harness's and alive
            with Store.open(db, create=False) as store:
                [me] = [m for m in store.room_who() if m.session_id == said["me"]]
                [lease] = store.lease_list(said["me"])
                store.msg_send(peer, to=said["me"], body="from the peer")
            assert (me.harness, me.liveness) == (harness, "alive"), me
            looked.set()
            assert turn.wait(120) == 0, turn.output()
        finally:
            looked.set()
            turn.stop()
    assert agent.errors == [] and len(agent.requests) == 5, (agent.errors, turn.output())
    granted = claimed.result_of("lease_claim").data()
    assert granted["ok"] is True and granted["lease"]["token"] == lease.token
    sent = agent.requests[3].result_of("msg_send").data()
    got = agent.requests[4].result_of("msg_recv").data()
    assert [(m["body"], m["sender"]) for m in got["messages"]] == [("from the peer", peer)], got
    with Store.open(db, create=False) as store:
        [mine] = store.msg_recv(peer).messages
    assert (mine.id, mine.body) == (sent["message_id"], f"from {harness}")
    assert "from the peer" in agent.requests[4].text()
    assert descendants(turn.proc.pid) == [] and not alive(turn.proc.pid)


@pytest.mark.parametrize("harness", ["claude-code", "codex", "gemini"])
def test_an_interactive_session_in_tmux_takes_a_typed_prompt(harness: str, cli_home: Path) -> None:
    cli = binary(harness)
    project = git_project(cli_home / "proj")
    with ScriptedModel() as model:
        agent = model.agent(harness, [[ToolCall("room_join", {"label": "typed"})], Say("joined as typed")])
        launch = prepare(harness, cli, cli_home, project, str(cli_home / "room.db"), agent.url, name=harness)  # type: ignore[arg-type]
        session = launch.start_session()
        try:
            session.type("join the room")
            joined = agent.wait_for(lambda r: any(t.name == "room_join" for t in r.tool_results()),
                                    what="room_join's answer", timeout=120, stop=session.exited)
            session.wait_screen("joined as typed", 60)
            assert session.exited() is None  # idle at its prompt, not gone
        finally:
            session.stop()
    assert "join the room" in agent.requests[0].text() and agent.errors == []
    with Store.open(cli_home / "room.db", create=False) as store:
        [me] = [m for m in store.room_who() if m.session_id == joined.result_of("room_join").data()["session_id"]]
    assert me.harness == harness
    assert not alive(session.pane_pid) and descendants(session.pane_pid) == []
