"""note_read and drift_check: SAFE, MINOR and CRITICAL, where CRITICAL is decided from the
lease events since the read, and the store's own files refused."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from agents_room.store import Clock, InvalidArgument, Store


@pytest.fixture
def target(repo: Path) -> Path:
    path = repo / "src" / "wire.go"
    path.parent.mkdir()
    path.write_bytes(b"package wire\n\x00\xff binary-safe\n")
    return path


def test_note_read_returns_the_sha256_of_the_files_bytes(store: Store, target: Path, join: Callable[..., str]) -> None:
    assert store.note_read(join(), "src/wire.go") == hashlib.sha256(target.read_bytes()).hexdigest()


def test_note_read_appends_an_event_with_the_hash(store: Store, target: Path, join: Callable[..., str]) -> None:
    sid = join()
    digest = store.note_read(sid, "src/wire.go")
    last = store.events()[-1]
    assert (last.kind, last.session_id, last.path, last.payload) == ("note_read", sid, str(target), {"hash": digest})


def test_note_read_of_a_missing_file_is_invalid_argument(store: Store, join: Callable[..., str]) -> None:
    with pytest.raises(InvalidArgument, match="does not exist") as err:
        store.note_read(join(), "nope.txt")
    assert err.value.field == "path"


def test_note_read_of_a_folder_is_invalid_argument(store: Store, repo: Path, join: Callable[..., str]) -> None:
    with pytest.raises(InvalidArgument) as err:
        store.note_read(join(), ".")
    assert err.value.field == "path"


# -- severities -------------------------------------------------------------------------------


def test_drift_without_a_baseline_is_safe(store: Store, target: Path, join: Callable[..., str]) -> None:
    d = store.drift_check(join(), "src/wire.go")
    assert (d.severity, d.changed, d.since, d.path) == ("SAFE", False, None, str(target))


def test_drift_of_an_unchanged_file_is_safe(store: Store, clock: Clock, target: Path, join: Callable[..., str]) -> None:
    sid = join()
    store.note_read(sid, "src/wire.go")
    read_at = clock.now()
    clock.shift(30)
    d = store.drift_check(sid, "src/wire.go")
    assert (d.severity, d.changed, d.since) == ("SAFE", False, read_at)


def test_a_file_rewritten_with_the_same_bytes_is_safe(store: Store, target: Path, join: Callable[..., str]) -> None:
    sid = join()
    store.note_read(sid, "src/wire.go")
    target.write_bytes(target.read_bytes())
    assert store.drift_check(sid, "src/wire.go").severity == "SAFE"


def test_a_change_with_no_other_lease_since_the_read_is_minor(
    store: Store, target: Path, join: Callable[..., str]
) -> None:
    sid = join()
    store.note_read(sid, "src/wire.go")
    target.write_text("changed\n")
    d = store.drift_check(sid, "src/wire.go")
    assert (d.severity, d.changed, d.holder) == ("MINOR", True, None)


def test_my_own_lease_since_the_read_keeps_a_change_minor(
    store: Store, target: Path, join: Callable[..., str]
) -> None:
    sid = join()
    store.note_read(sid, "src/wire.go")
    store.lease_claim(sid, "src/wire.go")
    target.write_text("changed by me\n")
    assert store.drift_check(sid, "src/wire.go").severity == "MINOR"


def test_a_change_while_another_holds_a_lease_is_critical(
    store: Store, target: Path, join: Callable[..., str]
) -> None:
    me, other = join(), join()
    store.note_read(me, "src/wire.go")
    store.lease_claim(other, "src/wire.go")
    target.write_text("changed by other\n")
    d = store.drift_check(me, "src/wire.go")
    assert (d.severity, d.changed, d.holder) == ("CRITICAL", True, other)
    assert other in d.message


def test_a_lease_granted_and_released_between_read_and_check_is_critical(
    store: Store, target: Path, join: Callable[..., str]
) -> None:
    me, other = join(), join()
    store.note_read(me, "src/wire.go")
    store.lease_claim(other, "src/wire.go")
    target.write_text("changed by other\n")
    store.lease_release(other, "src/wire.go")
    assert store.lease_check(me, "src/wire.go").free
    d = store.drift_check(me, "src/wire.go")
    assert (d.severity, d.holder) == ("CRITICAL", other)


def test_a_lease_that_expired_before_the_check_still_makes_it_critical(
    store: Store, clock: Clock, target: Path, join: Callable[..., str]
) -> None:
    me, other = join(), join()
    store.note_read(me, "src/wire.go")
    store.lease_claim(other, "src/wire.go", ttl_s=5)
    target.write_text("changed by other\n")
    clock.shift(60)
    assert store.drift_check(me, "src/wire.go").severity == "CRITICAL"


def test_a_lease_held_by_another_at_the_moment_of_the_read_makes_a_change_critical(
    store: Store, target: Path, join: Callable[..., str]
) -> None:
    me, other = join(), join()
    store.lease_claim(other, "src/wire.go")
    store.note_read(me, "src/wire.go")
    store.lease_release(other, "src/wire.go")
    target.write_text("changed\n")
    assert store.drift_check(me, "src/wire.go").severity == "CRITICAL"


def test_a_lease_released_before_the_read_does_not_count(
    store: Store, target: Path, join: Callable[..., str]
) -> None:
    me, other = join(), join()
    store.lease_claim(other, "src/wire.go")
    store.lease_release(other, "src/wire.go")
    store.note_read(me, "src/wire.go")
    target.write_text("changed\n")
    assert store.drift_check(me, "src/wire.go").severity == "MINOR"


def test_a_lease_on_another_path_does_not_count(
    store: Store, target: Path, join: Callable[..., str]
) -> None:
    me, other = join(), join()
    store.note_read(me, "src/wire.go")
    store.lease_claim(other, "src/other.go")
    target.write_text("changed\n")
    assert store.drift_check(me, "src/wire.go").severity == "MINOR"


def test_a_deleted_file_counts_as_changed(store: Store, target: Path, join: Callable[..., str]) -> None:
    sid = join()
    store.note_read(sid, "src/wire.go")
    target.unlink()
    d = store.drift_check(sid, "src/wire.go")
    assert (d.severity, d.changed) == ("MINOR", True)
    assert "deleted" in d.message


def test_a_new_note_read_moves_the_baseline(store: Store, target: Path, join: Callable[..., str]) -> None:
    me, other = join(), join()
    store.note_read(me, "src/wire.go")
    store.lease_claim(other, "src/wire.go")
    target.write_text("changed\n")
    store.lease_release(other, "src/wire.go")
    store.note_read(me, "src/wire.go")
    assert store.drift_check(me, "src/wire.go").severity == "SAFE"


def test_drift_check_is_read_only(store: Store, target: Path, join: Callable[..., str], head: Callable[[], int]) -> None:
    sid = join()
    store.note_read(sid, "src/wire.go")
    target.write_text("changed\n")
    before = head()
    store.drift_check(sid, "src/wire.go")
    assert head() == before


# -- the store's own files --------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm"])
@pytest.mark.sqlite_only  # a PostgreSQL store has no local files
@pytest.mark.parametrize("op", ["note_read", "drift_check"])
def test_the_stores_own_files_are_refused(store: Store, join: Callable[..., str], suffix: str, op: str) -> None:
    sid = join()
    assert os.path.exists(store.path + suffix)
    with pytest.raises(InvalidArgument, match="store's own") as err:
        getattr(store, op)(sid, store.path + suffix)
    assert err.value.field == "path"


@pytest.mark.sqlite_only  # a PostgreSQL store has no local files
def test_a_symlink_to_the_store_is_refused(store: Store, repo: Path, join: Callable[..., str]) -> None:
    link = repo / "innocent.db"
    link.symlink_to(store.path)
    with pytest.raises(InvalidArgument, match="store's own"):
        store.note_read(join(), "innocent.db")
