"""Two real harnesses on one store at once, each driven by the scripted model: a Codex agent
holds ``src/x.py``; a Claude Code (or Gemini CLI) agent's claim of it is denied, and what its
model is shown names the holder; once Codex has released it, the second agent's next claim is
granted. Both turns are held by their policies until the test lets them go on, so the order is
the test's, not the machine's."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from harnesscli import binary, git_project

from agents_room.store import Store
from sim.harness.clis import prepare
from sim.harness.model import ScriptedModel
from sim.harness.process import alive, descendants
from sim.harness.script import Request, Say, ToolCall

pytestmark = pytest.mark.slow


def claimer(name: str, release: threading.Event | None, claim_again: threading.Event | None):
    """A policy: join, claim src/x.py, then (holder) wait for ``release`` and release it, or
    (second) wait for ``claim_again`` and claim it again; then end the turn."""
    me: dict[str, str] = {}

    def policy(request: Request) -> object:
        results = request.tool_results()
        if not results:
            return [ToolCall("room_join", {"label": name})]
        last = results[-1]
        if last.name == "room_join":
            me["id"] = last.data()["session_id"]
            return [ToolCall("lease_claim", {"session_id": me["id"], "path": "src/x.py"})]
        if last.name == "lease_claim" and release is not None:
            assert release.wait(120), f"{name}: never told to release"
            return [ToolCall("lease_release", {"session_id": me["id"], "path": "src/x.py"})]
        if last.name == "lease_claim" and not last.data()["ok"] and claim_again is not None:
            assert claim_again.wait(120), f"{name}: never told to claim again"
            return [ToolCall("lease_claim", {"session_id": me["id"], "path": "src/x.py"})]
        return Say("done")

    return policy


@pytest.mark.parametrize("second", ["claude-code", "gemini"])
def test_a_claim_is_denied_naming_the_codex_holder_then_granted_after_its_release(second: str, cli_home: Path) -> None:
    codex, other = binary("codex"), binary(second)
    db = str(cli_home / "room.db")
    release, claim_again = threading.Event(), threading.Event()
    turns = []
    project = git_project(cli_home / "app")  # one repository, both agents in it: the same src/x.py
    with ScriptedModel() as model:
        holder = model.agent("holder", claimer("codex-holder", release, None))
        asker = model.agent("asker", claimer(f"{second}-asker", None, claim_again))
        holding = prepare("codex", codex, cli_home / "codex-cli_home", project, db,
                          holder.url, name="holder")
        asking = prepare(second, other, cli_home / "other-cli_home", project, db,  # type: ignore[arg-type]
                         asker.url, name="asker")
        try:
            turns.append(holding.start_turn("claim src/x.py"))
            granted = holder.wait_for(lambda r: r.tool_results() and r.tool_results()[-1].name == "lease_claim",
                                      what="its claim's answer", timeout=120, stop=turns[0].exited)
            held = granted.result_of("lease_claim").data()
            assert held["ok"] is True, held
            turns.append(asking.start_turn("claim src/x.py"))
            denied = asker.wait_for(lambda r: r.tool_results() and r.tool_results()[-1].name == "lease_claim",
                                    what="its claim's answer", timeout=120, stop=turns[1].exited)
            refusal = denied.result_of("lease_claim")
            assert refusal.data()["ok"] is False and refusal.data()["holder"]["session_id"] == held["lease"]["session_id"]
            assert "codex-holder" in refusal.text and "codex-holder" in denied.text()
            release.set()
            holder.wait_for(lambda r: any(t.name == "lease_release" for t in r.tool_results()),
                            what="its release's answer", timeout=120, stop=turns[0].exited)
            claim_again.set()
            again = asker.wait_for(lambda r: len([t for t in r.tool_results() if t.name == "lease_claim"]) == 1
                                   and r is not denied, what="its second claim's answer", timeout=120,
                                   stop=turns[1].exited)
            regranted = again.result_of("lease_claim").data()
            assert regranted["ok"] is True and regranted["lease"]["token"] > held["lease"]["token"], regranted
            for turn in turns:
                assert turn.wait(120) == 0, turn.output()
        finally:
            release.set()
            claim_again.set()
            for turn in turns:
                turn.stop()
    assert holder.errors == [] and asker.errors == []
    with Store.open(db, create=False) as store:
        members = {m.session_id: m for m in store.room_who()}
        [lease] = store.lease_list(regranted["lease"]["session_id"])
    assert members[held["lease"]["session_id"]].harness == "codex"
    assert members[regranted["lease"]["session_id"]].harness == second
    assert lease.token == regranted["lease"]["token"]
    assert all(descendants(t.proc.pid) == [] and not alive(t.proc.pid) for t in turns)
