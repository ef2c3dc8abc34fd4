"""The terminal wake lever with the real Codex and Gemini CLI, each interactive in a real tmux
pane (its ``TMUX`` and ``TMUX_PANE`` passed on, as a shell in a pane has them), against the
scripted model on loopback. One session per CLI covers, in order:

- idle after its first turn, the session records the lever ``terminal``; a peer's mail makes
  the lever type its prompt: the next model request holds it, the delivery goes ``offered →
  accepted``, and ``read`` once the model calls ``msg_recv``;
- a person's half-typed line: mail arrives, nothing is typed (the delivery stays ``stored``,
  the model is not asked, the line is intact); the person submits their line and that turn is
  told the mail by the prompt's hook;
- mail mid-turn: the harness's hooks tell it within the turn; the lever types nothing, and no
  second turn follows;
- the person quits: the session is ``gone`` (Codex's managed app-server daemon, which ran the
  thread and its MCP server, outlives its TUI: liveness follows the TUI).

Idle is an event: the harness's end-of-turn hook marks its pane ``idle``
(agents_room/harnesses/turns.py), which the test reads.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time

import pytest
from harnessrig import Rig, rig  # noqa: F401 (rig)
from test_wake_idle import READY, START_S, WAKE_S, Idle, asked_after, lever_of

from agents_room.harnesses import turns
from agents_room.harnesses.terminal import PROMPT_HEAD
from agents_room.harnesses.wake import RETRY_LOOK_S
from sim.harness.script import Request, Say, ToolCall

pytestmark = pytest.mark.slow
# How long a busy pane is watched for a wake that must not be typed: longer than the watcher's
# look at retries (RETRY_LOOK_S; it looks every BUSY_LOOK_S while the pane is busy), so a lever
# that ignored the busy pane would have typed.
QUIET_S = RETRY_LOOK_S + 3.0


def pane_state(rig: Rig) -> str | None:
    found = list((rig.root / ".agents-room" / "turns").glob("tmux-*"))
    return turns.state(str(found[0].parent), found[0].name) if len(found) == 1 else None


def wait_idle(rig: Rig, idle: Idle) -> None:
    deadline = time.monotonic() + WAKE_S
    while pane_state(rig) != turns.IDLE:
        assert time.monotonic() < deadline, f"{idle.agent.name}: the pane was not marked idle; screen:\n" \
                                            f"{idle.term.screen()}"
        assert idle.term.alive(), idle.term.screen()
        time.sleep(0.1)


def wakes(requests: list[Request]) -> int:
    """How many lever prompts the conversation holds so far (each request carries the whole
    conversation: the newest has every prompt typed into it)."""
    return requests[-1].text().count(PROMPT_HEAD)


@pytest.mark.parametrize("harness", ["codex", "gemini"])
def test_an_idle_codex_or_gemini_in_tmux_is_woken_by_the_terminal_lever(rig: Rig, harness: str) -> None:
    mode = {"now": "join"}
    midturn: list[int] = []

    def policy(request: Request):
        results = {r.name for r in request.tool_results()}
        if "room_join" in results:
            return Say("joined, waiting")
        if "msg_recv" in results:
            return Say("mail read")
        if "room_who" in results:
            return Say("slow work done")
        if mode["now"] == "join":
            return ToolCall("room_join", {"autonomy": "wake"})
        if mode["now"] == "midturn":  # mail arrives while this turn runs
            mode["now"] = "done"
            midturn.append(rig.peer_send(idle.session, f"{harness} midturn news", "mid")[0])
            return ToolCall("room_who", {"session_id": idle.session})
        if mode["now"] == "wake":
            return ToolCall("msg_recv", {"session_id": idle.session})
        return Say("noted")

    name = f"term-{harness}"
    agent, launch = rig.agent(harness, name, policy)
    term = rig.terminal(launch, multiplexed=True)
    term.wait_screen(READY[harness], what="the prompt", timeout=START_S)
    term.type("join the room", submitted=lambda: bool(agent.requests))
    joined = agent.wait_for(lambda r: any(t.name == "room_join" for t in r.tool_results()), what="room_join's answer",
                            timeout=START_S, stop=lambda: None if term.alive() else "the session exited")
    idle = Idle(agent, launch, term, joined.result_of("room_join").data()["session_id"])
    term.wait_screen("joined, waiting", what="the turn's last answer", timeout=START_S)
    assert lever_of(rig, idle.session) == "terminal"
    wait_idle(rig, idle)

    # 1. idle: the lever types its prompt; offered -> accepted -> read
    mode["now"] = "wake"
    count = len(agent.requests)
    message, sent_at = rig.peer_send(idle.session, f"{harness} idle news", "please look")
    woke = asked_after(idle, lambda r: PROMPT_HEAD in r.text() and r.at >= sent_at, "the typed wake prompt")
    assert agent.requests.index(woke) >= count
    print(f"\nterminal lever ({harness}): msg_send answered -> model request {(woke.at - sent_at) * 1000:.0f} ms")
    assert rig.wait_delivery(idle.session, message, ("read",), timeout=WAKE_S) == "read"
    states = delivery_events(rig, idle.session, message)
    assert states[:2] == ["offered", "accepted"] and set(states) <= {"offered", "accepted", "read"}, states
    term.wait_screen("mail read", what="the woken turn's answer", timeout=WAKE_S)
    wait_idle(rig, idle)
    typed = wakes(agent.requests)
    assert typed >= 1

    # 2. a person's half-typed line: nothing typed, the line intact, the mail in their turn
    mode["now"] = "person"
    term._tmux("send-keys", "-l", "--", "hello half")
    term.wait_screen("hello half", what="the half-typed line")
    count = len(agent.requests)
    message, sent_at = rig.peer_send(idle.session, f"{harness} typing news", "while you type")
    deadline = time.monotonic() + QUIET_S
    while time.monotonic() < deadline:
        assert len(agent.requests) == count, f"{harness}: the model was asked while the person typed"
        assert rig.delivery(idle.session, message) == ("stored", False)
        time.sleep(0.2)
    line = [row for row in term.screen().splitlines() if "hello half" in row]
    assert len(line) == 1 and PROMPT_HEAD[:12] not in line[0], line
    term.keys("Enter")
    asked = asked_after(idle, lambda r: "hello half" in r.text(), "the person's line")
    assert f"{harness} typing news" in asked.text()  # told by the prompt's hook
    assert wakes(agent.requests) == typed
    term.wait_screen("noted", what="the person's turn's answer", timeout=WAKE_S)
    wait_idle(rig, idle)

    # 3. mid-turn: the hooks tell it; the lever types nothing, no second turn
    mode["now"] = "midturn"
    term.type("work slowly", submitted=lambda: bool(midturn))
    told = asked_after(idle, lambda r: "room_who" in {t.name for t in r.tool_results()}, "room_who's answer")
    assert f"{harness} midturn news" in told.text()
    term.wait_screen("slow work done", what="the slow turn's answer", timeout=WAKE_S)
    wait_idle(rig, idle)
    count = len(agent.requests)
    deadline = time.monotonic() + QUIET_S
    while time.monotonic() < deadline:
        assert len(agent.requests) == count, f"{harness}: a second turn after the mid-turn mail"
        time.sleep(0.2)
    assert wakes(agent.requests) == typed
    assert "offered" not in delivery_events(rig, idle.session, midturn[0])

    # 4. the person quits: the session is gone, though Codex's app-server daemon lives on
    assert liveness(rig, idle.session) == "alive"
    term.type("/quit")
    deadline = time.monotonic() + WAKE_S
    while term.alive():
        assert time.monotonic() < deadline, f"{harness} did not quit; screen:\n{term.screen()}"
        time.sleep(0.1)
    deadline = time.monotonic() + WAKE_S
    while liveness(rig, idle.session) != "gone":
        assert time.monotonic() < deadline, f"{harness}: still {liveness(rig, idle.session)} after quitting"
        time.sleep(0.2)
    if harness == "codex":  # what the session's liveness must not follow
        assert daemons(rig), "Codex's app-server daemon ended with its TUI: the check proves nothing here"


def liveness(rig: Rig, session: str) -> str:
    return {m.session_id: m.liveness for m in rig.peer_store().room_who()}[session]


def daemons(rig: Rig) -> list[int]:
    """Codex's managed app-server daemons running with the rig's HOME (the rig ends them)."""
    mine = f"HOME={rig.root}".encode()
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if mine not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if b"app-server" in f.read():
                    found.append(int(entry))
        except (OSError, ValueError):
            continue
    return found


def delivery_events(rig: Rig, recipient: str, message_id: int) -> list[str]:
    """The states a delivery moved to, from its ``delivery`` events (msg_recv's ``read`` among
    them where it writes one)."""
    conn = sqlite3.connect(f"file:{rig.store}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT payload FROM events WHERE kind = 'delivery' AND session_id = ? ORDER BY seq",
                            (recipient,)).fetchall()
    finally:
        conn.close()
    moves = [json.loads(payload) for (payload,) in rows]
    return [m["to"] for m in moves if any(mid == message_id for mid, _ in m["items"])]


def test_a_second_codex_tui_on_the_same_daemon_gets_no_terminal_lever(rig: Rig) -> None:
    # A second Codex TUI of the same HOME attaches to the first's app-server daemon: its thread's
    # server is the daemon's child, as the first's is, and nothing tells which TUI it serves.
    # The first keeps its pane; the second gets no lever (typing into the first's pane would
    # wake the wrong agent), and its liveness follows the daemon, as before.
    def policy(request: Request):
        if any(t.name == "room_join" for t in request.tool_results()):
            return Say("joined, waiting")
        return ToolCall("room_join", {"autonomy": "wake"})

    agent, launch = rig.agent("codex", "twice", policy)
    joined = []
    for _ in range(2):
        term = rig.terminal(launch, multiplexed=True)
        term.wait_screen(READY["codex"], what="the prompt", timeout=START_S)
        count = len(agent.requests)
        term.type("join the room", submitted=lambda c=count: len(agent.requests) > c)
        answer = agent.wait_for(lambda r, c=count: agent.requests.index(r) >= c and any(
            t.name == "room_join" for t in r.tool_results()), what="room_join's answer", timeout=START_S)
        joined.append(answer.result_of("room_join").data()["session_id"])
    first, second = (session_row(rig, s) for s in joined)
    assert [d for d in daemons(rig) if d in (first[0], second[0])] == [second[0]]
    assert first[1] == "terminal" and first[0] != second[0]
    assert second[1] is None


def session_row(rig: Rig, session: str) -> tuple[int, str | None]:
    conn = sqlite3.connect(f"file:{rig.store}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT pid, wake_lever FROM sessions WHERE id = ?", (session,)).fetchone()
    finally:
        conn.close()
