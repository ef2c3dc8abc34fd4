"""An idle interactive session (a real terminal: tmux) and mail arriving while it waits for its
person. Claude Code is woken, by each lever we install for it: the asyncRewake Stop hook
(``hook --wait``) and the channel (``install claude-code --channel``); its model's next
request holds the news, and the test prints the latency (msg_send's answer to that request).
Codex and Gemini CLI outside a multiplexer have no idle lever (the terminal runs them without
tmux's TMUX and TMUX_PANE: in a tmux pane the terminal lever wakes them, tests/test_wake_terminal.py):
their idle session's model gets no request after the mail, until a person types; then it is
shown the news (by the prompt's hook: Gemini CLI's BeforeAgent, Codex's UserPromptSubmit).

Idle is an event here, not a pause: Claude Code's session is idle once the asyncRewake waiter
holds its marker beside the store (it starts at the turn's Stop); Codex's and Gemini CLI's once
their end-of-turn hook (Stop, AfterAgent) answered, which the test has it mark in a file: mail
that arrives before that is mid-turn, and those hooks rightly bring it to the model.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from harnessrig import Rig, mark_turn_end, mutant_hook, mutant_package, rig, serve_from  # noqa: F401 (rig)
from terminal import Terminal

from sim.harness.clis import Launch
from sim.harness.model import ModelWaitError, ScriptedAgent
from sim.harness.script import Request, Say, ToolCall

pytestmark = pytest.mark.slow
START_S = 90.0  # a CLI's start under load, MCP server included
WAKE_S = 30.0  # generous: measured wakes take well under 2 s
# Codex and Gemini CLI: how long an idle session is watched for a request that must not come,
# after the store decided the mail has no lever (an event). Measured Claude Code wakes are
# under 1 s; this is many times that.
QUIET_S = 5.0
READY = {"claude-code": "? for shortcuts", "codex": "Ask Codex to do anything", "gemini": "Type your message"}


@dataclass
class Idle:
    agent: ScriptedAgent
    launch: Launch
    term: Terminal
    session: str


def idle_session(rig: Rig, harness: str, name: str, *, channel: bool = False, env: dict[str, str] | None = None,
                 extra: list[str] = (), hook_entry: str | None = None, server: Path | None = None) -> Idle:
    """An interactive session that joined the room at ``wake`` in its first turn and ended it."""

    def policy(request: Request):
        # (an interactive Claude Code still connecting its servers is asked to wait for them
        # by the model itself, and gets this reply again: sim/harness)
        results = {r.name for r in request.tool_results()}
        if len(agent.requests) == 1:
            return [ToolCall("room_join", {"autonomy": "wake"})]
        return Say("joined, waiting" if "room_join" in results else "on it")

    agent, launch = rig.agent(harness, name, policy, channel=channel, hook_entry=hook_entry)
    if server is not None:
        serve_from(launch, server)
    marker = rig.root / f"{name}.turn-ended"
    if harness != "claude-code":  # (Claude Code's idle sign is its waiter's marker)
        mark_turn_end(launch, marker)
    term = rig.terminal(launch, extra=list(extra), env=env)
    if channel:  # Claude Code asks once before it loads a development channel
        term.wait_screen("I am using this for local development", what="the development-channel question",
                         timeout=START_S)
        term.keys("Enter")
    term.wait_screen(READY[harness], what="the prompt", timeout=START_S)
    term.type("join the room", submitted=lambda: bool(agent.requests))
    joined = agent.wait_for(lambda r: any(t.name == "room_join" for t in r.tool_results()), what="room_join's answer",
                            timeout=START_S, stop=lambda: None if term.alive() else "the session exited")
    session = joined.result_of("room_join").data()["session_id"]
    term.wait_screen("joined, waiting", what="the turn's last answer", timeout=START_S)
    if harness != "claude-code":  # the end-of-turn hook is the turn's last step: until it ran, mail is mid-turn
        deadline = time.monotonic() + WAKE_S
        while not marker.exists():
            assert time.monotonic() < deadline, f"{name}: the end-of-turn hook did not run within {WAKE_S:g} s"
            time.sleep(0.1)
    return Idle(agent, launch, term, session)


def wait_idle_claude(rig: Rig, idle: Idle) -> None:
    """Claude Code is idle once its Stop hooks ran: the asyncRewake waiter holds its marker."""
    marker = rig.store.parent / "waiters" / idle.session
    deadline = time.monotonic() + WAKE_S
    while not marker.exists():
        assert time.monotonic() < deadline, f"{idle.agent.name}: no asyncRewake waiter after {WAKE_S:g} s"
        assert idle.term.alive(), idle.term.screen()
        time.sleep(0.1)


def woken(rig: Rig, idle: Idle, subject: str, lever: str, *, timeout: float = WAKE_S) -> tuple[Request, float]:
    """Mail from a peer to the idle session; the model request that holds it and the latency
    from msg_send's answer to that request."""
    count = len(idle.agent.requests)
    message, sent_at = rig.peer_send(idle.session, subject, "please look")
    shown = asked_after(idle, lambda r: subject in r.text(), f"a request holding {subject!r} ({lever})", timeout)
    assert len(idle.agent.requests) > count and shown.at >= sent_at
    latency = shown.at - sent_at
    print(f"\n{lever}: msg_send answered -> model request {latency * 1000:.0f} ms")
    # the woken turn's hooks confirm the signal: offered, then accepted
    assert rig.wait_delivery(idle.session, message, ("accepted",), timeout=WAKE_S) == "accepted"
    return shown, latency


def asked_after(idle: Idle, test, what: str, timeout: float = WAKE_S) -> Request:
    """The first model request ``test`` accepts; AssertionError with the session's screen."""
    try:
        return idle.agent.wait_for(test, what=what, timeout=timeout,
                                   stop=lambda: None if idle.term.alive() else "the session exited")
    except ModelWaitError as error:
        raise AssertionError(f"{error}; the screen:\n{idle.term.screen()}") from None


def lever_of(rig: Rig, session: str) -> str | None:
    conn = sqlite3.connect(f"file:{rig.store}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT wake_lever FROM sessions WHERE id = ?", (session,)).fetchone()[0]
    finally:
        conn.close()


def test_an_idle_claude_code_is_woken_by_the_async_rewake_stop_hook(rig: Rig) -> None:
    idle = idle_session(rig, "claude-code", "frank")
    assert lever_of(rig, idle.session) == "stop-hook"
    wait_idle_claude(rig, idle)
    shown, _ = woken(rig, idle, "frank idle news", "asyncRewake")
    assert "Stop hook" in shown.text()  # Claude Code wraps the waiter's output as its Stop hook's
    idle.term.wait_screen("on it", what="the woken turn's answer", timeout=WAKE_S)


def test_a_waiter_that_signals_but_never_exits_2_fails_the_check(rig: Rig, tmp_path: Path) -> None:
    # The waiter marks the mail offered and prints it, but exits 0: Claude Code starts no turn.
    silent = mutant_hook(tmp_path, r"return 2\n", "return 0\n")
    idle = idle_session(rig, "claude-code", "ivan", hook_entry=silent)
    wait_idle_claude(rig, idle)
    with pytest.raises(AssertionError, match="nothing matched within"):
        woken(rig, idle, "ivan idle news", "asyncRewake", timeout=QUIET_S)
    # the mutant did signal (the store has the mail offered and told): only its exit code is wrong
    assert rig.delivery(idle.session, rig.peer_sent[-1]) == ("offered", True)



def test_an_idle_claude_code_is_woken_by_the_channel(rig: Rig) -> None:
    idle = channel_session(rig, "grace")
    assert lever_of(rig, idle.session) == "claude-channel"
    wait_idle_claude(rig, idle)
    shown, _ = woken(rig, idle, "grace idle news", "channel")
    assert '<channel source="room"' in shown.text()


def test_a_channel_that_pushes_under_another_name_fails_the_check(rig: Rig, tmp_path: Path) -> None:
    # The server signals (the mail offered) and pushes, under a method Claude Code ignores.
    misnamed = mutant_package(tmp_path, r'METHOD = "notifications/claude/channel"',
                              'METHOD = "notifications/claude/channel_message"')
    idle = channel_session(rig, "heidi", server=misnamed)
    assert lever_of(rig, idle.session) == "claude-channel"
    wait_idle_claude(rig, idle)
    with pytest.raises(AssertionError, match="nothing matched within"):
        woken(rig, idle, "heidi idle news", "channel", timeout=QUIET_S)
    assert rig.delivery(idle.session, rig.peer_sent[-1]) == ("offered", True)


def channel_session(rig: Rig, name: str, *, server: Path | None = None) -> Idle:
    """An idle Claude Code on the channel. Its gate reads a feature flag that Claude Code keeps
    only with its nonessential traffic allowed (it goes to the rig's refusing proxy): the flag
    is set in Claude Code's cache of them."""
    state = rig.root / ".claude.json"
    known = json.loads(state.read_text()) if state.exists() else {}
    known["cachedGrowthBookFeatures"] = {**known.get("cachedGrowthBookFeatures", {}), "tengu_harbor": True}
    state.write_text(json.dumps(known))
    return idle_session(rig, "claude-code", name, channel=True, env={"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": ""},
                        extra=["--dangerously-load-development-channels", "server:room"], server=server)


@pytest.mark.parametrize("harness", ["codex", "gemini"])
def test_an_idle_codex_or_gemini_is_not_woken(rig: Rig, harness: str) -> None:
    idle = idle_session(rig, harness, f"idle-{harness}")
    assert lever_of(rig, idle.session) is None
    count = len(idle.agent.requests)
    subject = f"{harness} idle news"
    message, sent_at = rig.peer_send(idle.session, subject, "please look")
    # the store's own verdict, at send time: a session at wake with no lever
    assert rig.wait_delivery(idle.session, message, ("undeliverable",), timeout=WAKE_S) == "undeliverable"
    deadline = time.monotonic() + QUIET_S
    while time.monotonic() < deadline:
        assert len(idle.agent.requests) == count, (
            f"{harness}: an idle session's model was asked after the mail: {idle.agent.requests[-1].text()[-400:]!r}")
        assert idle.term.alive(), idle.term.screen()
        time.sleep(0.2)
    # a person types: the session was alive all along, and now its model is asked
    idle.term.type("anything new", submitted=lambda: len(idle.agent.requests) > count)
    asked = asked_after(idle, lambda r: "anything new" in r.text(), "the typed prompt")
    assert asked.at > sent_at + QUIET_S
    assert subject in asked.text()  # the prompt's hook (BeforeAgent, UserPromptSubmit) adds the news
