"""The workload generator: seeded, pure, and sensible in every state an agent can be in."""

from __future__ import annotations

import random
import statistics

import pytest

from sim.run import workload
from sim.run.workload import Files, Held, Known, agent_rng, body, next_op, pick_path, schedule, think_time
from sim.scenario.scenario import OpenLoop, Think, Workload

FILES = Files(tuple(f"/r/src/mod_{i:02d}.py" for i in range(6)), hot=2, tags=("backend", "ops"), rooms=("team",))


def mix(**weights: float) -> Workload:
    return Workload(mix=tuple(weights.items()), lease_ttl_s=(2, 5), max_held=2, edit_margin_s=0.5)


def draw(w: Workload, known: Known, n: int = 200, seed: int = 1) -> list:
    rng = random.Random(seed)
    return [next_op(w, FILES, known, rng) for _ in range(n)]


def test_think_time_kinds() -> None:
    rng = random.Random(4)
    assert think_time(Think("zero", 50), rng) == 0.0
    assert think_time(Think("fixed", 40), rng) == 0.04
    samples = [think_time(Think("exponential", 20), rng) for _ in range(20_000)]
    assert statistics.fmean(samples) == pytest.approx(0.020, rel=0.05)
    assert min(samples) >= 0 and max(samples) > 0.06  # a real tail, not a constant


def test_uniform_schedule_is_evenly_spaced_inside_the_window() -> None:
    times = list(schedule(OpenLoop(rate_per_agent=10, arrivals="uniform"), 1_000_000_000, 3_000_000_000, random.Random(2)))
    assert len(times) == 20
    assert all(1_000_000_000 <= t < 3_000_000_000 for t in times)
    gaps = {b - a for a, b in zip(times, times[1:])}
    assert max(gaps) - min(gaps) <= 1 and min(gaps) == pytest.approx(100_000_000, abs=1)


def test_poisson_schedule_has_the_rate_on_average_and_irregular_gaps() -> None:
    times = list(schedule(OpenLoop(rate_per_agent=200, arrivals="poisson"), 0, 10_000_000_000, random.Random(3)))
    assert len(times) == pytest.approx(2000, rel=0.1)
    assert times == sorted(times) and times[-1] < 10_000_000_000
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert statistics.pstdev(gaps) > 0.5 * statistics.fmean(gaps)  # exponential gaps: stdev ~ mean


def test_same_seed_same_choices_and_agents_differ() -> None:
    w = mix(lease_claim=3, msg_recv=2, note_read=1, send_broadcast=1)
    a = [next_op(w, FILES, Known(), agent_rng(7, 1, 0)) for _ in range(1)]
    r1, r2, other = agent_rng(7, 1, 0), agent_rng(7, 1, 0), agent_rng(7, 2, 0)
    seq1 = [next_op(w, FILES, Known(), r1) for _ in range(50)]
    seq2 = [next_op(w, FILES, Known(), r2) for _ in range(50)]
    seq3 = [next_op(w, FILES, Known(), other) for _ in range(50)]
    assert seq1 == seq2 and seq1 != seq3 and a[0] == seq1[0]
    assert agent_rng(7, 1, 0).random() != agent_rng(7, 1, 1).random()  # a new generation, a new stream


def test_release_renew_and_edit_with_nothing_held_become_claims() -> None:
    for op in draw(mix(lease_release=1, lease_renew=1), Known()):
        assert op.f == "lease_claim" and op.args["path"] in FILES.paths and op.args["ttl_s"] in (2, 5)
    for op in draw(mix(edit=1), Known()):
        assert op.f == "lease_claim" and op.args["mode"] == "exclusive"


def test_release_and_renew_pick_a_held_lease() -> None:
    held = {FILES.paths[3]: Held("shared", 7, 1000.0)}
    ops = draw(mix(lease_release=1, lease_renew=1), Known(held=held, now=900.0))
    assert {op.f for op in ops} == {"lease_release", "lease_renew"}
    assert {op.args["path"] for op in ops} == {FILES.paths[3]}


def test_edit_only_under_an_exclusive_lease_with_time_left() -> None:
    now = 1000.0
    nearly_gone = {FILES.paths[0]: Held("exclusive", 3, now + 0.2)}
    shared = {FILES.paths[1]: Held("shared", 4, now + 10)}
    good = {FILES.paths[2]: Held("exclusive", 5, now + 10)}
    assert {op.f for op in draw(mix(edit=1), Known(held=nearly_gone, now=now))} == {"lease_claim"}
    assert {op.f for op in draw(mix(edit=1), Known(held=shared, now=now))} == {"lease_claim"}
    ops = draw(mix(edit=1), Known(held={**nearly_gone, **good}, now=now))
    assert {(op.f, op.args["path"]) for op in ops} == {("edit", FILES.paths[2])}


def test_at_max_held_a_claim_becomes_a_release() -> None:
    held = {FILES.paths[0]: Held("exclusive", 1, 2e9), FILES.paths[1]: Held("exclusive", 2, 2e9)}
    ops = draw(mix(lease_claim=1), Known(held=held, now=1.0))
    assert {op.f for op in ops} == {"lease_release"}


def test_messages_follow_what_the_agent_knows() -> None:
    assert {op.f for op in draw(mix(msg_ack=1), Known())} == {"msg_recv"}
    acks = draw(mix(msg_ack=1), Known(unacked=(12, 15)))
    assert {(op.f, op.args["message_id"]) for op in acks} == {("msg_ack", 12)}
    lonely = draw(mix(send_session=1), Known())
    assert {(op.args["to"], op.kind) for op in lonely} == {("*", "broadcast")}
    peers = ("aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb")
    assert {op.args["to"] for op in draw(mix(send_session=1), Known(peers=peers))} == {*peers, workload.SELF}
    again = [op for op in draw(mix(msg_ack=1), Known(unacked=(7,), acked=(3, 5))) if op.kind == "again"]
    assert again and {op.args["message_id"] for op in again} == {3, 5}  # acks of what it acked: a no-op
    assert {op.args["to"] for op in draw(mix(send_tag=1), Known())} == {"tag:backend", "tag:ops"}
    files = {op.args["to"] for op in draw(mix(send_file=1), Known())}
    bases = [p.rsplit("/", 1)[1] for p in FILES.paths]
    forms = {f"file:{b}" for b in bases} | {f"file:src/{b}" for b in bases} | {f"file:{p}" for p in FILES.paths} \
        | {f"file:{b[:-4]}*" for b in bases} | {"file:*.py"}
    assert files <= forms and len(files) > 5  # base name, holder-relative, absolute, globs
    seen = draw(mix(msg_ack=1), Known(unacked=(12,), seen=(40, 41)))
    assert {op.args["message_id"] for op in seen} == {12, 40, 41}  # some acks of what a room's history showed


def test_stale_lease_calls_and_the_reads() -> None:
    held = {FILES.paths[0]: Held("exclusive", 1, 5.0), FILES.paths[1]: Held("shared", 2, 3.0)}
    stale = draw(mix(renew_stale=1), Known(held=held, now=1.0))
    assert {(op.f, op.args["path"], op.kind) for op in stale} == {("lease_renew", FILES.paths[1], "stale")}
    gone = draw(mix(release_stale=1), Known(stale=(FILES.paths[2],)))
    assert {(op.f, op.args["path"]) for op in gone} == {("lease_release", FILES.paths[2])}
    paused = draw(mix(unread_paused=1), Known())  # the agent sleeps past a message ttl_s first
    assert {(op.f, op.kind) for op in paused} == {("msg_unread", "paused")}
    reads = {op.f for op in draw(mix(msg_unread=1, msg_sent=1, room_history=1, lease_check=1, lease_list=1,
                                     rejoin=1, set_cap=1), Known())}
    assert reads == {"msg_unread", "msg_sent", "room_history", "lease_check", "lease_list", "rejoin",
                     "room_set_autonomy_cap"}


def test_reads_drift_and_rooms() -> None:
    assert {op.f for op in draw(mix(drift_check=1), Known())} == {"note_read"}
    checks = draw(mix(drift_check=1), Known(reads=(FILES.paths[4],)))
    assert {(op.f, op.args["path"]) for op in checks} == {("drift_check", FILES.paths[4])}
    # the read longest ago (first) half the time; a read it was since denied a lease on, always
    reads = (FILES.paths[1], FILES.paths[4], FILES.paths[5])
    paths = [op.args["path"] for op in draw(mix(drift_check=1), Known(reads=reads), n=400)]
    assert paths.count(FILES.paths[1]) / len(paths) == pytest.approx(0.5 + 0.5 / 3, abs=0.07)
    assert {op.args["path"] for op in draw(mix(drift_check=1), Known(reads=reads, contested=(FILES.paths[5],)))} \
        == {FILES.paths[5]}
    assert {(op.f, op.args.get("room")) for op in draw(mix(leave_room=1), Known())} == {
        ("room_leave_room", "team"), ("room_leave_room", workload.NOWHERE)}  # and a room it is not in
    assert {op.f for op in draw(mix(churn=1, room_who=1), Known())} == {"churn", "room_who"}


def test_the_mix_sets_the_proportions() -> None:
    ops = draw(mix(msg_recv=3, room_who=1), Known(), n=4000)
    share = sum(op.f == "msg_recv" for op in ops) / len(ops)
    assert share == pytest.approx(0.75, abs=0.03)


def test_hot_paths_get_their_share() -> None:
    rng = random.Random(5)
    hot = Workload(hot_fraction=1.0, mix=(("msg_recv", 1),))
    assert {pick_path(hot, FILES, rng) for _ in range(500)} == set(FILES.paths[:2])
    cold = Workload(hot_fraction=0.0, mix=(("msg_recv", 1),))
    assert {pick_path(cold, FILES, rng) for _ in range(2000)} == set(FILES.paths)
    half = Workload(hot_fraction=0.5, mix=(("msg_recv", 1),))
    picks = [pick_path(half, FILES, rng) for _ in range(6000)]
    # half go to the 2 hot files, the other half spread over all 6 (2 of which are hot)
    assert sum(p in FILES.paths[:2] for p in picks) / len(picks) == pytest.approx(0.5 + 0.5 * 2 / 6, abs=0.03)


def test_body_has_the_size_and_starts_with_the_tag() -> None:
    assert body(64, "a01#7").startswith("a01#7 ") and len(body(64, "a01#7")) == 64
    assert body(0, "a01#7") == ""


def test_acks_of_what_a_history_showed_and_the_old_session_id() -> None:
    # only messages no recv of its own returned (nor its own sends); none: a room's history first
    acks = draw(mix(ack_seen=1), Known(seen=(40, 41, 42), got=(41,)))
    assert {(op.f, op.args["message_id"], op.kind) for op in acks} == {("msg_ack", 40, "seen"), ("msg_ack", 42, "seen")}
    first = draw(mix(ack_seen=1), Known(seen=(41,), got=(41,)))
    assert {(op.f, op.args["limit"]) for op in first} == {("room_history", 50)}
    assert {op.f for op in draw(mix(stale_session=1), Known())} == {"stale_session"}


def test_mode_changes_claim_a_held_lease_in_the_other_mode() -> None:
    held = {FILES.paths[3]: Held("shared", 5, 1e12), FILES.paths[4]: Held("exclusive", 6, 1e12)}
    ops = draw(mix(mode_change=1), Known(held=held))
    assert {(op.f, op.args["path"], op.args["mode"], op.kind) for op in ops} == {
        ("lease_claim", FILES.paths[3], "exclusive", "upgrade"), ("lease_claim", FILES.paths[4], "shared", "step-down")}
    # upgrades first: three in four, plus half of the rest (1,000 draws: 0.875 expected)
    upgrades = sum(op.kind == "upgrade" for op in draw(mix(mode_change=1), Known(held=held), n=1000))
    assert 820 <= upgrades <= 930
    # a path a lease_check listed it first of several sharers on: upgraded at once, whatever
    # the draw (in a mix with mode changes)
    first = draw(mix(mode_change=1, room_who=9), Known(held=held, first_sharer=FILES.paths[3]))
    assert {(op.args["path"], op.args["mode"], op.kind) for op in first} == {(FILES.paths[3], "exclusive", "upgrade")}
    assert {op.f for op in draw(mix(room_who=1), Known(held=held, first_sharer=FILES.paths[3]))} == {"room_who"}
    # holding none: a shared claim of a hot path, to upgrade next time
    assert {(op.args["path"], op.args["mode"]) for op in draw(mix(mode_change=1), Known())} == {
        (FILES.paths[0], "shared"), (FILES.paths[1], "shared")}


def test_lease_checks_look_at_a_shared_lease_it_holds_half_the_time() -> None:
    held = {FILES.paths[5]: Held("shared", 5, 1e12), FILES.paths[4]: Held("exclusive", 6, 1e12)}
    paths = [op.args["path"] for op in draw(mix(lease_check=1), Known(held=held), n=400)]
    assert paths.count(FILES.paths[5]) / len(paths) == pytest.approx(0.5 + 0.5 / 6 * 0.5, abs=0.07)
    assert len(set(paths)) > 2  # and any other path the rest of the time


def test_a_refactor_claims_a_directory_written_with_its_slash() -> None:
    ops = draw(mix(refactor=1), Known())
    assert {op.args["path"] for op in ops} == {"/r/src/", "/r/", "/r/src/mod_0/"}
    assert all(op.f == "lease_claim" and op.kind == "directory" for op in ops)
    assert workload.directories(FILES)[2] == "/r/src/mod_0/"  # beside src/mod_00.py: a prefix, not a parent


def test_a_file_slash_claims_one_of_its_files_written_as_a_folder() -> None:
    ops = draw(mix(file_slash=1), Known())
    assert {op.args["path"] for op in ops} == {f + "/" for f in FILES.paths}
    assert all(op.f == "lease_claim" and op.kind == "file-slash" for op in ops)
    assert {op.args["mode"] for op in ops} == {"shared", "exclusive"}
    checks = draw(mix(check_directory=1), Known())
    assert {op.args["path"] for op in checks} == set(workload.directories(FILES))
    assert all(op.f == "lease_check" and op.kind == "directory" for op in checks)


def test_an_edit_may_go_under_an_exclusive_directory_lease() -> None:
    now = 1000.0
    src = {"/r/src/": Held("exclusive", 7, now + 10)}
    ops = draw(mix(edit=1), Known(held=src, now=now))
    assert {op.f for op in ops} == {"edit"} and {op.args["under"] for op in ops} == {"/r/src/"}
    assert {op.args["path"] for op in ops} == set(FILES.paths)
    assert {op.f for op in draw(mix(edit=1), Known(held={"/r/src/mod_0/": Held("exclusive", 8, now + 10)}, now=now))} \
        == {"lease_claim"}  # nothing beneath a new package: nothing to write
    assert {op.f for op in draw(mix(edit=1), Known(held={"/r/src/": Held("shared", 9, now + 10)}, now=now))} \
        == {"lease_claim"}


def test_with_nothing_to_write_under_an_edit_claims_a_directory_as_often_as_refactors_are_drawn() -> None:
    ops = draw(mix(edit=1, refactor=3, lease_claim=1), Known(), n=2000)
    claims = [op for op in ops if op.f == "lease_claim"]
    dirs = sum(op.args["path"].endswith("/") for op in claims) / len(claims)
    assert 0.7 < dirs < 0.8  # 3/5 of the draws are refactors; of the 1/5 edits, 3/4 claim a directory: 0.75
