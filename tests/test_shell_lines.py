"""Every shell line install and guard install write is quoted by one rule
(agents_room/shell_line.py): written from an installation in folders named with ``'``,
``"``, ``$(...)``, spaces and newlines, each line runs as meant through ``sh -c`` (the guard
at ``git commit``), and runs nothing the folder's name spells.

The installation is this checkout's package, linked into the odd folder, run by a link to
the base interpreter there: what ``sys.executable`` and the package's ``__file__`` say is the
odd folder, as for a person whose home folder is ``/home/o'brien``."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import sysconfig
import uuid
from pathlib import Path

import pytest

import agents_room
from agents_room.store import Store

PACKAGE = Path(agents_room.__file__).parent
BASE_PYTHON = os.path.realpath(sys.executable)
NAMES = ["o'brien", "two 'quotes' \"and\" $(touch PWNED) `touch PWNED`", "a b\tc\nnew line", "x';touch PWNED;'y"]
# What install writes, from the installation at sys.path[-1]: the hook command, and each
# harness's form of it with a store riding it; the guard's whole hook.
WRITE = """
import json, sys
sys.path.append(sys.argv[1])
from agents_room.harnesses.install import hook_command
from agents_room.harnesses.config_change import Store
from agents_room.harnesses import codex_hooks, cursor, gemini
from agents_room.guard_install import script
from pathlib import Path
store, root = Store(sys.argv[2], portable=False), Path(sys.argv[3])
codex = json.loads(codex_hooks.hooks_change(root / "h.json", hook_command(), store).after)
gem = gemini.plan("user", root, root, "agents-room", hook_command(), store=store)
cur = cursor.plan("user", root, root, "agents-room", hook_command(), store=store)
lines = {"hook": hook_command(),
         "codex": codex["hooks"]["Stop"][0]["hooks"][0]["command"],
         "gemini": json.loads(gem[0].after)["hooks"]["AfterAgent"][0]["hooks"][0]["command"],
         "cursor": json.loads(cur[1].after)["hooks"]["stop"][0]["command"]}
print(json.dumps({"lines": lines, "guard": script(sys.argv[2])}))
"""


def installation(folder: Path) -> Path:
    """A link to the base interpreter and to the package under ``folder``; its python."""
    (folder / "bin").mkdir(parents=True)
    (folder / "lib").mkdir()
    python = folder / "bin" / "python3"
    python.symlink_to(BASE_PYTHON)
    (folder / "lib" / "agents_room").symlink_to(PACKAGE)
    return python


@pytest.mark.parametrize("name", NAMES, ids=range(len(NAMES)))
def test_every_written_line_runs_as_meant_from_an_odd_folder(tmp_path: Path, name: str) -> None:
    odd = tmp_path / name
    python = installation(odd)
    db = odd / "store" / "room.db"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LD_LIBRARY_PATH": sysconfig.get_config_var("LIBDIR") or ""}
    done = subprocess.run([str(python), "-I", "-S", "-c", WRITE, str(odd / "lib"), str(db), str(odd)],
                          capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    written = json.loads(done.stdout)
    assert shlex.split(written["lines"]["hook"])[0] == str(python)  # the odd folder is what is written

    key = str(uuid.uuid4())
    with Store.open(db) as s:
        me = s.room_join(cwd=str(tmp_path), pid=None, harness_key=key).session_id
        s.msg_send(s.room_join(cwd=str(tmp_path), pid=None, label="bob").session_id, me, subject="quoted right")
    for harness, command in written["lines"].items():
        event = {"session_id": key, "hook_event_name": "PostToolUse"}
        run_env = env if harness != "hook" else {**env, "AGENTS_ROOM_DB": str(db)}
        ran = subprocess.run(["sh", "-c", command], input=json.dumps(event), capture_output=True, text=True,
                             timeout=60, env=run_env, cwd=tmp_path)
        assert ran.returncode == 0 and "Syntax error" not in ran.stderr, (harness, command, ran.stderr)
        assert not (tmp_path / "PWNED").exists(), (harness, command)
    # The guard: run by git at commit; then, with the installation gone, its one line and the
    # commit goes ahead (what docs/guard.md promises), and nothing the name spells runs.
    repo = tmp_path / "repo"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q", str(repo)], check=True, timeout=60)
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text(written["guard"])
    hook.chmod(0o755)
    (repo / "a.txt").write_text("a\n")
    subprocess.run([*git, "add", "a.txt"], cwd=repo, check=True, timeout=60)
    first = subprocess.run([*git, "commit", "-qm", "one"], cwd=repo, capture_output=True, text=True, timeout=60,
                           env={**env, "HOME": str(tmp_path)})
    assert first.returncode == 0 and first.stderr == "", first.stderr
    python.unlink()
    (repo / "a.txt").write_text("b\n")
    subprocess.run([*git, "add", "a.txt"], cwd=repo, check=True, timeout=60)
    gone = subprocess.run([*git, "commit", "-qm", "two"], cwd=repo, capture_output=True, text=True, timeout=60,
                          env={**env, "HOME": str(tmp_path)})
    assert gone.returncode == 0, gone.stderr
    assert gone.stderr == (f"agents-room guard: {python} or its agents_room is gone; commit allowed "
                           "(agents-room guard uninstall removes this hook)\n")
    assert not (tmp_path / "PWNED").exists() and not (repo / "PWNED").exists()
