"""``sim run scenarios/forgetful.toml``: agents that never claim edit shared files through the
edit guard their harness's install put before its writer tool (the hook event sent to the
installed command, as Claude Code, Codex and Gemini CLI send it), and the checker proves it:
valid, no overlapping write. The same run with ``edits = "off"`` (install ``--edits off``, no
guard) is the control: the checker finds the overlapping writes and the verdict is invalid."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agents_room.store import Store
from sim.check.history import pairs, read
from sim.run import editguard

ROOT = Path(__file__).resolve().parents[3]
SCENARIO = ROOT / "scenarios" / "forgetful.toml"


def sim_run(scenario: Path, out: Path, *more: str) -> tuple[int, dict[str, Any]]:
    done = subprocess.run([sys.executable, "-m", "sim.cli", "run", str(scenario), "--out", str(out), "--no-live",
                           "--no-plots", *more], cwd=ROOT, text=True, capture_output=True, timeout=300,
                          env={k: v for k, v in os.environ.items() if k != "SIM_STORE_FACTORY"})
    assert (out / "report.json").exists(), done.stdout[-2000:] + done.stderr[-2000:]
    return done.returncode, json.loads((out / "report.json").read_text())


@pytest.mark.slow
def test_the_edit_guard_keeps_forgetful_agents_apart_and_the_control_overlaps(tmp_path: Path) -> None:
    code, report = sim_run(SCENARIO, tmp_path / "guarded")
    inv = report["invariants"]
    assert code == 0 and report["verdict"] == "valid", inv["violations"] or inv["unknown_because"]
    assert inv["invariants"]["edit-guard"]["status"] == "ok" and inv["invariants"]["edit-guard"]["checked"] > 0
    counts = inv["counts"]
    assert counts["overlapping_writes"] == 0 and counts["guarded_allowed"] > 0 and counts["guarded_denied"] > 0
    assert "**0 overlapping writes**" in (tmp_path / "guarded" / "report.md").read_text()
    history = read(tmp_path / "guarded" / "history.jsonl.gz")
    done = [(i, d) for i, d in pairs(history) if i["f"] == "guarded_edit" and d["type"] == "ok"]
    assert not any(i["f"] == "lease_claim" for i in history)  # forgetful: nobody claims
    # the agents sent the three harnesses' hook events in turn; every denial named its holder
    assert set(Counter(d["value"]["harness"] for _, d in done)) <= set(editguard.FORMS)
    assert all(d["value"]["holder"] for _, d in done if not d["value"]["ok"])
    assert not any("broken" in d["value"] for _, d in done)
    with Store.open(tmp_path / "guarded" / "store" / "room.db") as store:
        grants = [e for e in store.events(0, 100_000) if e.kind == "lease_grant"]
    assert grants and all(e.payload.get("at_edit") and e.payload["mode"] == "exclusive" for e in grants)
    # each file was written by its first writer alone
    writers: dict[str, set[str]] = {}
    for i, d in done:
        if d["value"]["ok"]:
            writers.setdefault(d["value"]["path"], set()).add(i["session"])
    assert writers and all(len(s) == 1 for s in writers.values()), writers

    code, report = sim_run(SCENARIO, tmp_path / "unguarded", "--edits", "off")  # the control: no guard installed
    inv = report["invariants"]
    assert code == 1 and report["verdict"] == "invalid"
    assert {n for n, r in inv["invariants"].items() if r["status"] != "ok"} == {"edit-guard"}, inv["invariants"]
    assert inv["counts"]["overlapping_writes"] > 0 and inv["counts"]["guarded_denied"] == 0
    assert inv["rules"]["EG3"]["violations"] == inv["counts"]["overlapping_writes"]
    assert "two sessions writing one file" in inv["rules"]["EG3"]["first"]
    assert 'edits = "off"' in (tmp_path / "unguarded" / "scenario.toml").read_text()
    n = inv["counts"]["overlapping_writes"]
    assert f"**{n:,} overlapping writes**" in (tmp_path / "unguarded" / "report.md").read_text()
    assert not (tmp_path / "unguarded" / "editguard" / "claude-code" / ".claude" / "settings.json").read_text().count(
        "editguard_entry")  # installed with --edits off: no guard


@pytest.mark.slow
def test_each_harness_s_hook_event_goes_through_its_installed_guard(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """For Claude Code, Codex and Gemini CLI: the guard install wrote for the writer tool, sent
    that harness's own event, allows A's first edit of a file (a lease at the edit) and denies
    B's, naming A; with ``--edits off`` there is no guard to ask."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    db = str(tmp_path / "room.db")
    agents_room = str(Path(sys.executable).parent / "agents-room")
    guards = editguard.install(tmp_path / "guards", db, "claim", agents_room)
    assert all(len(guards[h]) == 1 and "--edits claim" in guards[h][0] for h in editguard.FORMS), guards
    assert editguard.install(tmp_path / "off", db, "off", agents_room) == {h: [] for h in editguard.FORMS}
    keys = {s: str(uuid.uuid4()) for s in "AB"}
    # each session's agent: a live process with its key in its environment from exec on, as the
    # runner starts them (the guard proves a holder gone by its pid and key: liveness)
    agents = {s: subprocess.Popen(["sleep", "600"], env={**os.environ, "AGENTS_ROOM_HARNESS_KEY": k})
              for s, k in keys.items()}
    try:
        with Store.open(db) as store:
            sessions = {s: store.room_join(cwd=str(repo), pid=agents[s].pid, harness="sim", harness_key=k,
                                           label=s).session_id for s, k in keys.items()}
        edit_in_turn(repo, db, guards, keys, sessions, monkeypatch)
    finally:
        for proc in agents.values():
            proc.kill()
            proc.wait()


def edit_in_turn(repo: Path, db: str, guards: dict[str, list[str]], keys: dict[str, str], sessions: dict[str, str],
                 monkeypatch: pytest.MonkeyPatch) -> None:
    for n, harness in enumerate(editguard.FORMS):
        path = str(repo / f"f{n}.py")
        Path(path).write_text("start\n")
        for s in "AB":
            monkeypatch.setenv("AGENTS_ROOM_HARNESS_KEY", keys[s])  # the agent's own environment
            monkeypatch.setenv("AGENTS_ROOM_DB", db)
            written: list[str] = []
            got = editguard.edit(path, f"{s} {harness}\n".encode(), guards[harness], harness, key=keys[s],
                                 session=editguard.agent_session(), cwd=str(repo), timeout_s=60,
                                 write=lambda p=path: written.append(p) or {"hash": "h"})
            if s == "A":
                assert got == {"ok": True, "path": path, "harness": harness, "hash": "h"} and written == [path]
            else:
                assert got["ok"] is False and got["holder"] == sessions["A"] and got["mode"] == "exclusive", got
                assert not written and "edit denied" in got["reason"]
    with Store.open(db) as store:
        grants = [e for e in store.events(0, 1000) if e.kind == "lease_grant"]
    assert [(e.session_id, e.path, e.payload.get("at_edit")) for e in grants] == \
        [(sessions["A"], str(repo / f"f{n}.py"), True) for n in range(3)]
