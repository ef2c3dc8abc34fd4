"""Mail sent to an agent during its turn reaches its model before the turn ends, through the
levers we install, in the real harness they are for: Claude Code's PostToolUse and Stop hooks,
Codex's PostToolUse and Stop hooks, Gemini CLI's AfterTool and AfterAgent; and mail that came
between two turns, through a resumed Claude Code session's SessionStart. Each test asserts what
the model was shown (the request after the send holds the message's subject) and what the
store says (the delivery announced, still unread).

A broken lever must fail these checks: the Claude Code turn is run again against a copy of the
hook whose Stop never blocks, and the same check is asserted to catch it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from harnessrig import Rig, mutant_hook, rig  # noqa: F401 (the fixture)

from sim.harness.clis import Launch
from sim.harness.model import ScriptedAgent
from sim.harness.process import Turn
from sim.harness.script import Request, Say, ToolCall

pytestmark = pytest.mark.slow
TURN_S = 120.0


@dataclass
class Sent:
    subject: str
    message_id: int = 0
    at: float = 0.0  # when the send answered


@dataclass
class MidTurn:
    """One headless turn in which mail was sent twice: before a tool call (PostToolUse's to
    show) and while the model was writing its last answer (the Stop hook's to show)."""

    agent: ScriptedAgent
    launch: Launch
    turn: Turn
    session: str
    before_tool: Sent
    at_end: Sent
    ended: float = 0.0


def run_mid_turn(rig: Rig, harness: str, name: str, *, hook_entry: str | None = None,
                 tool_first: bool = True) -> MidTurn:
    """A turn: join (at notify); [mail, then room_who;] the last answer, with mail sent as the
    model writes it; then whatever the harness brings back. Mail from a person (Claude Code)
    or a peer agent's msg_send (the others)."""
    case: dict[str, MidTurn] = {}
    before = Sent(f"{name} lease note {id(case) % 9973}")
    at_end = Sent(f"{name} release ask {id(case) % 9973}")

    def send(sent: Sent, session: str) -> None:
        if harness == "claude-code":
            sent.message_id, sent.at = rig.send(launch, session, sent.subject, "please look")
        else:
            sent.message_id, sent.at = rig.peer_send(session, sent.subject, "please look")

    def policy(request: Request):
        results = {r.name for r in request.tool_results()}
        if len(agent.requests) == 1:
            return [ToolCall("room_join", {"autonomy": "notify"})]
        if "room_join" in results:
            session = request.result_of("room_join").data()["session_id"]
            case["session"] = session
            if tool_first:
                send(before, session)
                return [ToolCall("room_who")]
            send(at_end, session)
            return Say("done")
        if "room_who" in results:
            send(at_end, case["session"])
            return Say("done")
        return Say("noted")

    agent, launch = rig.agent(harness, name, policy, hook_entry=hook_entry)
    turn = rig.turn(launch, "work on the task")
    code = turn.wait(TURN_S)
    assert code == 0, turn.output()
    assert not agent.errors, agent.errors
    return MidTurn(agent, launch, turn, case["session"], before, at_end, time.time())


def first_holding(agent: ScriptedAgent, sent: Sent) -> Request | None:
    """The first model request after the send whose text holds the message's subject."""
    return next((r for r in agent.requests if r.at >= sent.at and sent.subject in r.text()), None)


def check_shown_before_end(rig: Rig, case: MidTurn, sent: Sent, lever: str) -> Request:
    """``sent`` reached the model within the same turn, and the store marked it announced."""
    shown = first_holding(case.agent, sent)
    assert shown is not None, (
        f"{case.agent.name}: no model request after the send held {sent.subject!r} ({lever}); "
        f"{len(case.agent.requests)} requests, the last one held: {case.agent.requests[-1].text()[-600:]!r}")
    assert shown.at <= case.ended, f"{case.agent.name}: the message reached the model after the turn ended"
    print(f"\n{case.launch.harness} {lever}: send answered -> model request {(shown.at - sent.at) * 1000:.0f} ms")
    state, announced = rig.delivery(case.session, sent.message_id)
    assert announced and state == "stored", (state, announced)  # told, not read: msg_recv reads
    return shown


def test_claude_code_shows_mail_at_the_next_tool_at_stop_and_at_the_next_session_start(rig: Rig) -> None:
    case = run_mid_turn(rig, "claude-code", "alice")
    shown = check_shown_before_end(rig, case, case.before_tool, "PostToolUse")
    assert shown.result_of("room_who") and "PostToolUse:mcp__room__room_who hook additional context" in shown.text()
    stopped = check_shown_before_end(rig, case, case.at_end, "Stop hook")
    assert "Stop hook feedback" in stopped.text()
    assert case.agent.requests[-1] is stopped  # a continuation (stop_hook_active) is never blocked again

    # Mail between turns: the resumed session's SessionStart hook brings it to the first request.
    between = Sent("alice between turns")
    between.message_id, between.at = rig.send(case.launch, case.session, between.subject)
    key = json.loads(case.turn.out.read_text())["session_id"]  # Claude Code's session, to resume
    resumed = Turn.start("alice", [*case.launch.turn_argv("go on"), "--resume", key], cwd=case.launch.project,
                         env=case.launch.env, logs=case.launch.home)
    rig.turns.append(resumed)
    assert resumed.wait(TURN_S) == 0, resumed.output()
    case.turn, case.ended = resumed, time.time()
    shown = check_shown_before_end(rig, case, between, "SessionStart")
    assert "SessionStart hook additional context" in shown.text() and "go on" in shown.text()


def test_a_stop_hook_that_never_blocks_fails_the_check(rig: Rig, tmp_path: Path) -> None:
    # the news is marked told at Stop, and nothing is said
    never_blocks = mutant_hook(tmp_path, r'return \{"decision": "block", "reason": [^\n]*\}', "return None")
    case = run_mid_turn(rig, "claude-code", "bob", hook_entry=never_blocks)
    check_shown_before_end(rig, case, case.before_tool, "PostToolUse")  # the rest of the hook still works
    with pytest.raises(AssertionError, match="no model request after the send held"):
        check_shown_before_end(rig, case, case.at_end, "Stop hook")
    assert case.agent.requests[-1].reply == Say("done")  # the turn ended on the model's answer


@pytest.mark.parametrize("harness", ["codex", "gemini"])
def test_codex_and_gemini_show_mail_sent_mid_turn_at_the_next_tool_and_at_the_end(rig: Rig, harness: str) -> None:
    case = run_mid_turn(rig, harness, f"mid-{harness}")
    check_shown_before_end(rig, case, case.before_tool, "PostToolUse" if harness == "codex" else "AfterTool")
    ended = check_shown_before_end(rig, case, case.at_end, "Stop hook" if harness == "codex" else "AfterAgent")
    assert case.agent.requests[-1] is ended  # never blocked twice

