"""``sim run`` with the harness driver: every agent a real CLI (Claude Code, Codex, Gemini CLI)
in one headless turn, its model the scripted model playing the workload. A short run of the
shipped scenario ends valid with the three harnesses and the report's harness tables; a CLI
that never asks its model, or fails to start, ends the run within its bounds with an error
naming the agent and what it waited for, a verdict, and no process of the run left."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from harnesscli import binary

from sim.harness.clis import CLIS
from sim.run.drivers import OpError
from sim.run.harnessdriver import answer_of
from sim.run.harnesshome import count_hooks

ROOT = Path(__file__).resolve().parents[3]
SCENARIO = ROOT / "scenarios" / "real-harnesses.toml"
NAMES = {"claude-code": "claude", "codex": "codex", "gemini": "gemini"}  # tests/harnesscli.py's names


def sim_run(*args: str, cwd: Path, timeout: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sim.cli", "run", *args, "--no-live", "--no-plots"], cwd=cwd,
                          text=True, capture_output=True, timeout=timeout, env={**os.environ, **(env or {})})


def left_in(out: Path) -> list[str]:
    """Processes whose working directory is inside the run's folder (the CLIs run in its repos)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cwd = os.readlink(f"/proc/{entry}/cwd")
            except OSError:
                continue
            if cwd.startswith(str(out)):
                found.append(f"{entry} {Path(f'/proc/{entry}/cmdline').read_bytes()[:120]!r}")
    return found


@pytest.mark.slow
def test_a_short_run_of_real_harnesses_is_valid_with_the_harness_tables(tmp_path: Path) -> None:
    for cli in NAMES.values():
        binary(cli)  # skips where a CLI is missing, fails under CI
    out = tmp_path / "run"
    # The shipped scenario with more broadcasts and fewer reads, so that however slowly a loaded
    # machine runs the CLIs each agent is sent mail its hooks can announce before a read of its own.
    text = SCENARIO.read_text()
    assert "send_broadcast = 3\n" in text and "msg_recv = 8\n" in text
    scenario = tmp_path / "real-harnesses.toml"
    scenario.write_text(text.replace("send_broadcast = 3\n", "send_broadcast = 12\n").replace("msg_recv = 8\n",
                                                                                               "msg_recv = 2\n"))
    # 3 agents spread over the two repos: alpha's first two (claude-code, codex), beta's first (gemini)
    result = sim_run(str(scenario), "--out", str(out), "--agents", "3", "--duration", "12", cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["verdict"] == "valid" and report["run"]["driver"] == "harness" and report["run"]["drained"]
    rows = {r["harness"]: r for r in report["harnesses"]["harnesses"]}
    assert set(rows) == {"claude-code", "codex", "gemini"}
    for name, r in rows.items():
        assert r["agents"] == 1 and r["tool_calls"] > 5, (name, r)
        assert r["model_requests"] >= r["tool_calls"], (name, r)  # one answer brought back per call, and the end
        # the installed hooks ran: the counted runs are Python starts, which a tool call's hook makes only
        # when there is news (the quiet path exits in the shell), plus the ends of turns
        assert r["hook_runs"] > 0, (name, r)
        assert r["mail"] > 0 and r["mail_missed"] == 0, (name, r)  # every delivery reached the model in its turn
        assert r["mail_via_hook"] > 0, (name, r)  # and the installed hooks brought some (an untrusted hook: none)
        assert r["mail_p50_ms"] is not None and r["cpu_s_per_agent"] > 0 and r["rss_mib_per_agent"] > 50, (name, r)
        assert not r["errors"], (name, r["errors"])
    md = (out / "report.md").read_text()
    assert md.startswith("# real-harnesses: VALID") and "## Real harnesses" in md
    assert "real harnesses (mail to the model" in result.stdout
    # The sessions are the CLIs' own: each joined through the server its harness started.
    with sqlite3.connect(out / "store" / "room.db") as db:
        harnesses = dict(db.execute("SELECT label, harness FROM sessions"))
    agents = {json.loads(p.read_text())["agent"]: json.loads(p.read_text())["harness"]
              for p in (out / "harness").glob("a*.json")}
    assert harnesses == agents and set(agents.values()) == set(CLIS)
    # The history is the model's: every call but the agent's own file edits went through a CLI.
    figures = {a: json.loads((out / "harness" / f"{a}.json").read_text()) for a in agents}
    history = [json.loads(line) for line in __import__("gzip").decompress(
        (out / "history.jsonl.gz").read_bytes()).decode().splitlines()]
    for a, f in figures.items():
        invoked = sum(1 for r in history if r["agent"] == a and r["type"] == "invoke" and r["f"] != "edit")
        assert invoked == f["tool_calls"], (a, invoked, f["tool_calls"])
    for record in (out / "harness").glob("a*.pid"):
        assert not Path(json.loads(record.read_text())["home"]).exists()  # each CLI's HOME removed
    assert left_in(out) == []


def _fake_cli(cache: Path, harness: str, script: str) -> None:
    _, folder, exe = CLIS[harness]  # type: ignore[index]
    path = cache / folder / "node_modules" / ".bin" / exe
    path.parent.mkdir(parents=True)
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)


FAILING = """
name = "harness-failure"

[run]
driver = "harness"
duration_s = 5
startup_timeout_s = 6
op_timeout_s = 3
busy_timeout_s = 1

[[repos]]
name = "alpha"
agents = 1
files = 2
harnesses = ["claude-code"]

[workload.mix]
note_read = 1
"""


@pytest.mark.slow
@pytest.mark.parametrize(("script", "said"), [
    ("echo $$ > PIDS/cli\nexec sleep 600\n", "waited for its first model request: nothing came within 6 s"),
    ("echo $$ > PIDS/cli\necho 'cannot load its bundle' >&2\nexit 3\n",
     "claude exited with 3; it said: [stderr] / cannot load its bundle"),
], ids=["never-calls-back", "fails-to-start"])
def test_a_harness_that_does_not_call_back_ends_the_run_naming_the_agent(tmp_path: Path, script: str,
                                                                         said: str) -> None:
    cache, pids = tmp_path / "npm", tmp_path / "pids"
    pids.mkdir()
    _fake_cli(cache, "claude-code", script.replace("PIDS", str(pids)))  # the CLI gets a clean environment
    scenario = tmp_path / "failing.toml"
    scenario.write_text(FAILING)
    out = tmp_path / "run"
    began = time.monotonic()
    result = sim_run(str(scenario), "--out", str(out), cwd=tmp_path, timeout=300,
                     env={"AGENTS_ROOM_NPM_CACHE": str(cache)})
    took = time.monotonic() - began
    words = result.stdout + result.stderr
    assert result.returncode == 2, words[-3000:]
    report = json.loads((out / "report.json").read_text())
    reason = report["invariants"]["reason"]  # the terminal wraps it; the report has it whole
    assert report["verdict"] == "unknown" and "a00 (claude-code): waited for its first model request" in reason
    assert said in reason, reason
    assert took < 240, took  # the start-up bound, not a hang
    cli = int((pids / "cli").read_text())
    assert not Path(f"/proc/{cli}").exists() or Path(f"/proc/{cli}/stat").read_text().split()[2] == "Z"
    assert left_in(out) == []


def test_a_tool_answer_is_read_as_the_harness_shows_it() -> None:
    joined = '{"session_id":"6b85d68e99532a16","rooms":["repo:x"],"autonomy":"notify","warning":null}'
    assert answer_of("room_join", joined)["session_id"] == "6b85d68e99532a16"  # Claude Code: the text itself
    wrapped = f"<untrusted_context>{joined}</untrusted_context>"  # Gemini CLI wraps it
    assert answer_of("room_join", wrapped)["rooms"] == ["repo:x"]
    blocks = json.dumps([{"type": "text", "text": joined}])  # MCP content blocks passed on whole
    assert answer_of("room_join", blocks)["autonomy"] == "notify"
    for text in ("unknown_session: 'nope' is not a session id", "<untrusted_context>lease_not_held: x.py</untrusted_context>",
                 "Error: invalid_argument: path: ''"):
        with pytest.raises(OpError) as caught:
            answer_of("lease_release", text)
        assert caught.value.code in ("unknown_session", "lease_not_held", "invalid_argument")
        assert caught.value.outcome == "fail"
    with pytest.raises(OpError) as caught:  # a tool the harness did not have: may not have run, unknown
        answer_of("room_join", "<tool_use_error>Error: No such tool available: mcp__room__room_join</tool_use_error>")
    assert caught.value.code == "unexpected" and caught.value.outcome == "info"


def test_hook_counting_wraps_each_installed_hook_and_codex_still_trusts_it(tmp_path: Path) -> None:
    from agents_room.harnesses.codex_hooks import trusted

    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    env = {**os.environ, "HOME": str(home), "AGENTS_ROOM_DB": str(tmp_path / "room.db")}
    agents_room = str(Path(sys.executable).parent / "agents-room")
    for harness in ("claude-code", "codex", "gemini"):
        subprocess.run([agents_room, "install", harness, "--scope", "user", "--dir", str(project)], check=True,
                       env=env, capture_output=True, timeout=60)
    assert count_hooks(home, tmp_path / "hooks.log") >= 12  # four or more events each
    hooks = home / ".codex" / "hooks.json"
    config = (home / ".codex" / "config.toml").read_text()
    assert all(h in config for h in trusted(hooks, hooks.read_text()).values())  # the wrapped commands' hashes
    for path in (home / ".claude" / "settings.json", hooks, home / ".gemini" / "settings.json"):
        assert "hook-counted -I -S" in path.read_text() and json.loads(path.read_text())
    wrapper = home / "hook-counted"
    done = subprocess.run([str(wrapper), "-c", "print('ran')"], capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == "ran" and (tmp_path / "hooks.log").read_text().count("\n") == 1


@pytest.mark.parametrize(("change", "said"), [
    (('harnesses = ["claude-code", "codex", "gemini"]', 'harnesses = ["cursor"]'),
     "[repos.0] harnesses: must be one of claude-code, codex, gemini, got 'cursor'"),
    (('driver = "harness"', 'driver = "mcp"'),
     "[repos] harnesses: only the harness driver runs CLIs (repos ['alpha', 'beta']); use driver = \"harness\""),
    (("[workload]\n", "[faults.kill]\ncount = 1\n\n[workload]\n"), "[faults] kill: the harness driver runs no faults"),
])
def test_a_harness_scenario_that_cannot_run_is_refused_naming_the_key(change: tuple[str, str], said: str) -> None:
    from sim.scenario.scenario import ScenarioError, parse

    text = SCENARIO.read_text()
    assert change[0] in text
    with pytest.raises(ScenarioError) as caught:
        parse(text.replace(change[0], change[1], 1))
    assert said in str(caught.value)


@pytest.mark.slow
def test_a_missing_cli_ends_the_run_with_its_install_command(tmp_path: Path) -> None:
    scenario = tmp_path / "failing.toml"
    scenario.write_text(FAILING)
    out = tmp_path / "run"
    result = sim_run(str(scenario), "--out", str(out), cwd=tmp_path, timeout=300,
                     env={"AGENTS_ROOM_NPM_CACHE": str(tmp_path / "empty")})
    assert result.returncode == 2, (result.stdout + result.stderr)[-3000:]
    reason = json.loads((out / "report.json").read_text())["invariants"]["reason"]
    assert "a00 (claude-code): " in reason and "is missing (npm install --prefix " in reason, reason
    assert "@anthropic-ai/claude-code)" in reason, reason
