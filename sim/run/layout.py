"""The output folder of a run (laid out as docs/history.md says): making it, with real git
repositories and a fresh store, and reading back what the run left in it."""

from __future__ import annotations

import contextlib
import ctypes
import datetime as dt
import json
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..check import history as hist
from ..scenario.scenario import Repo, Scenario, to_toml
from .mounts import BOUND


# What works on the SQLite file only: the WAL cap pins the file's WAL, the garbage store
# damages copies of the file, and clock jumps and stops inside write transactions replace the
# SQLite store's clock and write path in the agent's process.
SQLITE_FAULTS = frozenset({"disk_full", "garbage_store", "clock_jump", "kill_in_write", "pause_write"})


@dataclass
class Layout:
    out: Path
    # An existing store to run against (``sim run --store``): an absolute path of a SQLite
    # file, or a postgresql:// URL (agents_room.store.location).
    store: str | None = None
    first_seq: int = 0  # the events of this run come after this seq (earlier runs' events before)
    mounted: bool = False  # the run's mount namespace is up: [[repos]] bind_mounts' agents work through bound/

    @property
    def db(self) -> str:
        """The store every process of the run opens (``AGENTS_ROOM_DB``): a path or a URL."""
        return self.store or str(self.out / "store" / "room.db")

    @property
    def engine(self) -> str:
        from agents_room.store.location import resolve

        return resolve(self.db).engine

    @property
    def db_file(self) -> Path | None:
        """The SQLite file of the store, or None on PostgreSQL (no file here to stat or copy)."""
        return Path(self.db) if self.engine == "sqlite" else None

    @property
    def history(self) -> Path:
        return self.out / "history"

    @property
    def repos(self) -> Path:
        return self.out / "repos"

    @property
    def samples(self) -> Path:
        return self.out / "samples.jsonl"

    @property
    def spellings(self) -> Path:
        """``spellings.json``: each spelling of the repositories' folder (a symlink the run
        made, or ``repos/`` itself when the run's folder is reached through a symlink) and
        the real path it names, for the checker to judge files by identity."""
        return self.out / "spellings.json"

    def repo_path(self, repo: Repo, position: int) -> Path:
        """Where the agent at ``position`` among ``repo``'s agents finds its repository: the
        agents take its spellings in turn, spelling 0 ``repos/<name>``, spelling k
        ``spelled/<k>/<name>`` through the symlink ``spelled/<k> -> ../repos`` (a link to the
        folder above the checkout, as ``~/work -> /mnt/data/work``); the last ``bind_mounts``
        of them ``bound/<name>``, the repository bind-mounted there (sim/run/mounts.py)."""
        if self.mounted and position >= repo.agents - repo.bind_mounts:
            return self.out / BOUND / repo.name
        spelling = position % repo.spellings
        return self.repos / repo.name if spelling == 0 else self.out / "spelled" / str(spelling) / repo.name


# The spellings of a repository's ``src/`` folder inside it ([[repos]] inner_spellings), each
# made by make_repo: as is; ``alias/``, a symlink to it; ``via/../``, through ``via -> src/pkg``,
# whose ``..`` the kernel applies to ``src/pkg`` (the folder the link leads to), so it names
# ``src/``, while collapsing it as text would name the repository's top.
INNER = ("src/", "alias/", "via/../")


def inner_file(name: str, repo: Repo, position: int) -> str:
    """``name`` (``src/...``) as the agent at ``position`` among ``repo``'s agents spells it."""
    inner = INNER[(position // repo.spellings) % repo.inner_spellings]
    return inner + name[len(INNER[0]):] if name.startswith(INNER[0]) else name


# The name a repository's src/ takes when the run moves it ([[repos]] move_src_at_s).
MOVED = "src.moved"


_RENAME_EXCHANGE = 2  # renameat2(2)'s flag: the two names swap what they name, at once
_AT_FDCWD = -100


def move_src(repo: Path) -> None:
    """``repo/src`` renamed to ``repo/src.moved`` (the same folder: same device and inode) and
    a symlink ``src -> src.moved`` left in its place, as a person moving a folder and
    keeping its old name working would; in one step (``renameat2`` exchanging the folder with
    the link made first at ``src.moved``), so no agent ever finds ``src`` missing between a
    rename and a symlink (a claim there would name a file of no folder). Where the kernel or
    the file system cannot exchange, the rename and then the symlink."""
    real = os.path.realpath(repo)
    moved, src = os.path.join(real, MOVED), os.path.join(real, "src")
    # names itself until the exchange (nothing follows it meanwhile); relative, so a name of the
    # repository through a bind mount (bound/<name>, sim/run/mounts.py) stays that name after it
    os.symlink(MOVED, moved)
    libc = ctypes.CDLL(None, use_errno=True)
    exchange = getattr(libc, "renameat2", None)
    if exchange is not None and exchange(_AT_FDCWD, src.encode(), _AT_FDCWD, moved.encode(), _RENAME_EXCHANGE) == 0:
        return
    os.unlink(moved)
    os.rename(src, moved)
    os.symlink(MOVED, src)


def default_out(scenario: Scenario, base: Path = Path("reports")) -> Path:
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return base / f"{scenario.name}-{stamp}"


def file_names(n: int) -> list[str]:
    return [f"src/mod_{i:02d}.py" for i in range(n)]


def make_repo(path: Path, files: list[str]) -> None:
    """A real git repository with real, committed files."""
    path.mkdir(parents=True)
    for name in files:
        f = path / name
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f"# {name}\nVALUE = 0\n")
    git = ["git", "-C", str(path), "-c", "user.name=sim", "-c", "user.email=sim@localhost", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "initial files"], check=True)
    # INNER's folders, untracked (a checkout's own symlinks): src/pkg for via's .. to climb out of
    (path / "src" / "pkg").mkdir(parents=True, exist_ok=True)
    (path / "alias").symlink_to("src")
    (path / "via").symlink_to(os.path.join("src", "pkg"))


def prepare(scenario: Scenario, layout: Layout) -> None:
    from agents_room.store import Store

    layout.out.mkdir(parents=True, exist_ok=False)
    for sub in ("store", "history", "agents", "logs", "repos"):
        (layout.out / sub).mkdir()
    (layout.out / "scenario.toml").write_text(to_toml(scenario))
    for repo in scenario.repos:
        make_repo(layout.repos / repo.name, file_names(repo.files))
    inner = [r.name for r in scenario.repos if r.inner_spellings > 1]
    moved = [r.name for r in scenario.repos if r.move_src_at_s > 0]
    bound = any(r.bind_mounts for r in scenario.repos)
    make_spellings(layout, max(r.spellings for r in scenario.repos), inner, moved, bound)
    # Create the schema once, before the agents race to open the file. A store an earlier run
    # left: its dead sessions are pruned first, and this run's events are those after it.
    with Store.open(layout.db, busy_timeout_s=scenario.run.busy_timeout_s) as store:
        if layout.store is not None:
            store.prune(0)
            layout.first_seq = store.last_seq()


def make_spellings(layout: Layout, spellings: int, repos: Sequence[str] = (),
                   moved: Sequence[str] = (), bound: bool = False) -> dict[str, str]:
    """The symlinks ``spelled/1`` .. ``spelled/<spellings - 1>`` to ``repos/`` (relative: the
    run's folder may move), and ``spellings.json`` mapping every spelling of ``repos`` to its
    real path, and every spelling of ``src/`` inside each of ``repos`` (those with
    inner_spellings; INNER) and ``src.moved/`` of each of ``moved`` (move_src) under each of
    those to the real ``src``; with ``bound``, ``bound/`` (the mount points of [[repos]]
    bind_mounts, each its repository in the run's mount namespace) as ``repos/``. The checker
    reads the file, not the links or mounts: it judges the run's files wherever they are."""
    real = os.path.realpath(layout.repos)
    names = {str(layout.repos): real}
    for k in range(1, spellings):
        link = layout.out / "spelled" / str(k)
        link.parent.mkdir(exist_ok=True)
        os.symlink(os.path.join("..", layout.repos.name), link)
        names[str(link)] = real
    if bound:  # bound/<name> is repos/<name> in the run's mount namespace: one folder, two names
        names[str(layout.out / BOUND)] = real
    for folder in list(names):
        for repo in repos:
            for inner in INNER[1:]:
                names[f"{folder}/{repo}/{inner.rstrip('/')}"] = f"{real}/{repo}/src"
            names[f"{folder}/{repo}/via"] = f"{real}/{repo}/src/pkg"  # via/ itself: a workload's "whole repo"
        for repo in moved:  # after the move the store names src/ by its new real path: judged by the old
            names[f"{folder}/{repo}/{MOVED}"] = f"{real}/{repo}/src"
    mapping = {spelled: named for spelled, named in names.items() if spelled != named}
    layout.spellings.write_text(json.dumps(mapping, indent=1) + "\n")
    return mapping


def read_spellings(layout: Layout) -> dict[str, str]:
    """``spellings.json`` (spelled folder -> real folder); empty for a run made before it existed."""
    if not layout.spellings.exists():
        return {}
    return dict(json.loads(layout.spellings.read_text()))


def store_location(text: str | Path) -> str:
    """``sim run --store``'s value as every process of the run opens it: a postgresql://
    (or postgres://) URL as given, a path made absolute (the agents run in their own folders).
    Raises ``agents_room.store.StoreError`` for another scheme, in one line."""
    from agents_room.store.location import POSTGRES_SCHEMES, resolve, scheme

    text = str(text)
    if scheme(text) in POSTGRES_SCHEMES:
        return resolve(text, source="--store").target
    if scheme(text) is None and text:
        text = str(Path(text).expanduser().absolute())
    return resolve(text, source="--store").target


def shown(db: str) -> str:
    """The store as it may be printed: a URL without its password."""
    from agents_room.store.location import redact

    return redact(db)


def check_store(db: str, faults: Sequence[str] = ()) -> str | None:
    """Why ``sim run --store`` must not use ``db`` (a path or a URL), or ``None``. Opening
    it is the check (``Store.open`` refuses, untouched, a file that is not a healthy store, or
    a PostgreSQL schema holding other tables); a store with live sessions belongs to running
    agents, which the run's messages would reach. ``faults``: the scenario's fault kinds,
    some of which act on the SQLite file only."""
    from agents_room.store import RoomError, Store

    sqlite_only = sorted(set(faults) & SQLITE_FAULTS)
    if sqlite_only and Layout(Path("."), db).engine != "sqlite":
        return (f"[faults.{sqlite_only[0]}] acts on a SQLite store file; {shown(db)} is PostgreSQL "
                f"(faults there: kill, pause_holder)")
    try:
        with Store.open(db) as store:
            alive = [m for m in store.room_who() if m.liveness == "alive"]
    except RoomError as exc:
        return exc.text
    if alive:
        return f"{shown(db)} has {len(alive)} live sessions (agents are using it); run against a store of your own"
    return None


def read_events(db: str, busy_timeout_s: float, page: int = 10_000, after_seq: int = 0) -> tuple[list[Any], str, int]:
    """Every event (paged by seq), the store's integrity check, and the WAL size (0 on
    PostgreSQL, whose log is the server's), once the agents have exited."""
    from agents_room.store import Store

    events: list[Any] = []
    with Store.open(db, busy_timeout_s=busy_timeout_s) as store:
        while True:
            chunk = store.events(events[-1].seq if events else after_seq, page)
            events.extend(chunk)
            if len(chunk) < page:
                break
        integrity = store.integrity_check()
        wal_bytes = getattr(store.db, "wal_bytes", None)
        wal = wal_bytes() if wal_bytes else 0
    return events, integrity, wal


def merge_history(layout: Layout) -> list[hist.Record]:
    """The per-process histories merged into ``history.jsonl.gz``, the run's one copy: the
    per-process files are removed once it is written (they hold nothing it does not)."""
    records = hist.read_folder(layout.history)
    hist.settle_dangling(records)
    merged = layout.out / "history.jsonl.gz"
    if hist.write_merged(records, merged):  # read back as written: the copies may go
        for part in layout.history.glob("p*.jsonl"):
            part.unlink()
        with contextlib.suppress(OSError):
            layout.history.rmdir()
    return records


def read_samples(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return hist.read(path)
