"""The edit guard's cost, pinned where it can regress silently: what its installed command
imports on each path that runs the store's rules (a first edit's claim, a denial, a first read
baseline), and the plain records (agents_room/harnesses/plainrecords.py) that let it import the
store without ``dataclasses``, held to the real dataclasses for every record of the store."""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import agents_room
from agents_room.harnesses import plainrecords
from agents_room.store import Store

ENTRY = str(Path(agents_room.__file__).parent / "editguard_entry.py")
SRC = str(Path(agents_room.__file__).parents[1])
STORE = Path(agents_room.__file__).parent / "store"
KEY_A = str(uuid.uuid4())  # per test process: liveness scans every process of the machine
# Each costs milliseconds at import (dataclasses with inspect, ast, dis, tokenize; uuid with
# platform; argparse; site), and the guard's store path needs none of them.
COSTLY = {"dataclasses", "inspect", "ast", "dis", "tokenize", "uuid", "platform", "argparse", "site", "datetime",
          "mcp", "pydantic", "anyio", "agents_room.cli", "agents_room.server", "agents_room.store.postgres"}


# What importing functools brings (and _sqlite3 asks functools for): none of it on the look.
FUNCTOOLS = {"functools", "collections", "keyword", "operator", "reprlib"}


def store_modules() -> list[str]:
    """Every module of the store but the PostgreSQL engine's (its driver is imported at open)."""
    out = []
    for path in sorted(STORE.rglob("*.py")):
        parts = ["agents_room", "store", *path.relative_to(STORE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        if "postgres" not in parts:
            out.append(".".join(parts))
    return out


def records(found: dict[str, list]) -> dict[str, list]:
    return {k: v for k, v in sorted(found.items())}


def test_every_record_of_the_store_is_built_as_the_real_dataclass_builds_it() -> None:
    # The store imported whole in a fresh -I -S process with plain records standing in, as the
    # guard imports it: each record's fields (a base's first), in order, with their defaults.
    code = f"""
import json, sys
sys.path.append({SRC!r})
from agents_room.harnesses.plainrecords import standing_in, MISSING
with standing_in():
    import importlib
    modules = [importlib.import_module(m) for m in {store_modules()!r}]
assert "dataclasses" not in sys.modules, "the real dataclasses was imported"
out = {{}}
for module in modules:
    for name, value in vars(module).items():
        if isinstance(value, type) and value.__module__ == module.__name__ and "__plain_fields__" in vars(value):
            out[module.__name__ + "." + value.__qualname__] = [
                [f.name, None if f.default is MISSING else repr(f.default)] for f in value.__plain_fields__]
print(json.dumps(out))
"""
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    plain = json.loads(done.stdout)
    real = {}
    for name in store_modules():
        module = importlib.import_module(name)
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == name and "__dataclass_fields__" in vars(value):
                real[f"{name}.{value.__qualname__}"] = [
                    [f.name, None if f.default is dataclasses.MISSING else repr(f.default)]
                    for f in dataclasses.fields(value)]
    assert len(real) >= 25 and records(plain) == records(real)


def test_a_plain_record_behaves_as_a_frozen_dataclass() -> None:
    def make(dataclass):  # one record class and a subclass, as the store writes them
        @dataclass(frozen=True)
        class Lease:
            path: str
            ttl_s: float
            label: str | None = None

        @dataclass(frozen=True)
        class View(Lease):
            mine: bool = False

        return Lease, View

    (real, real_view), (plain, plain_view) = make(dataclasses.dataclass), make(plainrecords.dataclass)
    for args, kw in [(("x.py", 5.0), {}), (("x.py",), {"ttl_s": 5.0, "label": "a"}), ((), {"path": "y", "ttl_s": 1})]:
        a, b = real(*args, **kw), plain(*args, **kw)
        assert repr(a) == repr(b) and hash(a) == hash(b)
        assert b == plain(*args, **kw) and b != plain("other", 0.0) and b != a
        for record in (a, b):
            with pytest.raises(AttributeError):
                record.path = "z"  # type: ignore[misc]
            with pytest.raises(AttributeError):
                del record.label
    assert repr(real_view("p", 1.0, mine=True)) == repr(plain_view("p", 1.0, mine=True))
    assert [f.name for f in plainrecords.fields(plain_view)] == [f.name for f in dataclasses.fields(real_view)]
    for bad_args, bad_kw in [((), {}), (("a", 1.0, "l", "extra"), {}), (("a",), {"path": "b", "ttl_s": 1.0}),
                             (("a", 1.0), {"nope": 1})]:
        for cls in (real, plain):
            with pytest.raises(TypeError):
                cls(*bad_args, **bad_kw)
    with pytest.raises(TypeError):
        plainrecords.dataclass(order=True)
    # Standing in only where the real module is not loaded yet (here it is): nothing changes.
    with plainrecords.standing_in():
        assert sys.modules["dataclasses"] is dataclasses


def imported(env: dict[str, str], payload: dict, flags: list[str]) -> tuple[set[str], str]:
    command = [sys.executable, "-X", "importtime", "-I", "-S", ENTRY, "--harness", "claude-code", *flags]
    done = subprocess.run(command, input=json.dumps(payload), capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    modules = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    return modules, done.stdout


def test_the_paths_that_write_import_the_store_without_what_they_never_use(tmp_path: Path) -> None:
    repo = tmp_path / "app"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for name in ("x.py", "y.py", "held.py"):
        (repo / name).write_text("a = 1\n")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "AGENTS_ROOM_DB": str(tmp_path / "room.db"),
           "XDG_RUNTIME_DIR": str(tmp_path), "CLAUDE_CODE_SESSION_ID": KEY_A}
    with Store.open(env["AGENTS_ROOM_DB"]) as store:
        other = store.room_join(cwd=str(repo), pid=None, label="holder").session_id
        store.lease_claim(other, str(repo / "held.py"), ttl_s=3600)

    def payload(path: str, tool: str = "Edit", event: str = "PreToolUse") -> dict:
        return {"session_id": KEY_A, "hook_event_name": event, "cwd": str(repo), "tool_name": tool,
                "tool_input": {"file_path": str(repo / path), "old_string": "a", "new_string": "b"}}

    claim, said = imported(env, payload("x.py"), ["--edits", "claim"])  # the first edit: joins and claims
    assert said == "" and {"agents_room.store", "agents_room.store.editclaim", "_sqlite3"} <= claim
    deny, said = imported(env, payload("held.py"), ["--edits", "claim"])
    assert "edit denied" in said and "agents_room.store.editclaim" in deny
    read, said = imported(env, payload("y.py", "Read", "PostToolUse"), ["--read"])  # a first baseline
    assert said == "" and "agents_room.store.reads" in read
    for modules in (claim, deny, read):
        assert not modules & COSTLY, modules & COSTLY
    with Store.open(env["AGENTS_ROOM_DB"]) as store, store.db.read() as tx:
        assert tx.all("SELECT path, mode FROM leases WHERE session_id != ? ORDER BY path", (other,)) == [
            (str(repo / "x.py"), "exclusive")]
        assert [p for (p,) in tx.all("SELECT path FROM reads")] == [str(repo / "y.py")]
    # The common case stays a read-only look that imports no store package at all.
    renew, said = imported(env, payload("x.py"), ["--edits", "claim"])
    assert said == "" and "agents_room.store" not in renew and not renew & COSTLY
    # ... and opens SQLite without functools and what it imports (a third of the look's imports)
    reread, said = imported(env, payload("y.py", "Read", "PostToolUse"), ["--read"])  # unchanged bytes: a look
    for modules in (renew, reread):
        assert "_sqlite3" in modules and "agents_room.store" not in modules and not modules & FUNCTOOLS, modules


def test_sqlite_opened_without_functools_keeps_its_statement_cache_and_the_real_functools() -> None:
    """The guard's read-only look imports ``_sqlite3`` with a stand-in ``functools`` (its
    statement cache is ``_functools._lru_cache_wrapper`` either way): statements still run,
    repeated and past the cache's size, and a later ``import functools`` is the real module."""
    code = (
        "import sys\n"
        f"sys.path.append({SRC!r})\n"
        "from agents_room.harnesses.editlook import _sqlite_module\n"
        "sqlite = _sqlite_module()\n"
        "assert 'functools' not in sys.modules and 'collections' not in sys.modules, sorted(sys.modules)\n"
        "conn = sqlite.connect(':memory:')\n"
        "conn.execute('CREATE TABLE t (n)')\n"
        "for i in range(300):\n"
        "    conn.execute('INSERT INTO t VALUES (?)', (i,))\n"
        "    conn.execute(f'SELECT {i} + count(*) FROM t').fetchone()\n"
        "assert conn.execute('SELECT count(*), sum(n) FROM t').fetchone() == (300, 44850)\n"
        "import functools\n"
        "assert functools.reduce(lambda a, b: a + b, [1, 2, 3]) == 6 and hasattr(functools, 'wraps')\n"
        "import sqlite3\n"
        "assert sqlite3.connect(':memory:').execute('SELECT 1').fetchone() == (1,)\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stderr


def test_a_file_is_hashed_as_hashlib_hashes_it_without_loading_hashlib(tmp_path: Path) -> None:
    # The guard's process has not loaded hashlib: small files by the built-in SHA-256, larger
    # ones by hashlib; the digests are hashlib's either way (checked here, after the fact).
    sizes = [0, 1, 4095, 1 << 18, (1 << 18) + 7, 512 * 1024, 512 * 1024 + 1, 2 << 20]
    for n in sizes:
        (tmp_path / f"f{n}").write_bytes(os.urandom(n))
    code = f"""
import json, sys
sys.path.append({SRC!r})
from agents_room.harnesses.hook_store import store_modules
digest, = store_modules("digest")
out = []
for n in {sizes!r}:
    small = "hashlib" not in sys.modules
    with open({str(tmp_path)!r} + "/f" + str(n), "rb") as fh:
        out.append([n, digest.sha256_hex(fh), small])
print(json.dumps(out))
"""
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    import hashlib

    got = json.loads(done.stdout)
    assert [(n, h) for n, h, _ in got] == [(n, hashlib.sha256((tmp_path / f"f{n}").read_bytes()).hexdigest())
                                           for n in sizes]
    assert all(small for n, _, small in got if n <= 512 * 1024)  # no hashlib until the first large file
