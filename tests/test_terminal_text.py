"""Control characters in what agents write (labels, subjects, bodies, paths, hosts, rooms)
reach a person's terminal visible, never executed: ``inbox``, ``who``, ``prune``, ``doctor``
and the commit guard's lines, as real processes on each engine (agents_room/visible.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agents_room.store import Clock, Store
from agents_room.visible import visible

EXE = str(Path(sys.executable).with_name("agents-room"))
# Set the window title, erase the line and go back to its start, a fake verdict, the
# clipboard through OSC 52, a C1 CSI, a right-to-left override, a bell.
HOSTILE = "\x1b]0;pwned\x07\x1b[2K\rCI passed \x1b]52;c;ZWNobyBoaQ==\x07\x9b31m\u202eevil\x07"


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgresql":
        return request.getfixturevalue("pg_url")
    return str(tmp_path / "store" / "room.db")


def run(location: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "AGENTS_ROOM_DB": location, "USER": "carol"}
    return subprocess.run([EXE, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=60)


def raw_controls(text: str) -> list[str]:
    return [c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) < 0xA0 or c == "\u202e"]


def test_what_agents_wrote_reaches_the_terminal_visible(location: str, repo: Path) -> None:
    with Store.open(location, clock=Clock(), busy_timeout_s=2.0) as room:
        agent = room.room_join(cwd=str(repo), pid=None, label="bob" + HOSTILE, host="h" + HOSTILE).session_id
        hello = run(location, "send", "--json", "*", "hello", cwd=repo)
        assert hello.returncode == 0, hello.stderr
        me = json.loads(hello.stdout)["session_id"]
        room.msg_send(agent, me, subject="s" + HOSTILE, body="line one" + HOSTILE + "\nline two\r\n")
    shown = {name: run(location, *args, cwd=repo) for name, args in
             {"inbox": ["inbox"], "who": ["who"], "doctor": ["doctor"]}.items()}
    for name, done in shown.items():
        assert raw_controls(done.stdout + done.stderr) == [], (name, done.stdout)
    inbox = shown["inbox"].stdout
    assert f"(bob{visible(HOSTILE)}), " in inbox and f": s{visible(HOSTILE)}\n" in inbox
    assert f"    line one{visible(HOSTILE)}\n    line two\\x0d\n" in inbox
    assert "\\x1b]52;c;ZWNobyBoaQ==\\x07" in inbox and "\\x9b31m\\u202eevil" in inbox
    who = shown["who"].stdout
    # a header, two sessions, the note on another host's liveness, the store: no line of the label's own
    assert f"bob{visible(HOSTILE)}" in who and len(who.splitlines()) == 5
    assert visible("h" + HOSTILE)[:20] in who
    assert f"h{visible(HOSTILE)}" in shown["doctor"].stdout


def test_the_commit_guard_shows_a_holders_label_visible(location: str, repo: Path) -> None:
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org"]
    (repo / "a.py").write_text("a\n")
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True, timeout=60)
    subprocess.run([*git, "commit", "-qm", "first"], cwd=repo, check=True, timeout=60)
    assert run(location, "--db", location, "guard", "install", "--repo", str(repo), cwd=repo).returncode == 0
    with Store.open(location, busy_timeout_s=2.0) as room:
        holder = room.room_join(cwd=str(repo), pid=None, label="bob" + HOSTILE).session_id
        assert room.lease_claim(holder, str(repo / "a.py")).ok
    (repo / "a.py").write_text("b\n")
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True, timeout=60)
    done = subprocess.run([*git, "commit", "-qm", "second"], cwd=repo, capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if not k.startswith("AGENTS_ROOM")})
    assert done.returncode == 1 and "commit refused" in done.stderr, done.stderr
    assert raw_controls(done.stderr) == [] and f"({visible('bob' + HOSTILE)})" in done.stderr
