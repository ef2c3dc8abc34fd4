"""Where the store is: every form of ``AGENTS_ROOM_DB`` either names one store that every agent
resolves alike, or is refused with words that say why and what to write instead. Run by
subprocess, as a user meets them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agents_room.store import Location, Store, StoreError, resolve
from agents_room.store.location import redact

EXE = str(Path(sys.executable).with_name("agents-room"))


def run(*args: str, env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=60, cwd=cwd,
                          env={**os.environ, **env}, stdin=subprocess.DEVNULL)


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.parametrize("command", [["who"], ["prune", "--quiet-s", "1"], ["doctor"], ["serve"]])
def test_a_relative_path_is_refused_by_every_command(tmp_path: Path, command: list[str]) -> None:
    line = one_line_error(run(*command, env={"AGENTS_ROOM_DB": "room.db"}, cwd=tmp_path))
    assert line.startswith("agents-room: store_error: AGENTS_ROOM_DB=room.db is a relative path")
    assert f"write an absolute path, e.g. {tmp_path / 'room.db'}" in line
    assert not list(tmp_path.iterdir())  # nothing created where the agent happened to run


def test_two_servers_in_two_repos_with_one_relative_setting_both_refuse(tmp_path: Path) -> None:
    """The split the issue found: each server would have made its own store in its own repo."""
    repos = [tmp_path / "alpha", tmp_path / "beta"]
    for repo in repos:
        repo.mkdir()
    servers = [subprocess.Popen([EXE, "serve"], cwd=repo, env={**os.environ, "AGENTS_ROOM_DB": "room.db"},
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for repo in repos]
    for server in servers:
        _, err = server.communicate(timeout=60)
        assert server.returncode == 1 and "is a relative path" in err
    assert [list(r.iterdir()) for r in repos] == [[], []]


def test_two_servers_in_two_repos_with_one_absolute_setting_share_one_store(tmp_path: Path) -> None:
    db = tmp_path / "shared" / "room.db"
    for name in ("alpha", "beta"):
        (tmp_path / name).mkdir()
        done = run("--db", str(db), "doctor", env={"AGENTS_ROOM_DB": str(db), "HOME": str(tmp_path)},
                   cwd=tmp_path / name)
        assert done.returncode == 0 and "none yet, nothing was created" in done.stdout  # doctor only looks
        assert not db.parent.exists()
    with Store.open(db) as store:
        store.room_join(cwd=str(tmp_path / "alpha"), pid=None, label="from-alpha")
    for name in ("alpha", "beta"):
        listed = run("who", env={"AGENTS_ROOM_DB": str(db)}, cwd=tmp_path / name)
        assert listed.returncode == 0 and "from-alpha" in listed.stdout


@pytest.mark.parametrize("url", ["mysql://u@h/db", "sqlite:///tmp/x.db", "file:///tmp/x.db", "http://h/x"])
def test_an_unknown_scheme_is_refused_naming_the_supported_forms(tmp_path: Path, url: str) -> None:
    line = one_line_error(run("who", env={"AGENTS_ROOM_DB": url}, cwd=tmp_path))
    scheme = url.split("://")[0]
    assert f"the scheme {scheme}:// is not supported" in line
    assert "absolute path" in line and "postgresql://" in line
    assert not list(tmp_path.iterdir())  # no folder named after the scheme


def test_a_postgres_url_is_never_taken_for_a_file(tmp_path: Path) -> None:
    for url in ("postgresql://agent:s3cret@db.example/room", "postgres://agent:s3cret@db.example/room"):
        location = resolve(url)
        assert location.engine == "postgresql" and location.target == url
        assert "s3cret" not in str(location)
        done = run("who", env={"AGENTS_ROOM_DB": url}, cwd=tmp_path)
        assert done.returncode != 0 and "s3cret" not in done.stderr + done.stdout
        assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("command", [["who"], ["prune", "--quiet-s", "1"], ["inbox"], ["who", "--json"]])
def test_commands_that_only_look_create_no_store(tmp_path: Path, command: list[str]) -> None:
    """Where there is no store yet nothing is wrong (issue 49): they say so, and what makes one,
    and exit 0."""
    db = tmp_path / "typo" / "room.db"
    done = run(*command, env={"AGENTS_ROOM_DB": str(db)})
    assert done.returncode == 0, done.stderr
    said = done.stderr if "--json" in command else done.stdout
    assert f"no room yet: there is no store at {db} (from $AGENTS_ROOM_DB), and nothing was created" in said
    assert "the first agent to join makes it, or a person's message: agents-room send" in said
    assert not (tmp_path / "typo").exists()


@pytest.mark.parametrize("command", [["who"], ["prune", "--quiet-s", "1"], ["doctor"], ["serve"], ["inbox"],
                                     ["send", "*", "s"]])
def test_a_path_that_cannot_hold_a_store_is_one_clear_line(tmp_path: Path, command: list[str]) -> None:
    afile = tmp_path / "a-file"
    afile.write_text("not a folder")
    home = tmp_path / "home"
    Store.open(home / ".agents-room" / "room.db").close()  # another store exists: the reason still comes first
    for db in (afile / "room.db", afile / "deeper" / "room.db", Path("/proc/nope/room.db")):
        line = one_line_error(run(*command, env={"AGENTS_ROOM_DB": str(db), "HOME": str(home)}))
        assert line.startswith("agents-room: store_error:") and str(db) in line
        if command[0] != "serve":  # the commands that look, and send, say why (store/location.py, unusable)
            assert (f"{afile} is a file, not a folder" in line if db.is_relative_to(afile)
                    else "nothing can be made in the folder /proc" in line), line
    assert afile.read_text() == "not a folder"


def test_the_home_folder_form_is_the_same_for_every_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AGENTS_ROOM_DB", "~/rooms/team.db")
    assert resolve() == Location("sqlite", str(tmp_path / "rooms" / "team.db"), "AGENTS_ROOM_DB")
    monkeypatch.delenv("AGENTS_ROOM_DB")
    assert resolve() == Location("sqlite", str(tmp_path / ".agents-room" / "room.db"), "default")


def test_code_gets_the_same_refusals() -> None:
    with pytest.raises(StoreError, match="relative path"):
        Store.open("room.db")
    with pytest.raises(StoreError, match="not supported"):
        Store.open("redis://h/0")


def test_redaction_hides_passwords_in_authority_and_query() -> None:
    assert redact("postgresql://u:pw@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert redact("postgresql://u@h/db?sslmode=require&password=pw") == "postgresql://u@h/db?sslmode=require&password=***"
    assert redact("postgresql://h/db?password=pw") == "postgresql://h/db?password=***"
    assert redact("postgresql://u@h/db") == "postgresql://u@h/db"
