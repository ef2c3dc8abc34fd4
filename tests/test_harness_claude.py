"""The real Claude Code CLI (npm ``@anthropic-ai/claude-code``) on the files a project commits
(issue 28): a clone holding only the committed ``.mcp.json`` (and ``.claude/settings.json``),
opened by someone with agents-room on PATH, shows our server "Pending approval"; once that
person runs ``agents-room install claude-code`` (the local hooks, and the approval of the
committed server in ``.claude/settings.local.json``), ``claude mcp list`` starts it and says
Connected, and no committed byte changed. A scratch HOME under /var/tmp per person."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from harnesscli import binary, cli_env, git_project, scratch_home

pytestmark = pytest.mark.slow
AGENTS_ROOM = str(Path(sys.executable).parent / "agents-room")
COMMITTED = (".mcp.json", ".claude/settings.json")


@pytest.fixture
def homes():
    made: list[Path] = []

    def make() -> Path:
        made.append(scratch_home())
        return made[-1]

    yield make
    for path in made:
        shutil.rmtree(path, ignore_errors=True)


def test_claude_connects_to_the_committed_server_after_install(homes) -> None:
    claude = binary("claude")
    author = homes()
    project = git_project(author / "proj")
    on_path = f"{Path(AGENTS_ROOM).parent}:/usr/bin:/bin"
    store = {"AGENTS_ROOM_DB": "~/rooms/team.db"}  # under each person's home: committed as ~/...
    done = subprocess.run([AGENTS_ROOM, "install", "claude-code"], capture_output=True, text=True, timeout=60,
                          cwd=project, env=cli_env(author, PATH=on_path, **store))
    assert done.returncode == 0, done.stderr

    # a teammate's clone: the committed files only
    teammate = homes()
    clone = git_project(teammate / "clone")
    for name in COMMITTED:
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(project / name, clone / name)
    committed = {name: (clone / name).read_bytes() for name in COMMITTED}
    env = cli_env(teammate, PATH=on_path)

    def mcp_list() -> str:
        listed = subprocess.run([claude, "mcp", "list"], capture_output=True, text=True, timeout=120, cwd=clone,
                                env=env)
        return listed.stdout + listed.stderr

    assert "room: agents-room serve - ⏸ Pending approval" in mcp_list()
    done = subprocess.run([AGENTS_ROOM, "install", "claude-code"], capture_output=True, text=True, timeout=60,
                          cwd=clone, env=env)
    assert done.returncode == 0, done.stderr
    assert "approved on this machine" in done.stdout
    said = mcp_list()
    assert "room: agents-room serve - ✔ Connected" in said, said
    assert {name: (clone / name).read_bytes() for name in COMMITTED} == committed
