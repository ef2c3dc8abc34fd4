"""The output folder of a run (laid out as docs/history.md says): making it, with real git
repositories and a fresh store, and reading back what the run left in it."""

from __future__ import annotations

import contextlib
import datetime as dt
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..check import history as hist
from ..scenario.scenario import Scenario, to_toml


@dataclass
class Layout:
    out: Path
    store: Path | None = None  # an existing store to run against (``sim run --store``)
    first_seq: int = 0  # the events of this run come after this seq (earlier runs' events before)

    @property
    def db(self) -> Path:
        return self.store or self.out / "store" / "room.db"

    @property
    def history(self) -> Path:
        return self.out / "history"

    @property
    def repos(self) -> Path:
        return self.out / "repos"

    @property
    def samples(self) -> Path:
        return self.out / "samples.jsonl"


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


def prepare(scenario: Scenario, layout: Layout) -> None:
    from agents_room.store import Store

    layout.out.mkdir(parents=True, exist_ok=False)
    for sub in ("store", "history", "agents", "logs", "repos"):
        (layout.out / sub).mkdir()
    (layout.out / "scenario.toml").write_text(to_toml(scenario))
    for repo in scenario.repos:
        make_repo(layout.repos / repo.name, file_names(repo.files))
    # Create the schema once, before the agents race to open the file. A store an earlier run
    # left: its dead sessions are pruned first, and this run's events are those after it.
    with Store.open(layout.db, busy_timeout_s=scenario.run.busy_timeout_s) as store:
        if layout.store is not None:
            store.prune(0)
            layout.first_seq = store.last_seq()


def check_store(path: Path) -> str | None:
    """Why ``sim run --store`` must not use ``path``, or ``None``. Opening it is the check
    (``Store.open`` refuses, untouched, a file that is not a healthy store); a store with
    live sessions belongs to running agents, which the run's messages would reach."""
    from agents_room.store import RoomError, Store

    try:
        with Store.open(path) as store:
            alive = [m for m in store.room_who() if m.liveness == "alive"]
    except RoomError as exc:
        return exc.text
    if alive:
        return f"{path} has {len(alive)} live sessions (agents are using it); run against a store of your own"
    return None


def read_events(db: Path, busy_timeout_s: float, page: int = 10_000, after_seq: int = 0) -> tuple[list[Any], str, int]:
    """Every event (paged by seq), ``PRAGMA integrity_check``, and the WAL size, once the
    agents have exited."""
    from agents_room.store import Store

    events: list[Any] = []
    with Store.open(db, busy_timeout_s=busy_timeout_s) as store:
        while True:
            chunk = store.events(events[-1].seq if events else after_seq, page)
            events.extend(chunk)
            if len(chunk) < page:
                break
        integrity = store.integrity_check()
        wal = store.db.wal_bytes() if hasattr(store.db, "wal_bytes") else 0  # PostgreSQL: no WAL file here
    return events, integrity, wal


def merge_history(layout: Layout) -> list[hist.Record]:
    """The per-process histories merged into ``history.jsonl.gz``, the run's one copy: the
    per-process files are removed once it is written (they hold nothing it does not)."""
    records = hist.read_folder(layout.history)
    hist.settle_dangling(records)
    merged = layout.out / "history.jsonl.gz"
    hist.write_merged(records, merged)
    if len(hist.read(merged)) == len(records):  # written whole: the copies may go
        for part in layout.history.glob("p*.jsonl"):
            part.unlink()
        with contextlib.suppress(OSError):
            layout.history.rmdir()
    return records


def read_samples(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return hist.read(path)
