"""What the server learns from its environment: the defaults room_join fills in."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agents_room.identity import default_harness_key, detect_harness, for_http, for_stdio, project_dir

KEY = "2B50133E-0D6C-4C4E-9A37-3F0E5D1B7A10"


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
