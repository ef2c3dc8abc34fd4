"""Directory leases (store/coverage.py): a lease of ``dir/`` covers every path beneath it by
whole components; claims conflict both ways under the exclusive/shared rules; renew, release,
leave, prune and the sweep treat it as one lease; lease_check and lease_list speak of it."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from agents_room.store import Clock, LeaseNotHeld, Store
from agents_room.store.errors import InvalidArgument

from .conftest import rows


@pytest.fixture
def two(join: Callable[..., str]) -> tuple[str, str]:
    return join(label="first"), join(label="second")


# -- the stored form --------------------------------------------------------------------------


def test_a_trailing_slash_or_an_existing_directory_leases_the_directory(
    store: Store, repo: Path, two: tuple[str, str]
) -> None:
    a, _ = two
    (repo / "pkg").mkdir()
    assert store.lease_claim(a, "pkg").lease.path == f"{repo}/pkg/"  # type: ignore[union-attr]
    assert store.lease_claim(a, "new/").lease.path == f"{repo}/new/"  # type: ignore[union-attr]
    assert store.lease_claim(a, "new.py").lease.path == f"{repo}/new.py"  # type: ignore[union-attr]
    listed = {x.path for x in store.lease_list(a)}
    assert listed == {f"{repo}/pkg/", f"{repo}/new/", f"{repo}/new.py"}


# -- conflicts, both ways ---------------------------------------------------------------------


@pytest.mark.parametrize("file_mode", ["exclusive", "shared"])
def test_an_exclusive_directory_claim_is_denied_by_a_lease_beneath(
    store: Store, repo: Path, two: tuple[str, str], file_mode: str
) -> None:
    a, b = two
    assert store.lease_claim(a, "src/api/v1/x.py", mode=file_mode).ok
    c = store.lease_claim(b, "src/api/")
    assert not c.ok and c.holder is not None
    assert (c.holder.session_id, c.holder.path) == (a, f"{repo}/src/api/v1/x.py")
    assert f"{repo}/src/api/v1/x.py" in c.reason and "first" in c.reason
    assert not store.lease_claim(b, "src/").ok  # any directory above it
    assert not store.lease_claim(b, "/").ok


@pytest.mark.parametrize("dir_mode", ["exclusive", "shared"])
def test_an_exclusive_file_claim_is_denied_by_a_directory_lease_over_it(
    store: Store, repo: Path, two: tuple[str, str], dir_mode: str
) -> None:
    a, b = two
    assert store.lease_claim(a, "src/api/", mode=dir_mode).ok
    c = store.lease_claim(b, "src/api/v1/x.py")
    assert not c.ok and c.holder is not None
    assert (c.holder.session_id, c.holder.path) == (a, f"{repo}/src/api/")
    assert f"is beneath {repo}/src/api/" in c.reason
    assert not store.lease_claim(b, "src/api/v1/").ok  # a directory beneath it too


def test_shared_claims_meet_across_directories_and_exclusive_ones_do_not(
    store: Store, two: tuple[str, str], join: Callable[..., str]
) -> None:
    a, b = two
    c = join(label="third")
    assert store.lease_claim(a, "src/api/", mode="shared").ok
    assert store.lease_claim(b, "src/api/x.py", mode="shared").ok
    assert store.lease_claim(c, "src/", mode="shared").ok
    assert not store.lease_claim(c, "src/api/y.py").ok  # exclusive under a shared directory
    d = join(label="fourth")
    assert store.lease_claim(d, "lib/", mode="exclusive").ok
    assert not store.lease_claim(a, "lib/z.py", mode="shared").ok  # shared under an exclusive directory


def test_coverage_is_by_whole_components(store: Store, two: tuple[str, str]) -> None:
    a, b = two
    assert store.lease_claim(a, "src/api/").ok
    assert store.lease_claim(b, "src/apiary.py").ok
    assert store.lease_claim(b, "src/api").ok  # a file named like the directory is another node
    assert store.lease_claim(b, "src/api0/").ok
    assert store.lease_claim(b, "src/api-v2/x.py").ok
    assert store.lease_claim(a, "src/ap/").ok


def test_the_caller_s_own_leases_above_or_beneath_never_stand_in_its_way(
    store: Store, repo: Path, two: tuple[str, str]
) -> None:
    a, b = two
    assert store.lease_claim(a, "src/api/x.py").ok
    assert store.lease_claim(a, "src/api/").ok
    assert store.lease_claim(a, "src/api/y.py").ok
    assert {x.path for x in store.lease_list(a) if x.mine} == {f"{repo}/src/api/x.py", f"{repo}/src/api/", f"{repo}/src/api/y.py"}
    assert not store.lease_claim(b, "src/api/z.py").ok


def test_a_directory_upgrade_is_denied_by_another_shared_holder_beneath(store: Store, two: tuple[str, str]) -> None:
    a, b = two
    assert store.lease_claim(a, "src/", mode="shared").ok
    assert store.lease_claim(b, "src/x.py", mode="shared").ok
    c = store.lease_claim(a, "src/", mode="exclusive")
    assert not c.ok and c.reason.startswith("cannot upgrade to exclusive")


# -- one lease: renew, release, leave, prune, the sweep ---------------------------------------


def test_renew_and_release_treat_the_directory_as_one_lease(
    store: Store, repo: Path, clock: Clock, two: tuple[str, str]
) -> None:
    a, b = two
    first = store.lease_claim(a, "src/", ttl_s=10).lease
    renewed = store.lease_renew(a, "src/", ttl_s=100)
    assert renewed.path == f"{repo}/src/" and renewed.token > first.token  # type: ignore[union-attr]
    assert renewed.expires_at == clock.now() + 100
    with pytest.raises(LeaseNotHeld):
        store.lease_release(b, "src/")
    with pytest.raises(LeaseNotHeld):
        store.lease_release(a, "src/x.py")  # covered, but not a lease of its own
    store.lease_release(a, "src/")
    assert store.lease_claim(b, "src/x.py").ok
    assert rows(store, "SELECT count(*) FROM leases WHERE session_id = ?", (a,)) == [(0,)]


def test_a_directory_no_longer_on_disk_is_named_with_its_slash(store: Store, repo: Path, two: tuple[str, str]) -> None:
    a, _ = two
    (repo / "gone").mkdir()
    assert store.lease_claim(a, "gone").lease.path == f"{repo}/gone/"  # type: ignore[union-attr]
    (repo / "gone").rmdir()
    with pytest.raises(LeaseNotHeld, match="trailing /"):
        store.lease_renew(a, "gone")
    store.lease_release(a, "gone/")


def test_an_expired_directory_lease_is_swept_as_one_and_blocks_no_more(
    store: Store, repo: Path, clock: Clock, two: tuple[str, str]
) -> None:
    a, b = two
    store.lease_claim(a, "src/", ttl_s=5)
    clock.shift(6)
    assert store.lease_claim(b, "src/x.py").ok
    expired = rows(store, "SELECT path, session_id FROM events WHERE kind = 'lease_expire'")
    assert expired == [(f"{repo}/src/", a)]


def test_leave_releases_the_directory_lease(store: Store, repo: Path, two: tuple[str, str]) -> None:
    a, b = two
    store.lease_claim(a, "src/")
    store.room_leave(a)
    assert store.lease_claim(b, "src/x.py").ok
    released = rows(store, "SELECT path FROM events WHERE kind = 'lease_release' AND session_id = ?", (a,))
    assert released == [(f"{repo}/src/",)]


def test_prune_releases_the_directory_lease_of_a_gone_session(
    store: Store, clock: Clock, join: Callable[..., str]
) -> None:
    exited = subprocess.Popen(["true"])
    exited.wait()
    gone = join(pid=exited.pid, label="gone")
    other = join(label="other")
    store.lease_claim(gone, "src/", ttl_s=86400)
    assert not store.lease_claim(other, "src/x.py").ok
    clock.shift(3600)
    assert [s.id for s in store.prune(60)] == [gone]
    assert store.lease_claim(other, "src/x.py").ok


# -- readers: lease_check, lease_list ---------------------------------------------------------


def test_lease_check_of_a_file_names_the_directory_lease_over_it(
    store: Store, repo: Path, two: tuple[str, str]
) -> None:
    a, b = two
    store.lease_claim(a, "src/api/")
    state = store.lease_check(b, "src/api/v1/x.py")
    assert not state.free and state.lease is not None
    assert (state.lease.path, state.lease.session_id) == (f"{repo}/src/api/", a)
    assert store.lease_check(b, "src/apiary.py").free


def test_lease_check_names_every_holder_of_a_shared_coverage(
    store: Store, repo: Path, two: tuple[str, str], join: Callable[..., str]
) -> None:
    a, b = two
    c = join(label="third")
    store.lease_claim(a, "src/", mode="shared")
    store.lease_claim(b, "src/api/", mode="shared")
    store.lease_claim(c, "src/api/x.py", mode="shared")
    holders = store.lease_check(a, "src/api/x.py").holders
    assert {(h.session_id, h.path) for h in holders} == {
        (a, f"{repo}/src/"), (b, f"{repo}/src/api/"), (c, f"{repo}/src/api/x.py")}
    beneath = store.lease_check(a, "src/api/").holders  # a directory: also what lies beneath it
    assert {h.session_id for h in beneath} == {a, b, c}


def test_lease_list_shows_a_directory_lease_once(store: Store, repo: Path, two: tuple[str, str]) -> None:
    a, b = two
    store.lease_claim(a, "src/")
    listed = store.lease_list(b)
    assert [(x.path, x.session_id, x.mine) for x in listed] == [(f"{repo}/src/", a, False)]


# -- readers: file: selectors, drift ----------------------------------------------------------


@pytest.fixture
def holder(store: Store, join: Callable[..., str]) -> tuple[str, str]:
    """(sender, the holder of src/api/), in one room."""
    sender, held = join(label="sender", room="team"), join(label="holder", room="team")
    assert store.lease_claim(held, "src/api/").ok
    return sender, held


@pytest.mark.parametrize("glob", [
    "src/api/x.py", "src/api/v1/*.go", "src/api", "src/api/", "api", "src/*", "*/api/*", "*.py",
])
def test_a_file_selector_reaches_the_holder_of_a_directory_over_what_it_names(
    store: Store, repo: Path, holder: tuple[str, str], glob: str
) -> None:
    sender, held = holder
    assert store.msg_send(sender, f"file:{glob}").recipients == [held]
    if "/" in glob:  # (a bare name is a base name, never an absolute path)
        assert store.msg_send(sender, f"file:{repo}/{glob}").recipients == [held]  # the absolute form


@pytest.mark.parametrize("glob", ["src/apiary.py", "src/ap/x.py", "lib/*", "x.py", "src/api0/x", "src/apix*"])
def test_a_file_selector_misses_a_directory_it_names_nothing_of(
    store: Store, holder: tuple[str, str], glob: str
) -> None:
    sender, _ = holder
    sent = store.msg_send(sender, f"file:{glob}")
    assert sent.recipients == [] and sent.warning


def test_drift_is_critical_when_a_directory_over_the_file_was_held_since_the_read(
    store: Store, repo: Path, join: Callable[..., str]
) -> None:
    me, other = join(label="me"), join(label="other")
    target = repo / "src" / "api" / "x.py"
    target.parent.mkdir(parents=True)
    target.write_text("one\n")
    store.note_read(me, "src/api/x.py")
    store.lease_claim(other, "src/", ttl_s=5)
    store.lease_release(other, "src/")
    target.write_text("two\n")
    d = store.drift_check(me, "src/api/x.py")
    assert (d.severity, d.holder) == ("CRITICAL", other)


def test_drift_is_critical_when_a_directory_over_the_file_was_held_at_the_read(
    store: Store, repo: Path, join: Callable[..., str]
) -> None:
    me, other = join(label="me"), join(label="other")
    target = repo / "src" / "x.py"
    target.parent.mkdir(parents=True)
    target.write_text("one\n")
    store.lease_claim(other, "src/")
    store.note_read(me, "src/x.py")
    target.write_text("two\n")
    assert store.drift_check(me, "src/x.py").severity == "CRITICAL"


def test_drift_stays_minor_for_a_directory_lease_beside_the_file(
    store: Store, repo: Path, join: Callable[..., str]
) -> None:
    me, other = join(label="me"), join(label="other")
    target = repo / "src" / "apiary.py"
    target.parent.mkdir(parents=True)
    target.write_text("one\n")
    store.note_read(me, "src/apiary.py")
    store.lease_claim(other, "src/api/")
    with pytest.raises(InvalidArgument, match="src/apiary.py/ ends with / but .* is a file"):
        store.lease_claim(other, "src/apiary.py/")  # no directory of the file's own name: ENOTDIR to the kernel
    target.write_text("two\n")
    assert store.drift_check(me, "src/apiary.py").severity == "MINOR"
