"""The edit guard with the real CLIs, against scripted models that never call room_join nor
lease_claim: they only use their harness's own file tools. Two agents in one repository:
A edits ``x.py``; B's edit of it is denied (the file on disk stays A's, and B's model's next
request holds the reason naming A's session and harness); A's session ends; B's edit goes
through. Across harnesses both ways (Claude Code and Codex), a multi-file Codex patch with one
held file denied whole, and Gemini CLI with drift: B read ``x.py`` before A's edit, so once A
is gone B's edit is still denied, as changed under it, until B reads it again.

Each agent's turns are held by its policy at the gates the test opens, so the order is the
test's, not the machine's."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from harnesscli import binary, git_project

from agents_room.store import Store
from sim.harness.clis import Launch, prepare
from sim.harness.model import ScriptedModel
from sim.harness.script import Native, Request, Say

pytestmark = pytest.mark.slow

Step = Callable[[Path], Any]  # the project -> a reply


def stepper(steps: list[tuple[threading.Event | None, Step]], seen: list[Request]) -> Callable[[Request], Any]:
    """A policy: the replies in order, each once its gate (if any) is open; every request kept."""
    at = iter(steps)

    def policy(request: Request) -> Any:
        seen.append(request)
        gate, step = next(at, (None, lambda _: Say("done")))
        if gate is not None:
            assert gate.wait(180), "a gate was never opened"
        return step(policy.project)

    return policy


def codex_model(launch: Launch) -> None:
    """A model Codex has metadata for: it offers apply_patch as its own (freeform) tool, which its
    PreToolUse hook sees; for a model it does not know, a patch goes through the shell."""
    config = launch.home / ".codex" / "config.toml"
    config.write_text(config.read_text().replace('model = "gpt-5-codex"', 'model = "gpt-5.5"', 1))


def patch(*files: tuple[str, str, str]) -> Step:
    """An apply_patch call: (verb, path, body) per file."""
    text = "".join(f"*** {verb} File: {path}\n{body}" for verb, path, body in files)
    return lambda _: [Native("apply_patch", f"*** Begin Patch\n{text}*** End Patch\n")]


def write(tool: str, content: str) -> Step:
    field = "file_path"
    return lambda project: [Native(tool, {field: str(project / "x.py") if tool == "Write" else "x.py",
                                          "content": content})]


def read(tool: str) -> Step:
    return lambda project: [Native(tool, {"file_path": str(project / "x.py") if tool == "Read" else "x.py"})]


def last_text(seen: list[Request]) -> str:
    return "\n".join(r.text for r in seen[-1].tool_results()) if seen else ""


def reads(db: str) -> list[tuple]:
    import os

    if not os.path.exists(db):
        return []
    with Store.open(db, create=False) as store, store.db.read() as tx:
        return tx.all("SELECT session_id, path FROM reads")


def who(db: str) -> dict[str, Any]:
    with Store.open(db, create=False) as store:
        return {m.session_id: m for m in store.room_who()}


def holders(db: str) -> list[tuple[str, str]]:
    with Store.open(db, create=False) as store, store.db.read() as tx:
        return tx.all("SELECT path, session_id FROM leases ORDER BY path")


def wait_until(what: str, check: Callable[[], bool], timeout: float = 120) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.1)


def run_pair(home: Path, first: str, second: str, a_steps, b_steps, gates: dict[str, threading.Event],
             check: Callable[..., None]) -> None:
    """A (``first``) and B (``second``) in one repository, one store; ``check`` drives the gates."""
    db = str(home / "room.db")
    project = git_project(home / "app")
    (project / "x.py").write_text("a = 1\n")
    a_seen: list[Request] = []
    b_seen: list[Request] = []
    turns = []
    with ScriptedModel() as model:
        a_policy, b_policy = stepper(a_steps, a_seen), stepper(b_steps, b_seen)
        a_policy.project = b_policy.project = project
        a_agent, b_agent = model.agent("a", a_policy), model.agent("b", b_policy)
        cli = {"claude-code": "claude"}
        a = prepare(first, binary(cli.get(first, first)), home / "a-home", project, db,  # type: ignore[arg-type]
                    a_agent.url, name="a")
        b = prepare(second, binary(cli.get(second, second)), home / "b-home", project, db,  # type: ignore[arg-type]
                    b_agent.url, name="b")
        for launch in (a, b):
            if launch.harness == "codex":
                codex_model(launch)
        try:
            turns.append(a.start_turn("edit x.py"))
            turns.append(b.start_turn("edit x.py"))
            check(project, db, a_seen, b_seen, turns, gates)
            for turn in turns:
                assert turn.wait(180) == 0, turn.output()
        finally:
            for gate in gates.values():
                gate.set()
            for turn in turns:
                turn.stop()
        assert a_agent.errors == [] and b_agent.errors == []


@pytest.mark.parametrize("first, second", [("claude-code", "codex"), ("codex", "claude-code")])
def test_an_edit_holds_off_the_other_harness_until_its_session_ends(first: str, second: str, cli_home: Path) -> None:
    gates = {name: threading.Event() for name in ("b_edit", "a_end", "b_again")}
    a_new = "a = 2  # A's\n"
    if first == "claude-code":
        a_steps = [(None, read("Read")), (None, write("Write", a_new)), (gates["a_end"], lambda _: Say("done"))]
    else:
        a_steps = [(None, patch(("Update", "x.py", "@@\n-a = 1\n+a = 2  # A's\n"))),
                   (gates["a_end"], lambda _: Say("done"))]
    if second == "codex":  # a multi-file patch: z.py is free, x.py is A's
        b_edit = patch(("Add", "z.py", "+z = 1\n"), ("Update", "x.py", "@@\n-a = 2  # A's\n+a = 3  # B's\n"))
        b_steps = [(gates["b_edit"], b_edit), (gates["b_again"], b_edit)]
    else:
        b_steps = [(gates["b_edit"], read("Read")), (None, write("Write", "a = 3  # B's\n")),
                   (gates["b_again"], write("Write", "a = 3  # B's\n"))]

    def check(project: Path, db: str, a_seen, b_seen, turns, gates) -> None:
        wait_until("A's edit landed", lambda: (project / "x.py").read_text() == a_new)
        [(path, a_session)] = holders(db)
        assert path == str(project / "x.py")
        member = who(db)[a_session]
        assert member.harness == first and member.tags == ["edit-guard"] and member.label is None
        gates["b_edit"].set()
        wait_until("B's model saw its edit denied", lambda: "edit denied" in last_text(b_seen))
        reason = last_text(b_seen)
        for words in (a_session, f"harness {first}", "exclusive", "msg_send", f"file:{project / 'x.py'}"):
            assert words in reason, (words, reason)
        assert (project / "x.py").read_text() == a_new and not (project / "z.py").exists()  # denied whole
        assert [s for _, s in holders(db)] == [a_session]
        gates["a_end"].set()
        assert turns[0].wait(180) == 0, turns[0].output()  # A's session ends with its harness
        gates["b_again"].set()
        wait_until("B's edit landed", lambda: "B's" in (project / "x.py").read_text())
        if second == "codex":
            assert (project / "z.py").read_text() == "z = 1\n"
        b_session = next(s for _, s in holders(db))
        assert b_session != a_session and who(db)[b_session].harness == second
        assert a_session not in who(db)  # left as prune leaves a session whose agent is gone

    run_pair(cli_home, first, second, a_steps, b_steps, gates, check)


def test_gemini_a_file_changed_under_the_reader_is_denied_until_it_reads_again(cli_home: Path) -> None:
    gates = {name: threading.Event() for name in ("a_edit", "b_edit", "a_end", "b_again", "b_reread")}
    a_steps = [(gates["a_edit"], write("write_file", "a = 2  # A's\n")), (gates["a_end"], lambda _: Say("done"))]
    b_steps = [(None, read("read_file")), (gates["b_edit"], write("write_file", "a = 3  # B's\n")),
               (gates["b_again"], write("write_file", "a = 3  # B's\n")), (gates["b_reread"], read("read_file")),
               (None, write("write_file", "a = 3  # B's\n"))]

    def check(project: Path, db: str, a_seen, b_seen, turns, gates) -> None:
        wait_until("B's read baseline", lambda: reads(db) != [])
        gates["a_edit"].set()
        wait_until("A's edit landed", lambda: "A's" in (project / "x.py").read_text())
        [(_, a_session)] = holders(db)
        gates["b_edit"].set()
        wait_until("B denied by the lease", lambda: "edit denied" in last_text(b_seen))
        assert a_session in last_text(b_seen) and "harness gemini" in last_text(b_seen)
        gates["a_end"].set()
        assert turns[0].wait(180) == 0, turns[0].output()
        count = len(b_seen)
        gates["b_again"].set()
        wait_until("B denied again", lambda: len(b_seen) > count and "edit denied" in last_text(b_seen))
        assert "changed on disk since you read it" in last_text(b_seen), last_text(b_seen)
        assert "A's" in (project / "x.py").read_text()
        gates["b_reread"].set()
        wait_until("B's edit landed", lambda: "B's" in (project / "x.py").read_text())

    run_pair(cli_home, "gemini", "gemini", a_steps, b_steps, gates, check)
