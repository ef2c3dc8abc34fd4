"""The ``agents-room`` console script, run as a real subprocess against real store files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agents_room.store import Clock, Store
from agents_room.store.engines import SCHEMA_VERSION

EXE = str(Path(sys.executable).with_name("agents-room"))
COMMANDS = ("serve", "dashboard", "who", "prune", "doctor", "copy")


def run(*args: str, timeout: float = 60, home: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``agents-room ARGS``; ``home``: a HOME of its own (doctor lists the stores it finds there)."""
    env = None if home is None else {**os.environ, "HOME": str(home)}
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=timeout, env=env)


def dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "cli" / "room.db"


@pytest.fixture
def sessions(db: Path, repo: Path) -> dict[str, str]:
    """Three sessions last seen an hour ago: one alive (this process), one gone, one unknown."""
    with Store.open(db, clock=Clock(fixed=time.time() - 3600)) as store:
        return {
            "alive": store.room_join(cwd=str(repo), pid=os.getpid(), label="alive-one", room="team:x").session_id,
            "gone": store.room_join(cwd=str(repo), pid=dead_pid(), label="gone-one").session_id,
            "unknown": store.room_join(cwd=str(repo), pid=None, label="unknown-one").session_id,
        }


def test_help_for_every_command_and_version() -> None:
    top = run("--help")
    assert top.returncode == 0
    for command in COMMANDS:
        assert command in top.stdout
        helped = run(command, "--help")
        assert helped.returncode == 0 and f"usage: agents-room {command}" in helped.stdout
    version = run("--version")
    assert version.returncode == 0 and version.stdout.startswith("agents-room 0.")


def test_who_shows_liveness_as_a_table_and_as_json(db: Path, sessions: dict[str, str]) -> None:
    table = run("--db", str(db), "who")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split()[:4] == ["SESSION", "LABEL", "HARNESS", "LIVENESS"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert {liveness: rows[sid][3] for liveness, sid in sessions.items()} == {
        "alive": "alive", "gone": "gone", "unknown": "unknown"}
    listed = json.loads(run("--db", str(db), "who", "--json").stdout)
    assert {m["session_id"]: m["liveness"] for m in listed} == {sid: kind for kind, sid in sessions.items()}
    only = json.loads(run("--db", str(db), "who", "--room", "team:x", "--json").stdout)
    assert [m["session_id"] for m in only] == [sessions["alive"]]


def test_who_and_doctor_say_which_host_each_session_is_on(
    db: Path, sessions: dict[str, str], repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sessions of another host are judged from the store, and who says so; doctor counts them."""
    monkeypatch.setenv("AGENTS_ROOM_HOST_ID", "laptop-2")
    with Store.open(db, clock=Clock(fixed=time.time() - 3600)) as store:
        theirs = store.room_join(cwd=str(repo), pid=dead_pid(), label="far-one").session_id
    monkeypatch.setenv("AGENTS_ROOM_HOST_ID", "desk-1")
    with Store.open(db) as store:  # this machine's sessions of the fixture: recorded as this host, desk-1
        with store.db.write() as tx:
            tx.execute("UPDATE sessions SET host = 'desk-1' WHERE id <> ?", (theirs,))
    table = run("--db", str(db), "who")
    lines = table.stdout.splitlines()
    assert lines[0].split()[:5] == ["SESSION", "LABEL", "HARNESS", "LIVENESS", "HOST"]
    rows = {line.split()[0]: line.split() for line in lines[1:] if line[:1] != " "}
    # Its pid is dead here, but desk-1 cannot see laptop-2's processes: quiet for an hour is unknown.
    assert rows[theirs][3:5] == ["unknown", "laptop-2"]
    assert rows[sessions["gone"]][3:5] == ["gone", "this"]
    assert any(line.startswith("liveness on another host") for line in lines)
    # doctor counts them by the liveness who shows: one word for one fact (issue 28)
    doctor = run("--db", str(db), "doctor").stdout
    assert "live sessions" not in doctor
    said = dict(line.split(":", 1) for line in doctor.splitlines() if ":" in line)
    assert said["sessions"].strip() == "3 on this host (1 alive, 1 gone, 1 unknown), 1 on laptop-2 (1 unknown)"
    assert "far-one" not in run("--db", str(db), "prune", "--quiet-s", "600").stdout
    doctor = dict(line.split(":", 1) for line in run("--db", str(db), "doctor").stdout.splitlines() if ":" in line)
    assert doctor["this host"].strip() == "desk-1"
    assert doctor["sessions"].strip() == "2 on this host (1 alive, 1 unknown), 1 on laptop-2 (1 unknown)"  # the gone one was pruned


def test_db_option_overrides_the_environment(db: Path, sessions: dict[str, str]) -> None:
    assert os.environ["AGENTS_ROOM_DB"] != str(db)  # conftest points it elsewhere
    Store.open(os.environ["AGENTS_ROOM_DB"]).close()
    assert run("who").stdout.startswith("no sessions")
    assert sessions["alive"] in run("--db", str(db), "who").stdout


def test_prune_removes_only_quiet_gone_sessions(db: Path, sessions: dict[str, str]) -> None:
    dry = run("--db", str(db), "prune", "--quiet-s", "600", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines()[0].startswith(f"would remove {sessions['gone']} (gone-one)")
    assert len(dry.stdout.splitlines()) == 1
    assert sessions["gone"] in run("--db", str(db), "who").stdout  # a dry run changes nothing

    assert "nothing to prune" in run("--db", str(db), "prune", "--quiet-s", "7200").stdout
    done = run("--db", str(db), "prune", "--quiet-s", "600")
    assert done.stdout.splitlines() == [line.replace("would remove", "removed") for line in dry.stdout.splitlines()]
    left = {m["session_id"] for m in json.loads(run("--db", str(db), "who", "--json").stdout)}
    assert left == {sessions["alive"], sessions["unknown"]}
    assert "nothing to prune" in run("--db", str(db), "prune", "--quiet-s", "600").stdout


def test_store_errors_become_one_line_at_the_edge(db: Path, sessions: dict[str, str]) -> None:
    bad = run("--db", str(db), "who", "--room", "Not A Room")
    assert bad.returncode == 1
    assert bad.stderr.splitlines() == [bad.stderr.strip()]
    assert bad.stderr.startswith("agents-room: invalid_argument: room: 'Not A Room' is not a room name")


def test_doctor_reports_the_store(db: Path, sessions: dict[str, str]) -> None:
    report = run("--db", str(db), "doctor")
    assert report.returncode == 0, report.stderr
    fields = dict(line.split(":", 1) for line in report.stdout.splitlines())
    assert fields["path"].strip() == f"{db} (from --db)" and fields["journal_mode"].strip() == "wal"
    assert fields["quick_check"].strip() == "ok" and fields["schema_version"].strip() == str(SCHEMA_VERSION)
    assert "sessions 3" in fields["rows"] and "WAL" in fields["size"]
    health = json.loads(run("--db", str(db), "doctor", "--json").stdout)
    assert health["rows"]["sessions"] == 3 and health["journal_mode"] == "wal" and health["wal_bytes"] >= 0


def test_doctor_reports_a_postgresql_store(pg_url: str, repo: Path) -> None:
    with Store.open(pg_url) as store:
        store.room_join(cwd=str(repo), pid=None, label="one")
    report = run("--db", pg_url, "doctor")
    assert report.returncode == 0, report.stderr
    fields = dict(line.split(":", 1) for line in report.stdout.splitlines())
    assert fields["engine"].strip() == "postgresql" and fields["schema_version"].strip() == str(SCHEMA_VERSION)
    assert fields["server_version"].strip()[:2].isdigit() and "sessions 1" in fields["rows"]
    health = json.loads(run("--db", pg_url, "doctor", "--json").stdout)
    assert health["engine"] == "postgresql" and health["rows"]["sessions"] == 1


def test_doctor_of_an_empty_postgresql_database_says_so_and_creates_nothing(pg_url: str, tmp_path: Path) -> None:
    report = run("--db", pg_url, "doctor", home=tmp_path)  # nothing is wrong: no agent has joined yet (issue 49)
    assert report.returncode == 0 and "none yet, nothing was created: the first agent to join" in report.stdout
    import psycopg

    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()").fetchone()[0] == 0


def test_copy_moves_a_sqlite_store_into_postgresql(db: Path, sessions: dict[str, str], pg_url: str) -> None:
    done = run("--db", str(db), "copy", "--to", pg_url)
    assert done.returncode == 0, done.stderr
    assert "sessions 3" in done.stdout and "events" in done.stdout
    with Store.open(db) as old, Store.open(pg_url) as new:
        assert new.events() == old.events()
    again = run("--db", str(db), "copy", "--to", pg_url)
    assert again.returncode == 1 and again.stderr.startswith("agents-room: store_error: ") and "not empty" in again.stderr


def test_doctor_without_a_store_says_so_and_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "room.db"
    report = run("--db", str(missing), "doctor", home=tmp_path)
    assert report.returncode == 0 and not report.stderr, report.stderr
    assert f"path:           {missing} (from --db)" in report.stdout
    assert "none yet, nothing was created: the first agent to join makes it, or a person's message" in report.stdout
    health = json.loads(run("--db", str(missing), "doctor", "--json", home=tmp_path).stdout)
    assert (health["path"], health["exists"], health["healthy"]) == (str(missing), False, True)
    assert not missing.parent.exists()


@pytest.mark.parametrize("command", [["doctor"], ["who"], ["serve"]])
def test_a_file_that_is_not_a_store_is_refused_and_left_untouched(tmp_path: Path, command: list[str]) -> None:
    garbage = tmp_path / "notes.db"
    content = b"these are my notes, not a database\n" * 100
    garbage.write_bytes(content)
    refused = subprocess.run([EXE, "--db", str(garbage), *command], capture_output=True, text=True, timeout=60,
                             stdin=subprocess.DEVNULL)
    assert refused.returncode != 0
    assert str(garbage) in refused.stderr and "not a SQLite database" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert garbage.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]


def test_who_shows_the_tags_a_session_the_edit_guard_joined_carries(db: Path, repo: Path) -> None:
    (repo / "x.py").write_text("x = 1\n")
    with Store.open(db) as store:
        guarded = store.edit_claim(cwd=str(repo), files=["x.py"], harness="codex").session_id
        plain_one = store.room_join(cwd=str(repo), pid=None, label="plain").session_id
    lines = run("--db", str(db), "who").stdout.splitlines()
    assert lines[0].split()[-2:] == ["TAGS", "CWD"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}  # the cwd has no space: TAGS is next to last
    assert rows[guarded][-2] == "edit-guard" and rows[plain_one][-2] == "-"
