"""The edit guard's rule (store/editclaim.py) on both engines: a tool call judged whole, denied by
another session's lease (exclusive or shared, of the file or of a directory above it) or by
CRITICAL drift, else an exclusive lease of each path for the editing session, which is joined
on its behalf when its model never called room_join."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from agents_room.store import InvalidArgument, ProcessScan, Store

KEY_A = str(uuid.uuid4())  # per test process: liveness scans every process of the machine
KEY_B = str(uuid.uuid4())


def edit(store: Store, repo: Path, files: list[str], key: str, **kw: object):
    return store.edit_claim(cwd=str(repo), files=files, harness="claude-code", keys=[key], join_key=key, **kw)


def test_a_first_edit_joins_claims_and_a_second_session_is_denied_naming_the_holder(store: Store, repo: Path) -> None:
    (repo / "x.py").write_text("a = 1\n")
    a = edit(store, repo, ["x.py"], KEY_A)
    assert a.ok and a.joined and [g.path for g in a.granted] == [str(repo / "x.py")]
    assert a.granted[0].mode == "exclusive" and a.granted[0].expires_at - store.clock.now() == pytest.approx(600.0)
    # the session joined on its behalf: in the repo room, tagged, visible to room_who and lease_list
    [member] = store.room_who()
    assert member.session_id == a.session_id and member.tags == ["edit-guard"] and member.harness == "claude-code"
    [lease] = store.lease_list(a.session_id)
    assert lease.session_id == a.session_id and lease.mine
    grant = [e for e in store.events() if e.kind == "lease_grant"][-1]
    assert grant.payload.get("at_edit") is True

    b = edit(store, repo, [str(repo / "x.py")], KEY_B)
    assert not b.ok and b.joined and b.session_id != a.session_id
    assert b.holder.lease.session_id == a.session_id and b.holder.harness == "claude-code"
    for words in (str(repo / "x.py"), a.session_id, "claude-code", "exclusive", "msg_send", f"file:{repo / 'x.py'}",
                  "until 20"):
        assert words in b.reason, (words, b.reason)
    # nothing granted to B; A's second edit renews its own lease (a new token), never denied
    assert [x.session_id for x in store.lease_list(a.session_id)] == [a.session_id]
    again = edit(store, repo, ["x.py"], KEY_A)
    assert again.ok and not again.joined and again.granted[0].token > a.granted[0].token


def test_a_shared_lease_or_a_directory_lease_of_another_session_denies_the_edit(store: Store, repo: Path, join) -> None:
    (repo / "src").mkdir()
    (repo / "src" / "y.py").write_text("y = 1\n")
    other = join(label="careful")
    assert store.lease_claim(other, "src/y.py", mode="shared").ok
    shared = edit(store, repo, ["src/y.py"], KEY_A)
    assert not shared.ok and shared.holder.lease.mode == "shared" and "careful" in shared.reason
    store.lease_release(other, "src/y.py")
    assert store.lease_claim(other, "src/", mode="shared").ok
    below = edit(store, repo, ["src/y.py"], KEY_A)
    assert not below.ok and "directory lease" in below.reason and str(repo / "src") + "/" in below.reason


def test_a_patch_is_judged_whole_when_any_later_file_is_held(store: Store, repo: Path, join) -> None:
    for name in ("a.py", "b.py", "c.py"):
        (repo / name).write_text(f"{name}\n")
    other = join(label="holder")
    assert store.lease_claim(other, "c.py").ok
    whole = edit(store, repo, ["a.py", "b.py", "c.py"], KEY_A)
    assert not whole.ok and whole.path == str(repo / "c.py")
    # nothing of the patch was claimed: a.py and b.py are free for a third session
    assert [x.path for x in store.lease_list(other)] == [str(repo / "c.py")]


def test_check_mode_denies_and_never_claims(store: Store, repo: Path, join) -> None:
    (repo / "x.py").write_text("x\n")
    ok = edit(store, repo, ["x.py"], KEY_A, claim=False)
    assert ok.ok and ok.granted == () and store.lease_list(ok.session_id) == []
    holder = join(label="h")
    store.lease_claim(holder, "x.py")
    assert not edit(store, repo, ["x.py"], KEY_A, claim=False).ok


def test_critical_drift_denies_the_edit_of_a_file_that_changed_under_the_reader(store: Store, repo: Path) -> None:
    (repo / "x.py").write_text("a = 1\n")
    assert store.edit_read(cwd=str(repo), path="x.py", harness="gemini", keys=[KEY_B], join_key=KEY_B)
    a = edit(store, repo, ["x.py"], KEY_A)
    assert a.ok
    (repo / "x.py").write_text("a = 2\n")  # A's edit lands
    store.clock.shift(700)  # A's lease has run out: only the drift stands in B's way
    b = edit(store, repo, ["x.py"], KEY_B)
    assert not b.ok and b.drift is not None and b.drift.severity == "CRITICAL" and b.holder is None
    assert "changed on disk since you read it" in b.reason and a.session_id in b.reason
    # read again: the edit goes through
    store.edit_read(cwd=str(repo), path="x.py", harness="gemini", keys=[KEY_B])
    assert edit(store, repo, ["x.py"], KEY_B).ok


def test_the_models_own_join_is_the_guard_joined_session(store: Store, repo: Path) -> None:
    first = store.edit_claim(cwd=str(repo), files=["n.py"], harness="codex", pids=[4242], harness_pid=4242)
    assert first.ok and first.joined
    own = store.room_join(cwd=str(repo), pid=4242, harness="codex", label="coder")
    assert own.rejoined and own.session_id == first.session_id
    assert [x.session_id for x in store.lease_list(own.session_id)] == [own.session_id]
    # and the other way round: a session the model joined itself is the guard's
    mine = store.room_join(cwd=str(repo), pid=4343, harness="codex", label="early").session_id
    assert store.edit_claim(cwd=str(repo), files=["m.py"], harness="codex", pids=[4343]).session_id == mine


def test_a_holder_whose_agent_is_gone_is_left_and_the_edit_goes_through(store: Store, repo: Path) -> None:
    proc = subprocess.Popen(["sleep", "60"])
    try:
        a = store.edit_claim(cwd=str(repo), files=["x.py"], harness="codex", pids=[proc.pid], harness_pid=proc.pid)
        alive = ProcessScan(frozenset({proc.pid}), frozenset())
        assert not store.edit_claim(cwd=str(repo), files=["x.py"], harness="codex", keys=[KEY_B], join_key=KEY_B,
                                    scan=alive).ok
    finally:
        proc.kill()
        proc.wait()
    gone = ProcessScan(frozenset(), frozenset())
    b = store.edit_claim(cwd=str(repo), files=["x.py"], harness="codex", keys=[KEY_B], join_key=KEY_B, scan=gone)
    assert b.ok and b.session_id != a.session_id
    assert [m.session_id for m in store.room_who()] == [b.session_id]
    assert any(e.kind == "leave" and e.session_id == a.session_id and e.payload["reason"] == "prune"
               for e in store.events())


def test_no_files_is_refused_naming_the_field(store: Store, repo: Path) -> None:
    with pytest.raises(InvalidArgument, match="files"):
        store.edit_claim(cwd=str(repo), files=[], harness="codex", keys=[KEY_A])


def test_the_kernels_spellings_are_one_file_to_the_edit_guard(store: Store, repo: Path, tmp_path: Path, join) -> None:
    """``link/../x.py`` with ``link`` a symlink to a folder elsewhere is that folder's parent's
    ``x.py`` to the kernel (not the repository's), and a hard link is its file under another
    name: another session's lease on either name holds the edit off."""
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "dir").mkdir(parents=True)
    (elsewhere / "x.py").write_text("theirs\n")
    (repo / "x.py").write_text("ours\n")
    (repo / "link").symlink_to(elsewhere / "dir")
    other = join(label="elsewhere")
    assert store.lease_claim(other, str(elsewhere / "x.py")).ok
    mine = edit(store, repo, ["x.py"], KEY_A)  # the repository's own x.py: nobody's
    assert mine.ok
    through = edit(store, repo, ["link/../x.py"], KEY_A)
    assert not through.ok and through.holder.lease.session_id == other, through.reason
    (repo / "hard.py").hardlink_to(elsewhere / "x.py")
    linked = edit(store, repo, ["hard.py"], KEY_A)
    assert not linked.ok and linked.holder.lease.session_id == other, linked.reason


def test_a_lease_taken_at_an_edit_says_so_until_its_holder_claims_the_path_itself(store: Store, repo: Path) -> None:
    """The lease itself is marked (issue 46: visible in lease_list, lease_check and the
    dashboard as taken at an edit): kept by a renewal and by another edit; the holder's own
    lease_claim (on PostgreSQL, the engine's claim function) makes it the model's; an edit of a
    lease the model claimed leaves it the model's."""
    (repo / "x.py").write_text("a = 1\n")
    (repo / "y.py").write_text("b = 1\n")
    a = edit(store, repo, ["x.py"], KEY_A)
    me, x = a.session_id, str(repo / "x.py")

    def marked() -> dict[str, bool]:
        listed = {v.path: v.at_edit for v in store.lease_list(me)}
        assert {v.path: v.at_edit for v in store.overview().leases} == listed  # the dashboard's rows
        return listed

    assert marked() == {x: True}
    state = store.lease_check(me, "x.py")
    assert state.lease.at_edit is True and [h.at_edit for h in state.holders] == [True]
    store.lease_renew(me, "x.py", 900)
    assert marked() == {x: True}
    assert edit(store, repo, ["x.py"], KEY_A).ok
    assert marked() == {x: True}
    # the model claims it itself: an ordinary lease from here on, an edit of it keeps it so
    assert store.lease_claim(me, "x.py").ok
    assert marked() == {x: False} and store.lease_check(me, "x.py").lease.at_edit is False
    assert edit(store, repo, ["x.py"], KEY_A).ok
    assert marked() == {x: False}
    # a lease the model claimed before any edit is never marked by the edit
    assert store.lease_claim(me, "y.py").ok
    assert edit(store, repo, ["y.py"], KEY_A).ok
    assert marked() == {x: False, str(repo / "y.py"): False}
    assert all("at_edit" not in vars(c) for c in (store.lease_claim(me, "x.py").lease, store.lease_renew(me, "x.py")))
