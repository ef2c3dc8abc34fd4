"""The commit guard under a real harness: the agent's own ``git commit``, run through its shell
tool, goes through over its own lease and is refused over another agent's, and the model is
shown the refusal, naming the path and the holder. Claude Code (the guard finds the committer
by the harness key in the shell's environment) and Codex (by the harness process among the
commit's ancestors)."""

from __future__ import annotations

import subprocess

import pytest
from harnessrig import AGENTS_ROOM, Rig, rig  # noqa: F401 (the fixture)

from sim.harness.script import Request, Say, Shell, ToolCall

pytestmark = pytest.mark.slow
TURN_S = 120.0


def git(project, *args: str) -> str:
    return subprocess.run(["git", "-C", str(project), *args], capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize("harness", ["claude-code", "codex"])
def test_an_agents_commit_passes_over_its_lease_and_is_refused_over_anothers(rig: Rig, harness: str) -> None:
    steps: dict[str, str] = {}

    def policy(request: Request):
        done = {r.name: r for r in request.tool_results()}
        if len(agent.requests) == 1:
            return [ToolCall("room_join", {"label": "committer"})]
        if "room_join" in done:
            steps["session"] = done["room_join"].data()["session_id"]
            return [ToolCall("lease_claim", {"session_id": steps["session"], "path": str(mine)})]
        if "lease_claim" in done:
            assert done["lease_claim"].data()["ok"] is True, done["lease_claim"].text
            return [Shell("git add src/mine.py && git commit -q -m mine && echo COMMITTED-MINE")]
        if "shell" in done and "mine" not in steps:
            steps["mine"] = done["shell"].text
            return [Shell("git add src/theirs.py && git commit -q -m theirs; echo EXIT=$?")]
        if "shell" in done:
            steps["theirs"] = done["shell"].text
            return Say("done")
        return Say("unexpected")

    agent, launch = rig.agent(harness, f"guard-{harness}", policy)
    project = launch.project
    for key, value in (("user.name", "agent"), ("user.email", "agent@example.invalid")):
        git(project, "config", key, value)
    (project / "src").mkdir()
    mine, theirs = project / "src" / "mine.py", project / "src" / "theirs.py"
    mine.write_text("x = 1\n")
    theirs.write_text("y = 1\n")
    guarded = subprocess.run([AGENTS_ROOM, "guard", "install"], capture_output=True, text=True, timeout=60,
                             cwd=project, env=launch.env)
    assert guarded.returncode == 0, guarded.stderr
    # another agent, working in the same repository, holds theirs.py
    holder = rig.peer_store()
    other = holder.room_join(cwd=str(project), pid=None, label="holder").session_id
    assert holder.lease_claim(other, str(theirs)).ok

    turn = rig.turn(launch, "commit your work")
    assert turn.wait(TURN_S) == 0, turn.output()
    assert not agent.errors, agent.errors
    assert "COMMITTED-MINE" in steps["mine"], steps["mine"]
    log = git(project, "log", "--format=%s")
    assert log.split() == ["mine"], log  # the refused commit made none
    refusal = steps["theirs"]
    assert "commit refused" in refusal and "src/theirs.py" in refusal, refusal
    assert other in refusal and "holder" in refusal and "EXIT=1" in refusal, refusal
    # the model was shown it: the request after the refused commit holds the guard's words
    assert "commit refused" in agent.requests[-1].text()
    assert "src/theirs.py" in git(project, "diff", "--cached", "--name-only")  # still staged, not committed
