"""One canonical path per file (store/paths.py), on both engines: one repository reached by two
spellings (``<d>/real/repo`` and ``<d>/link/repo``, ``link -> real``) is one set of files to
every path-keyed rule; distinct work trees and hard links stay distinct; rows written under a
spelling before paths were canonical keep working while they live."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from agents_room.store import Store, leases, messages, paths
from agents_room.store.commitguard import blockers
from agents_room.store.errors import InvalidArgument
from .conftest import rows

KEY = str(uuid.uuid4())  # per test process: liveness scans every process of the machine


@pytest.fixture
def real(tmp_path: Path, make_repo) -> Path:
    """``<d>/real/repo``, a git repository with ``src/x.py`` and ``lib/y.py``, also reached as
    ``<d>/link/repo`` (``<d>/link -> <d>/real``)."""
    top = Path(os.path.realpath(tmp_path))
    repo = make_repo(top / "real" / "repo")
    (repo / "src").mkdir()
    (repo / "src" / "x.py").write_text("x = 1\n")
    (repo / "lib").mkdir()
    (repo / "lib" / "y.py").write_text("y = 1\n")
    (top / "link").symlink_to(top / "real")
    return repo


@pytest.fixture
def link(real: Path) -> Path:
    return real.parent.parent / "link" / "repo"


# -- the rule itself ----------------------------------------------------------------------------


def test_the_canonical_path_resolves_what_exists_and_keeps_what_does_not(real: Path, link: Path) -> None:
    assert paths.canonical(str(link / "src" / "x.py")) == str(real / "src" / "x.py")
    # a file not created yet under a symlinked folder lands on the real folder
    assert paths.canonical(str(link / "src" / "new" / "z.py")) == str(real / "src" / "new" / "z.py")
    assert paths.canonical(str(link / "src") + "/") == str(real / "src") + "/"  # a directory lease's "/" kept
    assert paths.canonical("/") == "/"
    loop = real / "loop"
    loop.symlink_to(loop)
    assert paths.canonical(str(loop / "a.py")).startswith(str(real))  # a loop is left as it is, not raised
    # an absolute glob's literal folders are resolved; a relative glob is the holder's business
    assert paths.glob(f"{link}/src/*.py") == f"{real}/src/*.py"
    assert paths.glob(f"{link}/src/x.py") == f"{real}/src/x.py"
    assert paths.glob(f"{link}/lib/") == f"{real}/lib/"
    assert paths.glob("src/*.py") == "src/*.py" and paths.glob("/*/x.py") == "/*/x.py"
    assert paths.named("src/x.py", "/a/src/x.py", "/a/src/x.py") == "/a/src/x.py"
    assert paths.named("/l/x.py", "/l/x.py", "/r/x.py") == "/l/x.py (the same file as /r/x.py)"


def test_the_canonical_path_is_what_realpath_says_of_every_shape(real: Path, link: Path) -> None:
    """paths.canonical asks the kernel (an O_PATH descriptor's /proc link) where it can: it must
    agree with os.path.realpath on every shape of path, existing or not."""
    top = real.parent.parent
    (real / "src" / "alias.py").symlink_to("x.py")
    (real / "src" / "dangling").symlink_to("nowhere")
    (top / "loop").symlink_to(top / "loop")
    os.mkfifo(real / "fifo")
    shapes = ["/", str(top), str(link), f"{link}/src/x.py", f"{link}/src/alias.py", f"{link}/src/dangling",
              f"{link}/src/dangling/z.py", f"{link}/src/new/deep/z.py", f"{link}/src/x.py/under",
              f"{top}/loop/a.py", f"{real}/fifo", f"{top}/nothing", "/proc/self"]
    assert [paths.canonical(p) for p in shapes] == [os.path.realpath(p) for p in shapes]
    assert paths.canonical(f"{link}/src/") == f"{real}/src/"
    # beneath a folder known canonical (a session's cwd), only what lies beneath is looked up
    (real / "src" / "inner").symlink_to(top / "real" / "repo" / "lib")
    below = [f"{real}/src/x.py", f"{real}/src/alias.py", f"{real}/src/dangling", f"{real}/src/new/z.py",
             f"{real}/src/x.py/under", f"{real}/src/inner/y.py", f"{real}/src/inner/new.py", f"{real}/fifo"]
    assert [paths.canonical(p, str(real)) for p in below] == [os.path.realpath(p) for p in below]
    assert paths.found_canonical(str(real)) and not paths.found_canonical(str(link))


# -- two spellings of one repository ------------------------------------------------------------------


def test_cwds_spelled_two_ways_are_one_repository(store: Store, real: Path, link: Path) -> None:
    a = store.room_join(cwd=str(real), pid=None, label="alice")
    b = store.room_join(cwd=str(link), pid=None, label="bob")
    assert a.rooms == b.rooms == ["repo:repo"]
    assert {m.session_id: m.cwd for m in store.room_who()} == {a.session_id: str(real), b.session_id: str(real)}
    # a folder symlinked under another name is still the repository it points at
    alias = real.parent.parent / "alias"
    alias.symlink_to(real)
    assert store.room_join(cwd=str(alias / "src"), pid=None).rooms == ["repo:repo"]


def test_the_second_exclusive_claim_is_denied_naming_the_first(store: Store, real: Path, link: Path) -> None:
    a = store.room_join(cwd=str(real), pid=None, label="alice").session_id
    b = store.room_join(cwd=str(link), pid=None, label="bob").session_id
    got = store.lease_claim(a, "src/x.py")
    assert got.ok and got.lease.path == str(real / "src" / "x.py")
    asked = str(link / "src" / "x.py")
    for path in ("src/x.py", asked):
        denied = store.lease_claim(b, path)
        assert not denied.ok and denied.holder.session_id == a and "alice" in denied.reason
    assert denied.reason.startswith(f"{asked} (the same file as {real / 'src' / 'x.py'}) is held exclusive by {a}")
    # every reader agrees, whichever spelling it is asked with
    for path in ("src/x.py", asked, str(real / "src" / "x.py")):
        state = store.lease_check(b, path)
        assert not state.free and state.lease.session_id == a and state.lease.path == str(real / "src" / "x.py")
    assert [x.path for x in store.lease_list(b)] == [str(real / "src" / "x.py")]
    assert store.msg_send(b, f"file:{link}/src/*.py", body="soon?").recipients == [a]
    assert store.msg_send(b, f"file:{asked}", body="soon?").recipients == [a]
    assert store.msg_send(b, "file:src/x.py", body="soon?").recipients == [a]
    # renewed and released through the link by its holder: one lease, one file
    assert store.lease_renew(a, str(link / "src" / "x.py")).path == str(real / "src" / "x.py")
    store.lease_release(a, asked)
    assert store.lease_claim(b, asked).ok and store.lease_check(a, "src/x.py").lease.session_id == b


def test_directory_leases_cover_across_spellings(store: Store, real: Path, link: Path) -> None:
    a = store.room_join(cwd=str(real), pid=None, label="alice").session_id
    b = store.room_join(cwd=str(link), pid=None, label="bob").session_id
    granted = store.lease_claim(b, f"{link}/lib")  # an existing directory, named through the link
    assert granted.ok and granted.lease.path == f"{real}/lib/"
    denied = store.lease_claim(a, "lib/y.py")
    assert not denied.ok and denied.holder.session_id == b and f"is beneath {real}/lib/" in denied.reason
    assert store.lease_check(a, f"{link}/lib/new.py").lease.path == f"{real}/lib/"
    assert store.msg_send(a, f"file:{link}/lib/y.py").recipients == [b]
    # a claim of a directory above a file leased through the other spelling
    assert store.lease_claim(a, "src/x.py").ok
    above = store.lease_claim(b, f"{link}/src/")
    assert not above.ok and above.holder.session_id == a


def test_drift_baselines_agree_across_spellings(store: Store, real: Path, link: Path) -> None:
    a = store.room_join(cwd=str(real), pid=None, label="alice").session_id
    b = store.room_join(cwd=str(link), pid=None, label="bob").session_id
    store.note_read(b, str(link / "src" / "x.py"))
    assert store.drift_check(b, str(real / "src" / "x.py")).severity == "SAFE"
    assert store.lease_claim(a, "src/x.py").ok
    (real / "src" / "x.py").write_text("x = 2\n")
    drift = store.drift_check(b, str(link / "src" / "x.py"))
    assert (drift.severity, drift.holder, drift.baseline, drift.path) == ("CRITICAL", a, True, str(real / "src" / "x.py"))


def test_distinct_work_trees_stay_distinct(store: Store, real: Path, tmp_path: Path, make_repo) -> None:
    subprocess.run(["git", "-C", str(real), "-c", "user.name=t", "-c", "user.email=t@example.org",
                    "commit", "-q", "--allow-empty", "-m", "first"], check=True)
    tree = real.parent / "tree"
    subprocess.run(["git", "-C", str(real), "worktree", "add", "-q", str(tree)], check=True, capture_output=True)
    clone = make_repo(Path(os.path.realpath(tmp_path)) / "clone" / "repo")
    (clone / "src").mkdir()
    (clone / "src" / "x.py").write_text("x = 1\n")
    ids = [store.room_join(cwd=str(cwd), pid=None).session_id for cwd in (real, tree, clone)]
    granted = [store.lease_claim(sid, "src/x.py") for sid in ids]
    assert all(g.ok for g in granted)
    assert len({g.lease.path for g in granted}) == 3


def test_hard_links_are_one_file(store: Store, real: Path) -> None:
    """docs/decisions.md: two links to one inode are two paths and one file: a lease of one is
    in the way of a claim of the other (device and inode, recorded with the lease)."""
    os.link(real / "src" / "x.py", real / "src" / "hard.py")
    assert os.stat(real / "src" / "x.py").st_ino == os.stat(real / "src" / "hard.py").st_ino
    a = store.room_join(cwd=str(real), pid=None).session_id
    b = store.room_join(cwd=str(real), pid=None).session_id
    assert store.lease_claim(a, "src/x.py").ok
    held = store.lease_claim(b, "src/hard.py")
    assert not held.ok and held.holder.session_id == a and held.holder.path == str(real / "src" / "x.py")
    assert held.reason.startswith(f"{real}/src/hard.py is, by device and inode, the file or beneath the folder of "
                                  f"{real}/src/x.py, which is held exclusive by {a}")
    assert store.lease_check(b, "src/hard.py").lease.session_id == a
    assert store.lease_claim(b, "src/hard.py", mode="shared").holder.session_id == a
    # its holder's claim of the other link: a lease of that name too (a name of its own, not a rename)
    assert store.lease_claim(a, "src/hard.py").reason == "granted"
    assert store.lease_release(a, "src/hard.py") is None and store.lease_check(b, "src/x.py").lease.session_id == a
    # x.py replaced by a save-by-rename: its name leads to another inode, and the lease with it;
    # hard.py keeps the old inode, which the lease recorded but no longer names
    (real / "src" / "x.py.tmp").write_text("x = 2\n")
    os.replace(real / "src" / "x.py.tmp", real / "src" / "x.py")
    assert store.lease_claim(b, "src/hard.py").ok
    assert store.lease_claim(b, "src/x.py").holder.session_id == a


# -- rows written before paths were canonical -----------------------------------------------------------


def _old_lease(store: Store, sid: str, path: str, ttl_s: float = 600.0) -> None:
    """A lease as a store keyed by spelling wrote it: under the path as the caller spelled it."""
    with store.db.write() as tx:
        token = leases._next_token(tx)
        tx.execute("INSERT INTO leases (path, session_id, mode, token, ttl_s, acquired_at, expires_at) "
                   "VALUES (?, ?, 'exclusive', ?, ?, ?, ?)", (path, sid, token, ttl_s, tx.now, tx.now + ttl_s))
        tx.log("lease_grant", sid, path, mode="exclusive", token=token, expires_at=tx.now + ttl_s, previous_mode=None)


def test_an_old_lease_under_a_spelling_keeps_working_while_it_lives(store: Store, real: Path, link: Path) -> None:
    sid = store.room_join(cwd=str(link), pid=None, label="old", harness_key=KEY).session_id
    with store.db.write() as tx:  # its session as such a store joined it: the cwd as given
        tx.execute("UPDATE sessions SET cwd = ? WHERE id = ?", (str(link), sid))
    spelled = str(link / "src" / "x.py")
    _old_lease(store, sid, spelled)
    other = store.room_join(cwd=str(real), pid=None, label="new").session_id
    # another caller spelling it as the holder did is still kept off it, and sees it
    denied = store.lease_claim(other, spelled)
    assert not denied.ok and denied.holder.session_id == sid
    assert store.lease_check(other, spelled).lease.session_id == sid
    assert store.msg_send(other, f"file:{spelled}").recipients == [sid]
    # its holder renews it by the relative name it used: the row it has, not a new one
    renewed = store.lease_renew(sid, "src/x.py")
    assert renewed.path == spelled
    # rejoined (its cwd now canonical), it still releases it by that name
    assert store.room_join(cwd=str(link), pid=None, harness_key=KEY).session_id == sid
    assert rows(store, "SELECT cwd FROM sessions WHERE id = ?", (sid,)) == [(str(real),)]
    assert store.lease_renew(sid, "src/x.py").path == spelled
    store.lease_release(sid, "src/x.py")
    assert rows(store, "SELECT path FROM leases") == []
    assert store.lease_claim(other, "src/x.py").ok


def test_an_old_read_baseline_under_a_spelling_is_found(store: Store, real: Path, link: Path) -> None:
    sid = store.room_join(cwd=str(link), pid=None).session_id
    spelled = str(link / "src" / "x.py")
    store.note_read(sid, "src/x.py")
    with store.db.write() as tx:  # re-keyed as a store keyed by spelling wrote it
        tx.execute("UPDATE reads SET path = ? WHERE session_id = ?", (spelled, sid))
    assert store.drift_check(sid, "src/x.py").baseline is True
    assert store.drift_check(sid, str(real / "src" / "x.py")).severity == "SAFE"
    (real / "src" / "x.py").write_text("x = 2\n")
    drift = store.drift_check(sid, "src/x.py")
    assert (drift.severity, drift.baseline) == ("MINOR", True)


# -- `..` as the kernel reads it ------------------------------------------------------------------------


@pytest.fixture
def beyond(real: Path) -> Path:
    """``<d>/elsewhere``, with ``x.py`` and ``dir/``, reached from the repository through
    ``<repo>/ext -> <d>/elsewhere/dir``: ``<repo>/ext/../x.py`` is ``<d>/elsewhere/x.py`` to
    the kernel, while collapsing ``ext/..`` as text makes it ``<repo>/x.py``, another file."""
    top = real.parent.parent
    (top / "elsewhere" / "dir").mkdir(parents=True)
    (top / "elsewhere" / "x.py").write_text("e = 1\n")
    (real / "x.py").write_text("r = 1\n")
    (real / "ext").symlink_to(top / "elsewhere" / "dir")
    return top / "elsewhere"


def test_dotdot_applies_to_the_resolved_folder(real: Path, beyond: Path) -> None:
    ext = f"{real}/ext"
    assert paths.absolute("ext/../x.py", str(real)) == f"{ext}/../x.py"  # kept for the kernel's rule
    assert paths.absolute("src/./x.py", str(real)) == os.path.abspath(f"{real}/src/x.py")
    shapes = [f"{ext}/../x.py", f"{ext}/..", f"{ext}/../new/a/../b.py", f"{real}/nope/../ext/../x.py",
              f"{real}/src/../ext/../dir/", f"{ext}/../../real/repo/src/x.py"]
    assert [paths.canonical(p) for p in shapes] == [
        f"{beyond}/x.py", str(beyond), f"{beyond}/new/b.py", f"{beyond}/x.py", f"{beyond}/dir/",
        f"{real}/src/x.py"]
    # beneath a canonical cwd too: the fast path never walks a `..`
    assert paths.canonical(f"{ext}/../x.py", str(real)) == f"{beyond}/x.py"
    assert paths.glob(f"{ext}/../*.py") == f"{beyond}/*.py"
    assert paths.canonical(f"{real}/src/../x.py") == f"{real}/x.py"  # no symlink: as text, as ever


def test_dotdot_after_a_symlinked_folder_is_one_file_to_every_rule(store: Store, real: Path, beyond: Path) -> None:
    a = store.room_join(cwd=str(real), pid=None, label="alice", room="team").session_id
    b = store.room_join(cwd=str(beyond), pid=None, label="bob", room="team").session_id
    assert store.lease_claim(b, "x.py").lease.path == f"{beyond}/x.py"
    for spelled in ("ext/../x.py", f"{real}/ext/../x.py"):
        denied = store.lease_claim(a, spelled)
        assert not denied.ok and denied.holder.session_id == b
        assert store.lease_check(a, spelled).lease.session_id == b
    assert denied.reason.startswith(f"{real}/ext/../x.py (the same file as {beyond}/x.py) is held exclusive by {b}")
    assert store.msg_send(a, f"file:{real}/ext/../x.py").recipients == [b]
    assert store.msg_send(a, f"file:{real}/ext/../*.py").recipients == [b]
    store.note_read(a, "ext/../x.py")
    (beyond / "x.py").write_text("e = 2\n")
    drift = store.drift_check(a, "ext/../x.py")
    assert (drift.severity, drift.holder, drift.path) == ("CRITICAL", b, f"{beyond}/x.py")
    # the file the text would name is another file, free
    assert store.lease_claim(a, "x.py").lease.path == f"{real}/x.py"
    # a directory lease spelled through the link, and the commit guard
    store.lease_release(b, "x.py")
    assert store.lease_claim(a, "ext/..").lease.path == f"{beyond}/"
    assert store.lease_check(b, "x.py").lease.path == f"{beyond}/"
    with store.db.read() as tx:
        assert [x.session_id for x in blockers(tx, [f"{beyond}/x.py"], {b})] == [a]
    # a session joining with such a cwd is in the folder the kernel says
    c = store.room_join(cwd=f"{real}/ext/..", pid=None, label="carol")
    assert c.rooms == ["repo:elsewhere"]  # b's room, not the repository's
    assert {m.session_id: m.cwd for m in store.room_who()}[c.session_id] == str(beyond)
    assert store.lease_claim(c.session_id, "dir/z.py").holder.session_id == a


def test_a_trailing_slash_on_a_file_is_refused_naming_it(store: Store, real: Path) -> None:
    a = store.room_join(cwd=str(real), pid=None, label="alice").session_id
    b = store.room_join(cwd=str(real), pid=None, label="bob").session_id
    assert store.lease_claim(a, "src/x.py").ok
    for call in (store.lease_claim, store.lease_check, store.note_read, store.drift_check):
        with pytest.raises(InvalidArgument, match=f"path: src/x.py/ ends with / but {real}/src/x.py is a file"):
            call(b, "src/x.py/")
    with pytest.raises(InvalidArgument, match=f"to: file:{real}/src/x.py/ ends with / but {real}/src/x.py is a file"):
        store.msg_send(b, f"file:{real}/src/x.py/")
    assert rows(store, "SELECT path, session_id FROM leases") == [(f"{real}/src/x.py", a)]
    assert store.lease_claim(b, "src/").holder.session_id == a  # a folder's / is what it was
    assert store.lease_claim(b, "src/new/").ok  # a folder not created yet: nothing says it is a file


# -- a lease follows its file while it lives ---------------------------------------------------------


def test_a_lease_follows_its_file_when_a_folder_above_is_renamed(store: Store, real: Path) -> None:
    """``src`` renamed to ``src2`` and a symlink left in its place (``lib`` too), under live
    leases of a file, a file not created yet and a directory: every other caller, whichever
    name it uses now, meets them (the identity, device and inode, recorded with each lease)."""
    a = store.room_join(cwd=str(real), pid=None, label="alice").session_id
    b = store.room_join(cwd=str(real), pid=None, label="bob").session_id
    for path in ("src/x.py", "src/new.py", "lib/"):
        assert store.lease_claim(a, path).ok
    for name in ("src", "lib"):
        os.rename(real / name, real / f"{name}2")
        (real / name).symlink_to(f"{name}2")
    for spelled, held in (("src/x.py", "src/x.py"), ("src2/x.py", "src/x.py"), ("src/new.py", "src/new.py"),
                          ("lib/y.py", "lib/"), ("lib2/sub/z.py", "lib/"), ("lib2/", "lib/")):
        denied = store.lease_claim(b, spelled, mode="shared")
        assert not denied.ok and (denied.holder.session_id, denied.holder.path) == (a, f"{real}/{held}"), spelled
        assert store.lease_check(b, spelled).lease.path == f"{real}/{held}", spelled
    store.note_read(b, "src2/x.py")
    (real / "src2" / "x.py").write_text("x = 2\n")
    drift = store.drift_check(b, "src/x.py")
    assert (drift.severity, drift.holder) == ("CRITICAL", a)
    staged = [f"{real}/src2/x.py", f"{real}/lib2/y.py", f"{real}/src2/other.py"]
    with store.db.read() as tx:
        assert [(x.path, x.lease_path, x.session_id) for x in blockers(tx, staged, {b}, paths.identities, paths.same)] == [
            (f"{real}/lib2/y.py", f"{real}/lib/", a), (f"{real}/src2/x.py", f"{real}/src/x.py", a)]
        assert blockers(tx, staged, {b}) == []  # by path alone: what the guard saw before
    # its holder still renews and releases them by their old names
    assert store.lease_renew(a, f"{real}/src/x.py").path == f"{real}/src/x.py"


def test_an_inode_passed_from_file_to_file_is_never_a_lease_of_both(store: Store, real: Path) -> None:
    """Two files saved by rename in turn pass one inode back and forth (the kernel hands a freed
    inode out again at once), while a claim's identities, taken before its transaction, age.
    Made here by a rename: ``src/p.py``'s identities are taken, then its inode moves to
    ``src/y.py``, which A claims, and a new ``src/p.py`` is written. B's claim of ``src/p.py``
    and the guard, judged with the identities of a moment ago, see that A's lease is of
    another file now; the same file under two names at once stays one."""
    a = store.room_join(cwd=str(real), pid=None, label="alice").session_id
    b = store.room_join(cwd=str(real), pid=None, label="bob").session_id
    p, y = real / "src" / "p.py", real / "src" / "y.py"
    p.write_text("p = 1\n")
    aged = tuple(paths.identities(str(p), str(real)))
    os.rename(p, y)
    assert store.lease_claim(a, "src/y.py").ok
    p.write_text("p = 2\n")
    assert os.stat(p).st_ino != os.stat(y).st_ino
    with store.db.write() as tx:
        got = leases.claim(tx, store._session(tx, b, touch=False), str(p), 60.0, "exclusive", idents=aged)
    assert got.ok, got.reason
    with store.db.read() as tx:
        assert blockers(tx, [str(p)], {b}, lambda _: list(aged), paths.same) == []
    os.link(y, real / "src" / "z.py")
    held = store.lease_claim(b, "src/z.py")
    assert not held.ok and held.holder.session_id == a
    with store.db.read() as tx:
        assert [x.session_id for x in blockers(tx, [f"{real}/src/z.py"], {b}, paths.identities, paths.same)] == [a]


def test_a_lease_renamed_under_its_holder_is_one_lease_to_everyone(store: Store, real: Path) -> None:
    """``src`` moved to ``src2`` and a symlink left in its place while alice holds ``src/x.py``,
    ``src/new.py`` (not created yet) and bob ``lib/``: alice's claim by a name that leads there
    now is a re-claim of her lease, which follows the file (one row, her token renewed, never
    a second lease of one file); another's claim of the moved folder meets the leases beneath
    it taken under the old name; a ``file:`` send by the new name reaches their holders."""
    a = store.room_join(cwd=str(real), pid=None, label="alice").session_id
    b = store.room_join(cwd=str(real), pid=None, label="bob").session_id
    first = {p: store.lease_claim(a, p).lease for p in ("src/x.py", "src/new.py")}
    os.rename(real / "src", real / "src2")
    (real / "src").symlink_to(real / "src2")
    for spelled in ("src2/", "src/", "./"):  # the moved folder by either name, and the repository
        denied = store.lease_claim(b, spelled, mode="shared")
        assert not denied.ok and denied.holder.session_id == a, spelled
        assert {h.session_id for h in store.lease_check(b, spelled).holders} == {a}, spelled
    assert "covers, by the name it has now," in store.lease_claim(b, "src2/").reason
    assert store.lease_claim(b, "lib/").ok  # beside them, nothing beneath it
    for to in (f"{real}/src2/x.py", "src2/x.py", f"{real}/src/x.py", "src/x.py"):  # alice's lease: still src/x.py
        assert store.msg_send(b, f"file:{to}", body="soon?").recipients == [a], to
        with store.db.write() as tx:  # matched in the transaction too (a lease taken after the snapshot)
            assert messages.resolve_selector(tx, store._session(tx, b, touch=False), f"file:{to}", "") == [a], to
    for spelled, old in (("src/x.py", "src/x.py"), ("src2/new.py", "src/new.py")):
        again = store.lease_claim(a, spelled, mode="shared")
        assert again.ok and again.reason == "changed from exclusive to shared", spelled
        assert again.lease.token > first[old].token and again.lease.acquired_at == first[old].acquired_at
    assert rows(store, "SELECT path, mode FROM leases WHERE session_id = ? ORDER BY path", (a,)) == [
        (f"{real}/src2/new.py", "shared"), (f"{real}/src2/x.py", "shared")]
    with store.db.read() as tx:
        grants = [e for e in tx.all("SELECT path, payload FROM events WHERE kind = 'lease_grant' ORDER BY seq")]
    assert f'"renamed_from": "{real}/src/x.py"' in grants[-2][1].replace('":"', '": "')
    for to in (f"{real}/src/x.py", "src/x.py"):  # alice's lease now src2/x.py; the old name still leads there
        assert store.msg_send(b, f"file:{to}", body="soon?").recipients == [a], to
    assert store.msg_send(b, "file:lib/y.py", body="mine").recipients == []  # bob's own lease: nobody else
    assert store.lease_release(a, "src/new.py") is None  # by either name, the one lease
    assert rows(store, "SELECT count(*) FROM leases WHERE session_id = ?", (a,)) == [(1,)]


def test_a_file_send_by_the_new_name_reaches_a_lease_of_the_renamed_folder_itself(store: Store, real: Path) -> None:
    """Alice holds the directory ``src/`` itself when ``src`` is moved to ``src2`` (a symlink left
    in its place): the folder her lease names is the one renamed, its last name, so a ``file:``
    send by a file's new name (or through the symlink) must resolve her lease's own name too
    (found by scenarios/moved.toml: SE3, a holder of ``src/`` missed by a send just after the move)."""
    a = store.room_join(cwd=str(real), pid=None, label="alice").session_id
    b = store.room_join(cwd=str(real), pid=None, label="bob").session_id
    assert store.lease_claim(a, "src/", mode="shared").ok
    os.rename(real / "src", real / "src2")
    (real / "src").symlink_to(real / "src2")
    assert rows(store, "SELECT path FROM leases WHERE session_id = ?", (a,)) == [(f"{real}/src/",)]
    for to in (f"{real}/src2/x.py", "src2/x.py", f"{real}/src/x.py", "src/x.py", "src2/new/z.py"):
        assert store.msg_send(b, f"file:{to}", body="soon?").recipients == [a], to
        with store.db.write() as tx:  # matched in the transaction too (a lease taken after the snapshot)
            assert messages.resolve_selector(tx, store._session(tx, b, touch=False), f"file:{to}", "") == [a], to
    assert store.msg_send(b, "file:lib/y.py", body="elsewhere").recipients == []


def _save_by_rename(path: Path, text: str) -> None:
    """An editor's save: a temporary file beside it, renamed over it (a new inode)."""
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(text)
    os.replace(temp, path)


def test_a_name_in_its_folder_is_the_file_only_while_the_holder_s_path_leads_to_that_folder(real: Path) -> None:
    """paths.recorded names an existing file in its folder (a name not created yet: its own form
    already); paths.same takes that name for the claimed file only while the holder's path still
    ends in it under the same folder: not once the folder was renamed with no symlink left (a new
    folder in its place), nor for the same name in another folder."""
    x = real / "src" / "x.py"
    ident, name = paths.recorded(paths.identities(str(x), str(real)))
    assert ident == f"{os.stat(x).st_dev}:{os.stat(x).st_ino}"
    assert name == f"{os.stat(x.parent).st_dev}:{os.stat(x.parent).st_ino}/x.py"
    assert paths.recorded(paths.identities(str(real / "src" / "new.py"), str(real)))[1] is None
    _save_by_rename(x, "x = 2\n")
    assert paths.same(str(x), ident, str(x), name) and not paths.same(str(x), ident, str(x))
    assert not paths.same(str(real / "lib" / "x.py"), name, str(x))  # another folder's x.py
    os.rename(real / "src", real / "src2")
    (real / "src").mkdir()
    (real / "src" / "x.py").write_text("other\n")
    assert not paths.same(str(x), ident, str(real / "src2" / "x.py"), name)  # src/ is another folder now
    assert not paths.same(str(x), ident, str(x), name)


def test_a_lease_follows_its_file_saved_by_rename_then_its_folder_renamed(store: Store, real: Path) -> None:
    """alice holds ``src/x.py``, saves it by rename (a new inode: the one recorded at her claim
    names no file now), then ``src`` becomes ``src2`` with a symlink left in its place: her lease,
    still stored as ``src/x.py``, is found under ``src2/x.py`` by the file's name in its folder
    (the folder keeps its inode through the rename). Bob's claim is denied naming her, his check
    lists her, his drift after her next save says she holds it, the commit guard refuses his
    commit of it; her own claim by the new name re-keys her one row."""
    a = store.room_join(cwd=str(real), pid=None, label="alice").session_id
    b = store.room_join(cwd=str(real), pid=None, label="bob").session_id
    first = store.lease_claim(a, "src/x.py").lease
    store.note_read(b, "src/x.py")
    _save_by_rename(real / "src" / "x.py", "x = 2\n")
    os.rename(real / "src", real / "src2")
    (real / "src").symlink_to(real / "src2")
    moved = f"{real}/src2/x.py"
    denied = store.lease_claim(b, "src2/x.py")
    assert not denied.ok and (denied.holder.session_id, denied.holder.path) == (a, f"{real}/src/x.py")
    assert not store.lease_claim(b, moved, mode="shared").ok
    assert [h.session_id for h in store.lease_check(b, "src2/x.py").holders] == [a]
    _save_by_rename(real / "src2" / "x.py", "x = 3\n")
    drift = store.drift_check(b, "src2/x.py")
    assert (drift.severity, drift.holder) == ("CRITICAL", a)
    with store.db.read() as tx:
        for identify in (paths.identities, paths.identifier(str(real))):  # the guard's own closure too
            assert [(x.path, x.lease_path, x.session_id) for x in blockers(tx, [moved], {b}, identify, paths.same)] == [
                (moved, f"{real}/src/x.py", a)]
    again = store.lease_claim(a, "src2/x.py")
    assert again.ok and again.lease.token > first.token and again.lease.acquired_at == first.acquired_at
    assert rows(store, "SELECT path FROM leases WHERE session_id = ?", (a,)) == [(moved,)]
    assert not store.lease_claim(b, "src/x.py").ok  # her re-keyed row, by the old name now


def test_a_read_under_a_folder_s_new_name_knows_the_holder_under_its_old(store: Store, real: Path) -> None:
    """bob reads ``src2/x.py`` while alice holds it as ``src/x.py`` (``src`` renamed since, a
    symlink left): his baseline records her as its holder, so his drift after her save and her
    release (no live lease, and her lease events keyed by the old name) is still CRITICAL."""
    a = store.room_join(cwd=str(real), pid=None, label="alice").session_id
    b = store.room_join(cwd=str(real), pid=None, label="bob").session_id
    assert store.lease_claim(a, "src/x.py").ok
    _save_by_rename(real / "src" / "x.py", "x = 2\n")
    os.rename(real / "src", real / "src2")
    (real / "src").symlink_to(real / "src2")
    store.note_read(b, "src2/x.py")
    _save_by_rename(real / "src2" / "x.py", "x = 3\n")
    assert store.lease_release(a, "src/x.py") is None
    drift = store.drift_check(b, "src2/x.py")
    assert (drift.severity, drift.holder) == ("CRITICAL", a)


@pytest.mark.sqlite_only
def test_an_old_store_s_leases_gain_no_identity_and_keep_their_paths(location: str, real: Path) -> None:
    """Schema 4 -> 6: the ident and name_ident columns (and sessions.view) are added empty: a
    lease granted before is found by its path alone while it lives; one granted after carries
    its file's identity and its name in its folder. The at_edit column is added false: a lease granted before was the model's
    own."""
    import sqlite3

    with Store.open(location) as store:
        a = store.room_join(cwd=str(real), pid=None).session_id
        assert store.lease_claim(a, "src/x.py").ok
    conn = sqlite3.connect(location)  # back to version 4's shape: no ident column
    conn.executescript("DROP INDEX leases_ident; DROP INDEX leases_name_ident; ALTER TABLE leases DROP COLUMN ident; "
                       "ALTER TABLE leases DROP COLUMN name_ident; ALTER TABLE leases DROP COLUMN at_edit; "
                       "ALTER TABLE sessions DROP COLUMN view; PRAGMA user_version=4;")
    conn.close()
    with Store.open(location) as store:
        assert store.health()["schema_version"] == 6
        b = store.room_join(cwd=str(real), pid=None).session_id
        assert store.lease_claim(b, "src/x.py").holder.session_id == a
        assert store.lease_claim(b, "lib/y.py").ok
        assert rows(store, "SELECT path, ident IS NULL, name_ident IS NULL, at_edit FROM leases ORDER BY path") == [
            (f"{real}/lib/y.py", 0, 0, 0), (f"{real}/src/x.py", 1, 1, 0)]
        # a session joined before knows no view (judged as this one's); one joined now records it
        assert rows(store, "SELECT id, view FROM sessions ORDER BY id = ?", (b,)) == [(a, None), (b, paths.view())]


_MOUNTED = """
import sys
from agents_room.store import Store
location, shared, other = sys.argv[1:]
with Store.open(location) as store:
    a = store.room_join(cwd=shared, pid=None, label="host").session_id
    b = store.room_join(cwd=other, pid=None, label="container").session_id
    print(store.lease_claim(a, "src/x.py").ok, store.lease_claim(a, "src/new.py").ok)
    denied = [store.lease_claim(b, p) for p in ("src/x.py", "src/new.py")]
    print(*[(d.ok, d.holder.session_id == a, d.holder.path) for d in denied], sep="\\n")
    print(store.lease_check(b, "src/x.py").lease.path)
"""


def test_a_bind_mount_is_one_set_of_files(location: str, real: Path, tmp_path: Path) -> None:
    """The repository mounted at a second place (as a container sharing one store sees it: its
    own mount namespace, here ``unshare -m``): two paths no symlink joins, one device and inode
    per file, so one lease per file, a file not created yet too (its folder's identity)."""
    mounted = tmp_path / "mnt" / "repo"
    mounted.mkdir(parents=True)
    script = f'mount --bind "$1" "$2" && exec "$3" -c "$4" "$5" "$2" "$1"'
    done = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", str(real),
                           str(mounted), sys.executable, _MOUNTED, location], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "True True"
    assert lines[1:3] == [f"(False, True, '{mounted}/src/x.py')", f"(False, True, '{mounted}/src/new.py')"]
    assert lines[3] == f"{mounted}/src/x.py"


@pytest.mark.skipif(not hasattr(os, "O_PATH") or not os.path.isdir("/proc/self/fd"), reason="Linux's O_PATH and /proc")
def test_a_file_removed_between_its_open_and_its_name_is_named_by_its_path(tmp_path: Path) -> None:
    """The kernel names a descriptor of an unlinked file ``<path> (deleted)``: a file an
    editor saved by rename between the two calls is still its path, never that name."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    (real / "x.py").write_text("x\n")
    fd = os.open(tmp_path / "link" / "x.py", os.O_PATH)
    try:
        os.unlink(real / "x.py")
        assert os.readlink(f"/proc/self/fd/{fd}").endswith(" (deleted)")  # what the kernel says
        assert paths._named_by(fd, str(tmp_path / "link" / "x.py")) == str(real / "x.py")
    finally:
        os.close(fd)


@pytest.mark.skipif(not hasattr(os, "O_PATH") or not os.path.isdir("/proc/self/fd"), reason="Linux's O_PATH and /proc")
def test_a_path_with_dotdot_saved_by_rename_while_it_is_resolved_is_named_by_its_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``via/../x.py`` (``via -> src/pkg``) is resolved by the kernel's name of an ``O_PATH``
    descriptor of the whole path; an editor's save by rename right after that open made it
    ``<real>/src/x.py (deleted)``, which a simulator run keyed a lease by (history-events, a
    second exclusive lease of x.py). The save is made here right after the store's open."""
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "x.py").write_text("x = 1\n")
    (tmp_path / "via").symlink_to(src / "pkg")
    opened = os.open

    def open_then_save(path: object, flags: int, *args: object) -> int:
        fd = opened(path, flags, *args)
        if str(path).endswith("/via/../x.py"):
            _save_by_rename(src / "x.py", "x = 2\n")
        return fd

    monkeypatch.setattr(os, "open", open_then_save)
    assert paths.canonical(paths.absolute(f"{tmp_path}/via/../x.py")) == f"{os.path.realpath(src)}/x.py"


def test_a_match_by_identity_is_judged_from_the_holder_s_view(real: Path) -> None:
    """paths.same from where the holder session reads its paths (paths.view): this view, or
    unknown, as before; another mount namespace of this kernel, by the recorded name in its
    folder alone even where the holder's path leads nowhere here, never by a bare inode (freed
    and reused at once); another kernel's, never (its numbers are not this kernel's)."""
    x = real / "src" / "x.py"
    ident, name = paths.recorded(paths.identities(str(x), str(real)))
    here = paths.view()
    boot = here.split("/", 1)[0]
    assert here and all(paths.same(str(x), ident, str(x), name, v) for v in (None, here, f"{boot}/1"))
    elsewhere = "/nowhere/in/this/view/src/x.py"
    assert not paths.same(elsewhere, ident, str(x), name, here)  # this view: the holder's path must lead there
    assert paths.same(elsewhere, ident, str(x), name, f"{boot}/1")  # a container's own mount: by the name
    assert not paths.same(elsewhere, ident, str(x), None, f"{boot}/1")  # never by a bare inode
    assert not paths.same(str(x), ident, str(x), name, "another-boot/1")  # another kernel's numbers
