"""``agents-room install <harness> --edits claim|check|off``: the edit guard's hooks beside the
news hooks (agents_room/harnesses/editguard_install.py), on the writers and readers of each
harness only, trusted where Codex asks it, idempotent, and removed by ``--edits off``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

from agents_room.harnesses import codex_hooks

AGENTS_ROOM = str(Path(sys.executable).parent / "agents-room")


def install(home: Path, project: Path, *args: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != "AGENTS_ROOM_DB"}
    base["PATH"] = f"{Path(AGENTS_ROOM).parent}:{base.get('PATH', '/usr/bin:/bin')}"
    done = subprocess.run([AGENTS_ROOM, "install", *args, "--dir", str(project)], capture_output=True, text=True,
                          timeout=60, cwd=project, env={**base, "HOME": str(home)}, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    return done


def groups(path: Path, event: str) -> list[dict]:
    return json.loads(path.read_text()).get("hooks", {}).get(event, [])


def guard(path: Path, event: str) -> list[tuple[str, str]]:
    return [(g["matcher"], h["command"]) for g in groups(path, event) for h in g["hooks"]
            if "editguard_entry.py" in h["command"] or "agents-room edit-guard" in h["command"]]


def test_each_harness_gets_its_guard_on_its_writers_and_its_baselines_on_its_readers(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "app"
    home.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    install(home, project, "claude-code")
    local = project / ".claude" / "settings.local.json"
    [(writers, edit)] = guard(local, "PreToolUse")
    assert writers == "Edit|Write|MultiEdit|NotebookEdit" and edit.endswith("--harness claude-code --edits claim")
    assert " -I -S " in edit  # the lean start, as the news hook's
    assert guard(local, "PostToolUse") == [("Read", edit.replace("--edits claim", "--read"))]
    # the news hook still runs on every tool after it, in its own group
    assert [g["matcher"] for g in groups(local, "PostToolUse")] == ["*", "Read"]

    install(home, project, "gemini")
    settings = project / ".gemini" / "settings.json"  # committed: the guard by name, no machine path
    absent = "command -v agents-room >/dev/null 2>&1 || exit 0; "  # harmless without agents-room
    assert guard(settings, "BeforeTool") == [("write_file|replace",
                                              absent + "agents-room edit-guard --harness gemini --edits claim")]
    assert guard(settings, "AfterTool") == [("read_file|read_many_files",
                                             absent + "agents-room edit-guard --harness gemini --read")]
    # where agents-room is not on PATH, the committed command exits 0 and says nothing
    [(_, command)] = guard(settings, "BeforeTool")
    done = subprocess.run(["bash", "-c", command], input="{}", capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(home)})
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")

    done = install(home, project, "codex", "--edits", "check")
    hooks = home / ".codex" / "hooks.json"
    [(patches, command)] = guard(hooks, "PreToolUse")
    assert patches == "apply_patch" and command.endswith("--harness codex --edits check")
    states = tomllib.loads((home / ".codex" / "config.toml").read_text())["hooks"]["state"]
    [handler] = groups(hooks, "PreToolUse")[0]["hooks"]
    assert states[f"{hooks}:pre_tool_use:0:0"]["trusted_hash"] == codex_hooks.fingerprint("PreToolUse", "apply_patch",
                                                                                          handler)
    assert "4 hooks trusted" in done.stdout and "1 hook trusted" in done.stdout  # the news hooks, then the guard

    # twice changes nothing; off removes the guard and keeps the news hooks
    before = {p: p.read_text() for p in (local, settings, hooks)}
    install(home, project, "claude-code")
    install(home, project, "gemini")
    install(home, project, "codex", "--edits", "check")
    assert {p: p.read_text() for p in before} == before
    off = install(home, project, "claude-code", "--edits", "off")
    assert "edit guard PreToolUse hook removed" in off.stdout
    assert guard(local, "PreToolUse") == [] and guard(local, "PostToolUse") == []
    assert [g["matcher"] for g in groups(local, "PostToolUse")] == ["*"]
    # Cursor has no hook before its edits: nothing of the guard is written
    install(home, project, "cursor")
    assert "edit-guard" not in (project / ".cursor" / "hooks.json").read_text()
