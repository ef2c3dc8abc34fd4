"""The forgetful workload (sim/harness/forgetful.py): real Claude Code, Codex and Gemini CLI agents
whose models edit two shared files and never claim. With the edit guard no write overlaps
another agent's; the same run with ``--edits off`` (the control) has overlapping writes, so
the check can fail."""

from __future__ import annotations

import pytest

from sim.harness.forgetful import Write, overlapping, run


def test_an_overlap_is_a_landed_write_after_another_agents_on_the_same_file() -> None:
    writes = [Write("a", "codex", "x", 0, ended=1, landed=True), Write("b", "gemini", "x", 1, ended=2, landed=False),
              Write("a", "codex", "x", 2, ended=3, landed=True), Write("b", "gemini", "y", 3, ended=4, landed=True),
              Write("b", "gemini", "x", 4, ended=5, landed=True), Write("a", "codex", "x", 5, ended=6, landed=True)]
    assert [(o["agent"], o["after"]) for o in overlapping(writes)] == [("b", "a"), ("a", "b")]


@pytest.mark.slow
def test_the_guard_leaves_no_overlapping_write_and_the_control_does() -> None:
    guarded = run(["claude-code", "codex", "gemini"], edits="claim", rounds=5)
    assert guarded.failures == [] and guarded.tried == 15
    assert guarded.overlapping == 0 and guarded.denied > 0 and guarded.landed > 0, guarded.writes
    # each file was written by one agent alone: its first writer
    writers = {}
    for w in guarded.writes:
        if w["landed"]:
            writers.setdefault(w["file"], set()).add(w["agent"])
    assert all(len(agents) == 1 for agents in writers.values()), writers
    control = run(["claude-code", "codex", "gemini"], edits="off", rounds=5)
    assert control.failures == [] and control.denied == 0
    assert control.overlapping > 0 and not control.valid, control.writes
