"""Leases: exclusive and shared, deny naming the holder, re-claim, upgrade, renew, release,
expiry, fencing tokens, path normalisation and ttl bounds."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agents_room.store import Clock, InvalidArgument, LeaseNotHeld, Store
from agents_room.store.leasecall import HeldLease


@pytest.fixture
def two(join: Callable[..., str]) -> tuple[str, str]:
    return join(label="first"), join(label="second")


# -- grant and deny ---------------------------------------------------------------------------


def test_a_free_path_is_granted_with_a_token(store: Store, clock: Clock, repo: Path, join: Callable[..., str]) -> None:
    sid = join(label="me")
    c = store.lease_claim(sid, "a.txt", ttl_s=30)
    assert (c.ok, c.reason) == (True, "granted")
    assert c.lease is not None and c.lease == c.holder
    assert (c.lease.path, c.lease.session_id, c.lease.label, c.lease.mode) == (str(repo / "a.txt"), sid, "me", "exclusive")
    assert (c.lease.token > 0, c.lease.acquired_at, c.lease.expires_at) == (True, clock.now(), clock.now() + 30)


def test_the_default_ttl_is_600_seconds(store: Store, clock: Clock, join: Callable[..., str]) -> None:
    lease = store.lease_claim(join(), "a.txt").lease
    assert lease is not None and lease.expires_at == clock.now() + 600


def test_exclusive_blocks_another_exclusive(store: Store, two: tuple[str, str]) -> None:
    a, b = two
    store.lease_claim(a, "a.txt")
    assert not store.lease_claim(b, "a.txt").ok


def test_exclusive_blocks_a_shared_claim(store: Store, two: tuple[str, str]) -> None:
    a, b = two
    store.lease_claim(a, "a.txt")
    assert not store.lease_claim(b, "a.txt", mode="shared").ok


def test_shared_admits_other_shared_claims(store: Store, two: tuple[str, str], join: Callable[..., str]) -> None:
    a, b = two
    c = join()
    assert all(store.lease_claim(s, "a.txt", mode="shared").ok for s in (a, b, c))
    assert len(store.lease_check(a, "a.txt").holders) == 3


def test_shared_blocks_an_exclusive_claim(store: Store, two: tuple[str, str]) -> None:
    a, b = two
    store.lease_claim(a, "a.txt", mode="shared")
    assert not store.lease_claim(b, "a.txt").ok


def test_a_deny_names_the_holder_and_says_why(store: Store, clock: Clock, two: tuple[str, str]) -> None:
    a, b = two
    store.lease_claim(a, "a.txt", ttl_s=60)
    c = store.lease_claim(b, "a.txt")
    assert (c.ok, c.lease) == (False, None)
    assert c.holder is not None
    assert (c.holder.session_id, c.holder.label, c.holder.mode, c.holder.expires_at) == (
        a, "first", "exclusive", clock.now() + 60)
    assert a in c.reason and "first" in c.reason and "exclusive" in c.reason


def test_a_deny_changes_nothing(store: Store, two: tuple[str, str], head: Callable[[], int]) -> None:
    a, b = two
    granted = store.lease_claim(a, "a.txt").lease
    before = head()
    store.lease_claim(b, "a.txt")
    assert head() == before
    assert store.lease_check(a, "a.txt").lease == HeldLease(**vars(granted), at_edit=False)  # claimed, not at an edit


def test_different_paths_do_not_conflict(store: Store, two: tuple[str, str]) -> None:
    a, b = two
    store.lease_claim(a, "a.txt")
    assert store.lease_claim(b, "b.txt").ok


# -- re-claim and upgrade ---------------------------------------------------------------------


def test_the_holders_re_claim_extends_with_a_new_larger_token(store: Store, clock: Clock, join: Callable[..., str]) -> None:
    sid = join()
    first = store.lease_claim(sid, "a.txt", ttl_s=60).lease
    clock.shift(30)
    again = store.lease_claim(sid, "a.txt", ttl_s=60)
    assert first is not None and again.lease is not None
    assert (again.ok, again.reason) == (True, "extended")
    assert again.lease.token > first.token
    assert (again.lease.acquired_at, again.lease.expires_at) == (first.acquired_at, clock.now() + 60)


def test_a_sole_shared_holder_upgrades_to_exclusive(store: Store, two: tuple[str, str]) -> None:
    a, b = two
    store.lease_claim(a, "a.txt", mode="shared")
    up = store.lease_claim(a, "a.txt", mode="exclusive")
    assert up.ok and up.lease is not None and up.lease.mode == "exclusive"
    assert not store.lease_claim(b, "a.txt", mode="shared").ok


def test_a_shared_holder_with_company_cannot_upgrade(store: Store, two: tuple[str, str]) -> None:
    a, b = two
    store.lease_claim(a, "a.txt", mode="shared")
    store.lease_claim(b, "a.txt", mode="shared")
    up = store.lease_claim(a, "a.txt", mode="exclusive")
    assert (up.ok, up.holder.session_id if up.holder else None) == (False, b)
    assert "cannot upgrade" in up.reason
    assert sorted((h.session_id, h.mode) for h in store.lease_check(a, "a.txt").holders) == sorted(
        [(a, "shared"), (b, "shared")])


def test_an_exclusive_holder_may_step_down_to_shared(store: Store, two: tuple[str, str]) -> None:
    a, b = two
    store.lease_claim(a, "a.txt")
    assert store.lease_claim(a, "a.txt", mode="shared").ok
    assert store.lease_claim(b, "a.txt", mode="shared").ok


# -- renew and release ------------------------------------------------------------------------


def test_renew_extends_with_a_new_larger_token(store: Store, clock: Clock, join: Callable[..., str]) -> None:
    sid = join()
    first = store.lease_claim(sid, "a.txt", ttl_s=60).lease
    clock.shift(50)
    renewed = store.lease_renew(sid, "a.txt")
    assert first is not None
    assert renewed.token > first.token
    assert (renewed.expires_at, renewed.mode, renewed.acquired_at) == (clock.now() + 60, "exclusive", first.acquired_at)


def test_renew_takes_a_new_ttl(store: Store, clock: Clock, join: Callable[..., str]) -> None:
    sid = join()
    store.lease_claim(sid, "a.txt", ttl_s=60)
    assert store.lease_renew(sid, "a.txt", ttl_s=900).expires_at == clock.now() + 900


def test_renew_of_a_lease_never_held_is_lease_not_held_saying_it_is_free(store: Store, join: Callable[..., str]) -> None:
    with pytest.raises(LeaseNotHeld, match="free") as err:
        store.lease_renew(join(), "a.txt")
    assert err.value.code == "lease_not_held" and err.value.data["holders"] == []


def test_renew_after_expiry_and_takeover_names_the_new_holder(
    store: Store, clock: Clock, two: tuple[str, str]
) -> None:
    a, b = two
    store.lease_claim(a, "a.txt", ttl_s=10)
    clock.shift(11)
    store.lease_claim(b, "a.txt")
    with pytest.raises(LeaseNotHeld, match=b) as err:
        store.lease_renew(a, "a.txt")
    assert err.value.data["holders"] == [b]


def test_release_frees_the_path(store: Store, two: tuple[str, str]) -> None:
    a, b = two
    store.lease_claim(a, "a.txt")
    store.lease_release(a, "a.txt")
    assert store.lease_check(b, "a.txt").free
    assert store.lease_claim(b, "a.txt").ok


def test_release_of_a_lease_held_by_another_names_the_holder(store: Store, two: tuple[str, str]) -> None:
    a, b = two
    store.lease_claim(a, "a.txt")
    with pytest.raises(LeaseNotHeld, match=a):
        store.lease_release(b, "a.txt")
    assert store.lease_check(a, "a.txt").lease is not None


def test_release_of_a_free_path_is_lease_not_held(store: Store, join: Callable[..., str]) -> None:
    with pytest.raises(LeaseNotHeld, match="free"):
        store.lease_release(join(), "a.txt")


def test_release_twice_is_lease_not_held(store: Store, join: Callable[..., str]) -> None:
    sid = join()
    store.lease_claim(sid, "a.txt")
    store.lease_release(sid, "a.txt")
    with pytest.raises(LeaseNotHeld):
        store.lease_release(sid, "a.txt")


# -- expiry and tokens ------------------------------------------------------------------------


def test_an_expired_lease_is_granted_to_another_with_a_higher_token(
    store: Store, clock: Clock, two: tuple[str, str]
) -> None:
    a, b = two
    old = store.lease_claim(a, "a.txt", ttl_s=10).lease
    clock.shift(10)  # expires_at itself is already past
    new = store.lease_claim(b, "a.txt")
    assert old is not None and new.lease is not None
    assert new.ok and new.lease.token > old.token


def test_the_sweep_appends_a_lease_expire_event(store: Store, clock: Clock, two: tuple[str, str]) -> None:
    a, b = two
    old = store.lease_claim(a, "a.txt", ttl_s=10).lease
    clock.shift(11)
    store.lease_claim(b, "a.txt")
    kinds = [(e.kind, e.session_id, e.payload.get("token")) for e in store.events() if e.kind.startswith("lease")]
    assert old is not None
    assert kinds[1] == ("lease_expire", a, old.token)
    assert kinds[2][:2] == ("lease_grant", b)


def test_a_lease_one_second_before_expiry_still_blocks(store: Store, clock: Clock, two: tuple[str, str]) -> None:
    a, b = two
    store.lease_claim(a, "a.txt", ttl_s=10)
    clock.shift(9)
    assert not store.lease_claim(b, "a.txt").ok


def test_renew_after_expiry_with_nobody_else_is_lease_not_held(store: Store, clock: Clock, join: Callable[..., str]) -> None:
    sid = join()
    store.lease_claim(sid, "a.txt", ttl_s=10)
    clock.shift(10)
    with pytest.raises(LeaseNotHeld):
        store.lease_renew(sid, "a.txt")


def test_tokens_increase_across_the_whole_store(store: Store, two: tuple[str, str]) -> None:
    a, b = two
    tokens = [
        store.lease_claim(a, "a.txt").lease.token,  # type: ignore[union-attr]
        store.lease_claim(b, "b.txt").lease.token,  # type: ignore[union-attr]
        store.lease_renew(a, "a.txt").token,
        store.lease_claim(b, "c.txt", mode="shared").lease.token,  # type: ignore[union-attr]
    ]
    assert tokens == sorted(set(tokens))


# -- paths ------------------------------------------------------------------------------------


@pytest.mark.parametrize("spelling", ["src/x.py", "./src/x.py", "src/../src/x.py", "src//x.py", "{repo}/src/x.py"])
def test_spellings_of_one_path_contend_for_one_lease(
    store: Store, repo: Path, two: tuple[str, str], spelling: str
) -> None:
    a, b = two
    store.lease_claim(a, "src/x.py")
    denied = store.lease_claim(b, spelling.format(repo=repo))
    assert not denied.ok


def test_a_relative_path_is_stored_absolute_from_the_sessions_cwd(
    store: Store, repo: Path, join: Callable[..., str]
) -> None:
    sub = repo / "pkg"
    sub.mkdir()
    lease = store.lease_claim(join(sub), "../src/x.py").lease
    assert lease is not None and lease.path == str(repo / "src" / "x.py")


def test_one_relative_path_from_two_repos_is_two_leases(
    store: Store, repo: Path, other_repo: Path, join: Callable[..., str]
) -> None:
    a, b = join(repo), join(other_repo)
    assert store.lease_claim(a, "src/x.py").ok
    assert store.lease_claim(b, "src/x.py").ok


def test_release_by_another_spelling_releases_the_lease(store: Store, repo: Path, join: Callable[..., str]) -> None:
    sid = join()
    store.lease_claim(sid, "src/x.py")
    store.lease_release(sid, str(repo / "src" / "x.py"))
    assert store.lease_check(sid, "src/x.py").free


# -- bounds -----------------------------------------------------------------------------------


@pytest.mark.parametrize("ttl", [0, -1, 86_401, 0.5, float("nan"), float("inf"), "600", True])
def test_a_ttl_outside_1_to_86400_is_invalid_argument(store: Store, join: Callable[..., str], ttl: object) -> None:
    with pytest.raises(InvalidArgument) as err:
        store.lease_claim(join(), "a.txt", ttl_s=ttl)
    assert err.value.field == "ttl_s"


@pytest.mark.parametrize("ttl", [1, 86_400])
def test_the_ttl_bounds_themselves_are_accepted(store: Store, clock: Clock, join: Callable[..., str], ttl: int) -> None:
    lease = store.lease_claim(join(), "a.txt", ttl_s=ttl).lease
    assert lease is not None and lease.expires_at == clock.now() + ttl


def test_renew_checks_the_ttl_bounds(store: Store, join: Callable[..., str]) -> None:
    sid = join()
    store.lease_claim(sid, "a.txt")
    with pytest.raises(InvalidArgument) as err:
        store.lease_renew(sid, "a.txt", ttl_s=86_401)
    assert err.value.field == "ttl_s"


def test_an_unknown_mode_is_invalid_argument(store: Store, join: Callable[..., str]) -> None:
    with pytest.raises(InvalidArgument) as err:
        store.lease_claim(join(), "a.txt", mode="readonly")
    assert err.value.field == "mode"


# -- check and list ---------------------------------------------------------------------------


def test_check_of_a_free_path(store: Store, join: Callable[..., str]) -> None:
    state = store.lease_check(join(), "a.txt")
    assert (state.free, state.lease, state.holders) == (True, None, [])


def test_check_shows_the_holder(store: Store, two: tuple[str, str]) -> None:
    a, b = two
    lease = store.lease_claim(a, "a.txt").lease
    state = store.lease_check(b, "a.txt")
    assert (state.free, state.lease) == (False, HeldLease(**vars(lease), at_edit=False))


def test_check_does_not_show_an_expired_lease(store: Store, clock: Clock, two: tuple[str, str]) -> None:
    a, b = two
    store.lease_claim(a, "a.txt", ttl_s=5)
    clock.shift(5)
    assert store.lease_check(b, "a.txt").free


def test_list_shows_every_live_lease_marking_mine(store: Store, clock: Clock, two: tuple[str, str]) -> None:
    a, b = two
    store.lease_claim(a, "a.txt")
    store.lease_claim(b, "b.txt")
    store.lease_claim(b, "gone.txt", ttl_s=5)
    clock.shift(5)
    found = {(v.path.rsplit("/", 1)[-1], v.session_id, v.mine) for v in store.lease_list(a)}
    assert found == {("a.txt", a, True), ("b.txt", b, False)}
