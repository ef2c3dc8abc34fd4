"""The commit guard's rule on each engine (store/commitguard.py): which live exclusive leases of
other sessions cover a commit's paths, and who the committer is. The hook around it, with real
git commits: tests/test_guard.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agents_room.store import Clock, Store
from agents_room.store.commitguard import CHUNK, blockers, committers


def blocked(store: Store, paths: list[str], own: set[str] | None = None) -> list[tuple[str, str, str]]:
    with store.db.read() as tx:
        return [(b.path, b.lease_path, b.session_id) for b in blockers(tx, paths, own or set())]


def directory_lease(store: Store, sid: str, folder: str, mode: str = "exclusive") -> None:
    """A directory lease row as store/coverage.py defines it (a path ending in /), written
    beside one the store's own claim made."""
    store.lease_claim(sid, folder.rstrip("/") + "/.placeholder", mode=mode)
    with store.db.write() as tx:
        tx.execute("UPDATE leases SET path = ? WHERE session_id = ? AND path = ?",
                   (folder, sid, folder.rstrip("/") + "/.placeholder"))


def test_exclusive_leases_of_others_block_and_nothing_else(store: Store, join: Callable[..., str], repo: Path,
                                                           clock: Clock) -> None:
    a, b, me = join(label="a"), join(label="b"), join(label="me")
    f = {name: str(repo / name) for name in ("x.py", "shared.py", "mine.py", "short.py", "gone.py")}
    store.lease_claim(a, f["x.py"])
    store.lease_claim(a, f["shared.py"], mode="shared")
    store.lease_claim(b, f["shared.py"], mode="shared")
    store.lease_claim(me, f["mine.py"])
    store.lease_claim(b, f["short.py"], ttl_s=5)
    store.lease_claim(b, f["gone.py"])
    store.lease_release(b, f["gone.py"])
    assert blocked(store, list(f.values()), {me}) == [(f["short.py"], f["short.py"], b), (f["x.py"], f["x.py"], a)]
    clock.shift(6)  # short.py's lease has ended; no write has swept it yet
    assert blocked(store, list(f.values()), {me}) == [(f["x.py"], f["x.py"], a)]
    assert blocked(store, [f["mine.py"]]) == [(f["mine.py"], f["mine.py"], me)]  # a person: every lease blocks


def test_a_directory_lease_covers_by_whole_components(store: Store, join: Callable[..., str], repo: Path) -> None:
    a = join(label="a")
    directory_lease(store, a, f"{repo}/src/api/")
    paths = [f"{repo}/src/api/x.py", f"{repo}/src/api/v1/deep.py", f"{repo}/src/apiary.py", f"{repo}/src/api",
             f"{repo}/src/x.py"]
    assert blocked(store, paths) == [(p, f"{repo}/src/api/", a) for p in sorted(paths[:2])]


def test_a_shared_directory_lease_never_blocks(store: Store, join: Callable[..., str], repo: Path) -> None:
    directory_lease(store, join(label="a"), f"{repo}/src/", mode="shared")
    assert blocked(store, [f"{repo}/src/x.py"]) == []


def test_names_that_are_not_utf8_are_covered_by_their_folders(store: Store, join: Callable[..., str],
                                                              repo: Path) -> None:
    a = join(label="a")
    directory_lease(store, a, f"{repo}/src/")
    odd = f"{repo}/src/caf\udce9/x.py"  # os.fsdecode of Latin-1 bytes
    assert blocked(store, [odd]) == [(odd, f"{repo}/src/", a)]


def test_more_paths_than_one_statement_takes(store: Store, join: Callable[..., str], repo: Path) -> None:
    a = join(label="a")
    paths = [f"{repo}/f{i:04}.py" for i in range(3 * CHUNK)]
    store.lease_claim(a, paths[0])
    store.lease_claim(a, paths[-1])
    assert blocked(store, paths) == [(paths[0], paths[0], a), (paths[-1], paths[-1], a)]


def test_the_committer_is_found_by_key_or_by_an_ancestor_pid(store: Store, join: Callable[..., str]) -> None:
    key = "5b7f1c2e-3d4a-4b5c-8d6e-7f8091a2b3c4"
    by_key, by_pid, _other = join(label="k", harness_key=key), join(label="p", pid=4242), join(label="o", pid=4343)
    with store.db.read() as tx:
        assert {c.session_id for c in committers(tx, [key], [1, 4242], None)} == {by_key, by_pid}
        assert committers(tx, [], [], None) == []
        # a pid means nothing on another host: only this host's sessions (and those before hosts were recorded)
        assert {c.session_id for c in committers(tx, [key], [4242], "another-host")} == {by_key}
        assert {c.session_id for c in committers(tx, [], [4242], store.host)} == {by_pid}


@pytest.mark.sqlite_only
def test_the_lookup_searches_the_path_index(store: Store, join: Callable[..., str], repo: Path) -> None:
    """The cost follows the commit's paths, not the number of live leases."""
    seen: list[str] = []
    store.db.conn.set_trace_callback(seen.append)
    blocked(store, [f"{repo}/a.py"])
    store.db.conn.set_trace_callback(None)
    sql = next(s for s in seen if "FROM leases l" in s)
    plan = [r[3] for r in store.db.conn.execute(f"EXPLAIN QUERY PLAN {sql}")]
    assert any("SEARCH l USING PRIMARY KEY (path=?)" in p for p in plan), plan
