"""The commit guard's rule on each engine (store/commitguard.py): which live exclusive leases of
other sessions cover a commit's paths, and who the committer is. The hook around it, with real
git commits: tests/test_guard.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agents_room.store import Clock, Store
from agents_room.store.commitguard import CHUNK, Committer, Committers, blockers, committers


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


def ids(found: list[Committer]) -> list[str]:
    return [c.session_id for c in found]


def test_the_committer_is_named_by_a_key_else_the_one_agent_among_the_ancestors(store: Store,
                                                                                join: Callable[..., str]) -> None:
    key, unused = "5b7f1c2e-3d4a-4b5c-8d6e-7f8091a2b3c4", "0c9d8e7f-6a5b-4c3d-8e2f-1a0b9c8d7e6f"
    by_key, by_pid, _other = join(label="k", harness_key=key), join(label="p", pid=4242), join(label="o", pid=4343)
    with store.db.read() as tx:
        # a key in the environment names the committer, whoever else the ancestors hold
        assert committers(tx, [key], [1, 4242], None) == Committers([Committer(by_key, "k", "unknown", True)], [])
        assert committers(tx, [unused, key], [4242], None).mine[0].session_id == by_key  # the first that names one
        # no key names a live session: the one agent among the ancestors
        assert committers(tx, [unused], [1, 4242], None) == Committers([Committer(by_pid, "p", "unknown", False)], [])
        assert committers(tx, [], [], None) == Committers([], [])
        # a pid means nothing on another host: only this host's sessions (and those before hosts were recorded)
        assert ids(committers(tx, [key], [4242], "another-host").mine) == [by_key]
        assert ids(committers(tx, [], [4242], "another-host").mine) == []
        assert ids(committers(tx, [], [4242], store.host).mine) == [by_pid]


def test_several_agents_among_the_ancestors_make_the_commit_nobodys(store: Store, join: Callable[..., str],
                                                                   repo: Path) -> None:
    """One process (an orchestrator) is the harness process of both agents: nothing says which
    commits, so neither is the committer, and both are named as candidates."""
    ka, kb = "1a2b3c4d-0000-4000-8000-00000000000a", "1a2b3c4d-0000-4000-8000-00000000000b"
    alice, bob = join(label="alice", pid=4242, harness_key=ka), join(label="bob", pid=4242, harness_key=kb)
    store.lease_claim(alice, str(repo / "a.py"))
    store.lease_claim(bob, str(repo / "b.py"))
    with store.db.read() as tx:
        both = committers(tx, [], [7, 4242, 1], None)
        assert both.mine == [] and ids(both.candidates) == [alice, bob]
        staged = [str(repo / "a.py"), str(repo / "b.py")]
        assert ids(blockers(tx, staged, {c.session_id for c in both.mine})) == [alice, bob]  # each lease blocks
        assert committers(tx, [ka], [4242], None) == Committers([Committer(alice, "alice", "unknown", True)], [])
        assert ids(committers(tx, [kb], [4242], None).mine) == [bob]
    # two keyless joins of one process cannot be told from two agents: the same, never one guessed
    store.room_leave(bob)
    carol = join(label="carol", pid=4242)
    dave = join(label="dave", pid=4242)
    with store.db.read() as tx:
        assert ids(committers(tx, [], [4242], None).candidates) == [alice, carol, dave]
        assert [c.keyed for c in committers(tx, [], [4242], None).candidates] == [True, False, False]
    store.room_leave(alice)
    store.room_leave(dave)
    with store.db.read() as tx:  # left sessions are no candidates: one agent is left, and it commits
        assert committers(tx, [], [4242], None) == Committers([Committer(carol, "carol", "unknown", False)], [])


def test_an_agent_whose_process_descends_from_the_committers_host_is_a_candidate(
        store: Store, join: Callable[..., str]) -> None:
    """4242 runs alice's server itself and bob's through a launcher (5000, its child), which
    bob's session records: ancestry (the commit's: 7, 4242, 1) finds alice alone; the process
    tree (``lineage``) finds bob beneath 4242 too. An agent elsewhere (6000, under 1) is not."""
    ka, kb = "1a2b3c4d-0000-4000-8000-00000000000a", "1a2b3c4d-0000-4000-8000-00000000000b"
    alice, bob = join(label="alice", pid=4242, harness_key=ka), join(label="bob", pid=5000, harness_key=kb)
    join(label="far", pid=6000)
    tree = {5000: [4242, 1], 6000: [1], 4242: [1]}.get
    with store.db.read() as tx:
        assert ids(committers(tx, [], [7, 4242, 1], None).mine) == [alice]  # ancestry alone: the unsafe guess
        both = committers(tx, [], [7, 4242, 1], None, lambda pid: tree(pid, []))
        assert both.mine == [] and ids(both.candidates) == [alice, bob]
        assert ids(committers(tx, [kb], [7, 4242, 1], None, lambda pid: tree(pid, [])).mine) == [bob]
        # nothing among the ancestors: nobody, and the tree is not walked from init
        assert committers(tx, [], [7, 1], None, lambda pid: tree(pid, [])) == Committers([], [])
    store.room_leave(bob)
    with store.db.read() as tx:
        assert ids(committers(tx, [], [7, 4242, 1], None, lambda pid: tree(pid, [])).mine) == [alice]


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
