"""Issue 20: a person can see which store they are on, and which other stores agents on this
machine may be on (``agents-room doctor``, by subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agents_room.store import Store

EXE = str(Path(sys.executable).with_name("agents-room"))


def doctor(home: Path, cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "AGENTS_ROOM_DB"}
    return subprocess.run([EXE, "doctor", *args], capture_output=True, text=True, timeout=60, cwd=cwd,
                          env={**base, "HOME": str(home), **env}, stdin=subprocess.DEVNULL)


def test_doctor_shows_where_its_store_came_from_and_the_other_stores(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    (project / ".claude").mkdir(parents=True)
    Store.open(home / ".agents-room" / "room.db").close()  # the default store exists
    theirs = tmp_path / "theirs" / "room.db"
    (project / ".claude" / "settings.local.json").write_text(json.dumps({"env": {"AGENTS_ROOM_DB": str(theirs)}}))
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"room": {"command": "agents-room",
                                                                           "env": {"AGENTS_ROOM_DB": "rel.db"}}}}))
    mine = tmp_path / "mine" / "room.db"
    Store.open(mine).close()

    done = doctor(home, project, AGENTS_ROOM_DB=str(mine))
    assert done.returncode == 0, done.stderr
    assert f"path:           {mine} (from $AGENTS_ROOM_DB)" in done.stdout
    others = done.stdout.split("other stores:", 1)[1]
    assert f"{home / '.agents-room' / 'room.db'} (the default location): exists" in others
    assert f"{theirs} (AGENTS_ROOM_DB in {project / '.claude' / 'settings.local.json'}): no store there yet" in others
    # a setting that names no usable store is shown with its refusal
    assert f"rel.db (AGENTS_ROOM_DB in {project / '.mcp.json'}): the store location 'rel.db' is a relative path" in others


def test_doctor_json_and_a_missing_store_name_the_others(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    Store.open(home / ".agents-room" / "room.db").close()
    typo = tmp_path / "tpyo" / "room.db"
    missing = doctor(home, project, AGENTS_ROOM_DB=str(typo))
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    [line] = missing.stderr.strip().splitlines()
    assert f"there is no store at {typo}" in line
    assert f"other stores: {home / '.agents-room' / 'room.db'} (the default location): exists" in line
    assert not typo.parent.exists()

    health = json.loads(doctor(home, project, "--json").stdout)
    assert health["path"] == str(home / ".agents-room" / "room.db") and health["origin"] == "the default location"
    assert health["other_stores"] == []


def test_who_says_which_store_it_listed(tmp_path: Path) -> None:
    home, db = tmp_path / "home", tmp_path / "team" / "room.db"
    with Store.open(db) as store:
        store.room_join(cwd=str(tmp_path), pid=None, label="alice")
    listed = subprocess.run([EXE, "who"], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                            env={**os.environ, "HOME": str(home), "AGENTS_ROOM_DB": str(db)})
    assert listed.returncode == 0 and "alice" in listed.stdout
    assert listed.stdout.splitlines()[-1] == f"store: {db} (from $AGENTS_ROOM_DB)"
    Store.open(home / ".agents-room" / "room.db").close()
    empty = subprocess.run([EXE, "who"], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                           env={k: v for k, v in os.environ.items() if k != "AGENTS_ROOM_DB"} | {"HOME": str(home)})
    assert empty.stdout.startswith(f"no sessions in {home / '.agents-room' / 'room.db'} (the default location)")
    assert "agents-room doctor lists the stores it finds" in empty.stdout
