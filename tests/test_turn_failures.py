"""What goes wrong in a real harness turn ends as a clear error naming the agent and what it
waited for, within a bound, and leaves no process behind: a CLI that cannot start or exits at
once, a script with malformed arguments and a tool the harness does not offer, a harness that
never calls back (its shell command hangs)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from harnesscli import binary, git_project

from sim.harness.clis import prepare
from sim.harness.model import ModelWaitError, ScriptedModel
from sim.harness.process import alive, descendants
from sim.harness.script import Say, Shell, ToolCall

pytestmark = pytest.mark.slow


def test_a_cli_that_cannot_start_or_exits_at_once_is_named(cli_home: Path) -> None:
    codex = binary("codex")
    project = git_project(cli_home / "proj")
    with ScriptedModel() as model:
        agent = model.agent("broken", [Say("never asked")])
        launch = prepare("codex", codex, cli_home, project, str(cli_home / "room.db"), agent.url, name="broken")
        launch.binary = str(cli_home / "no-such-codex")
        with pytest.raises(RuntimeError, match=r"broken: could not start .*no-such-codex"):
            launch.start_turn("x")
        # a configuration Codex refuses: it exits before asking the model anything
        config = cli_home / ".codex" / "config.toml"
        config.write_text(config.read_text().replace('wire_api = "responses"', 'wire_api = "chat"'))
        launch.binary = codex
        turn = launch.start_turn("x")
        started = time.monotonic()
        try:
            with pytest.raises(ModelWaitError, match=r"broken: waited for its first request: codex exited with \d+"):
                agent.wait_for(lambda r: True, what="its first request", timeout=60, stop=turn.exited)
        finally:
            turn.stop()
        assert time.monotonic() - started < 60 and agent.requests == []
    assert "chat" in turn.output()


def test_malformed_arguments_reach_the_model_and_an_unknown_tool_ends_the_turn(cli_home: Path) -> None:
    codex = binary("codex")
    project = git_project(cli_home / "proj")
    with ScriptedModel() as model:
        agent = model.agent("sloppy", [[ToolCall("lease_claim", {"session_id": 7})], [ToolCall("room_bogus", {})]])
        launch = prepare("codex", codex, cli_home, project, str(cli_home / "room.db"), agent.url, name="sloppy")
        turn = launch.start_turn("claim something")
        try:
            with pytest.raises(ModelWaitError, match=r"sloppy: waited for the end of the turn: the model's script "
                                                     r"failed: request 2 .*unknown tool mcp__room/room_bogus"):
                agent.wait_for(lambda r: False, what="the end of the turn", timeout=120, stop=turn.exited)
            assert turn.wait(120) == 0  # the harness ended its turn on the error's text
        finally:
            turn.stop()
    # the malformed call went through: the store's refusal, naming the field, reached the model
    refusal = agent.requests[1].result_of("lease_claim").text
    assert "invalid_argument: path: required by lease_claim" in refusal, refusal
    assert "scripted model error: unknown tool mcp__room/room_bogus" in turn.output()


def test_a_harness_that_never_calls_back_times_out_naming_the_agent_and_leaves_nothing(cli_home: Path) -> None:
    claude = binary("claude")
    project = git_project(cli_home / "proj")
    with ScriptedModel() as model:
        # one sleep of its own session: the CLI, told to end, does not take that one with it
        agent = model.agent("stuck", [[Shell("setsid sleep 600 & sleep 600")], Say("never")])
        launch = prepare("claude-code", claude, cli_home, project, str(cli_home / "room.db"), agent.url, name="stuck")
        turn = launch.start_turn("wait")
        try:
            agent.wait_for(lambda r: True, what="its first request", timeout=120, stop=turn.exited)
            sleeping: list[int] = []
            deadline = time.monotonic() + 60
            while len(sleeping) < 2 and time.monotonic() < deadline:  # the shell command is running
                sleeping = [p for p in descendants(turn.proc.pid) if _command(p).startswith("sleep 600")]
                time.sleep(0.1)  # the poll's pace, not a wait for the event
            assert len(sleeping) == 2, f"the shell tool ran {len(sleeping)} of the two sleeps"
            started = time.monotonic()
            with pytest.raises(ModelWaitError, match=r"stuck: waited for the shell's result: nothing matched within 3 s"):
                agent.wait_for(lambda r: bool(r.tool_results()), what="the shell's result", timeout=3,
                               stop=turn.exited)
            assert time.monotonic() - started < 10
        finally:
            turn.stop()
    assert not any(alive(p) for p in [turn.proc.pid, *sleeping])


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
