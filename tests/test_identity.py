"""What the server learns from its environment: the defaults room_join fills in."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from agents_room.harnesses.identity import default_harness_key, detect_harness, for_http, for_stdio, project_dir

KEY = str(uuid.uuid4()).upper()  # per test process: liveness scans every process of the machine


@pytest.mark.parametrize(("env", "harness"), [
    ({"CLAUDECODE": "1", "CODEX_HOME": "/x"}, "claude-code"),
    ({"CODEX_THREAD_ID": "t"}, "codex"),
    ({"CURSOR_TRACE_ID": "c"}, "cursor"),
    ({"CLAUDECODE": "0"}, "unknown"),
    ({}, "unknown"),
])
def test_detect_harness(env: dict[str, str], harness: str) -> None:
    assert detect_harness(env) == harness


def test_harness_key_prefers_our_own_variable_and_is_lowercased() -> None:
    other = "11111111-2222-3333-4444-555555555555"
    assert default_harness_key({"AGENTS_ROOM_HARNESS_KEY": KEY, "CLAUDE_CODE_SESSION_ID": other}) == KEY.lower()
    assert default_harness_key({"CLAUDE_CODE_SESSION_ID": other}) == other
    assert default_harness_key({}) is None


def test_a_malformed_harness_key_is_ignored_with_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    other = "11111111-2222-3333-4444-555555555555"
    assert default_harness_key({"AGENTS_ROOM_HARNESS_KEY": "nope", "CLAUDE_CODE_SESSION_ID": other}) == other
    assert "AGENTS_ROOM_HARNESS_KEY" in capsys.readouterr().err


def test_cwd_is_the_project_dir_else_the_working_directory(tmp_path: Path) -> None:
    assert project_dir({"CLAUDE_PROJECT_DIR": str(tmp_path)}) == str(tmp_path)
    assert project_dir({}) == os.getcwd()


def test_stdio_serves_its_parent_and_http_knows_no_agent(tmp_path: Path) -> None:
    env = {"CLAUDECODE": "1", "CLAUDE_CODE_SESSION_ID": KEY, "CLAUDE_PROJECT_DIR": str(tmp_path)}
    stdio = for_stdio(env)
    assert (stdio.cwd, stdio.pid, stdio.harness, stdio.harness_key) == (str(tmp_path), os.getppid(), "claude-code",
                                                                        KEY.lower())
    http = for_http(env)
    assert (http.cwd, http.pid, http.harness, http.harness_key) == (str(tmp_path), None, "unknown", None)


# -- the harness from the parent process (issue 28) ----------------------------------------------


@pytest.fixture
def program(tmp_path: Path):
    """Start a real process under a given program name (a copy of sleep), or a node script."""
    started: list[subprocess.Popen] = []

    def start(name: str, node: bool = False) -> int:
        folder = tmp_path / f"bin-{len(started)}"
        folder.mkdir()
        if node:
            if not shutil.which("node"):
                pytest.skip("node is not installed")
            (folder / name).write_text("setTimeout(() => {}, 60000)\n")
            argv = ["node", "--max-old-space-size=100", str(folder / name), "mcp", "list"]
        else:
            shutil.copy(shutil.which("sleep") or "/bin/sleep", folder / name)
            argv = [str(folder / name), "60"]
        proc = subprocess.Popen(argv)
        started.append(proc)
        deadline = time.monotonic() + 30
        while True:  # until the exec, and node's script on its command line: before, the child is this Python
            try:
                exe = os.path.basename(os.readlink(f"/proc/{proc.pid}/exe"))
                script = name.encode() in Path(f"/proc/{proc.pid}/cmdline").read_bytes()
            except OSError:
                exe, script = "", False
            if exe in (name, "node", "sleep") and script:
                return proc.pid
            assert proc.poll() is None, f"{argv} exited with {proc.returncode}"
            assert time.monotonic() < deadline, f"{argv} never ran (exe {exe!r})"
            time.sleep(0.01)

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize(("name", "node", "harness"), [
    ("codex", False, "codex"),  # Codex's native binary starts its MCP servers
    ("gemini", True, "gemini"),  # node running Gemini CLI's script
    ("claude.exe", False, "claude-code"),
    ("bash", False, "unknown"),
])
def test_the_harness_is_recognised_from_its_process(program, name: str, node: bool, harness: str) -> None:
    pid = program(name, node)
    assert detect_harness({}, pid) == harness
    assert detect_harness({"CLAUDECODE": "1"}, pid) == "claude-code"  # a marker in the environment wins


def test_gemini_marks_its_servers_and_a_gone_parent_is_unknown() -> None:
    assert detect_harness({"GEMINI_CLI": "1"}) == "gemini"
    assert detect_harness({}, 2**22 + 12345) == "unknown"  # no such process: nothing to read
