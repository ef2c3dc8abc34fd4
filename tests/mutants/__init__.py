"""Deliberately broken stores: each is the shipped store with one realistic bug, opened by
the simulator's direct driver through ``SIM_STORE_FACTORY=mutants.<module>:<factory>`` (with
``tests/`` on ``PYTHONPATH``). They exist to prove that the lease-atomicity regression and
the checker catch the bugs they are there for; nothing outside ``tests/`` imports them.

``MUTANTS`` names each one, the factory that opens it, and the invariants that must flag it:
``replay`` from the store's events, ``blackbox`` from the clients' history alone (empty where
the bug is not about leases); ``scope`` is every invariant it may break at all, so a checker
that blames the wrong thing fails too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
REGRESSION = SCENARIOS / "regression.toml"
ORACLE = SCENARIOS / "oracle.toml"
WAKE = SCENARIOS / "wake.toml"
REFACTOR = SCENARIOS / "refactor.toml"
MOVED = SCENARIOS / "moved.toml"

# A broken lease store may also answer drift checks wrongly (they are judged against who held
# the path), so drift-truth is within a lease bug's scope; a delivery bug has no business there.
LEASE = ("lease-exclusive", "lease-token-monotonic", "lease-release-held", "lease-windows", "drift-truth",
         # the oracle's lease groups, and what reads leases: file: selectors, lease_check/lease_list
         "lease-ttl", "lease-rules", "selectors", "read-answers")
DELIVERY = ("delivery-forward", "delivery-exactly-once",
            # the oracle sees a broken recv from its side too: what a recv had to read, what the
            # reads answer, and a read of a message whose ttl_s passed
            "recv-order", "read-answers", "expiry")


@dataclass(frozen=True)
class Mutant:
    name: str
    factory: str  # module:callable, relative to tests/
    bug: str
    replay: tuple[str, ...]  # invariants of the event replay that must be violated
    blackbox: tuple[str, ...] = ()  # the black box's, where it applies
    scope: tuple[str, ...] = LEASE  # the only invariants it may break
    scenario: Path = REGRESSION  # the scenario that catches it (rates.py runs it there)
    ci: bool = True  # run in the default test run (tests/regression/test_mutants.py); else rates.py only
    postgres_only: bool = False  # a mutant of PostgreSQL's lease functions (mutants/leases_pg.py)


MUTANTS = (
    Mutant("check-then-act", "mutants.leases:check_then_act",
           "the holder check and the insert run in two transactions",
           ("lease-exclusive",), ("lease-windows",)),
    Mutant("deferred-begin", "mutants.leases:deferred_begin",
           "BEGIN (deferred), a claim that reads before it writes, and a busy upgrade retried "
           "in a new transaction as if nothing had been read",
           ("lease-exclusive",), ("lease-windows",)),
    Mutant("early-expiry", "mutants.leases:early_expiry",
           "the expiry sweep compares acquired_at + ttl_s, forgetting renewals: a live lease is swept",
           ("lease-release-held", "lease-exclusive"), ("lease-windows",)),
    Mutant("shared-beside-exclusive", "mutants.leases:shared_ignores_exclusive",
           "a shared claim does not look for an exclusive holder",
           ("lease-exclusive",), ("lease-windows",)),
    Mutant("spelling-keyed", "mutants.spellings:spelling_keyed",
           "paths keyed by the caller's spelling (abspath, no symlink resolved, no device and inode): one file "
           "reached through a symlink is two leases",
           # (spelling alone is now mostly met by the identity lookups, which find a file's two spellings by
           # its inode and its name in its folder, and the leases beneath a directory by its identity: a
           # store of spellings without identities is the pre-canonical store this mutant stands for)
           ("lease-exclusive", "lease-windows")),
    Mutant("dotdot-as-text", "mutants.spellings:dotdot_as_text",
           "`..` collapsed as text before a path is resolved: <repo>/via/../x.py (via -> src/pkg) is keyed "
           "<repo>/x.py, another file: the store's events name other files than the clients' calls",
           # (the checker puts every path in its kernel spelling: the events' keys are not the files claimed)
           ("history-events",), ("lease-windows",), scope=(*LEASE, "history-events")),
    Mutant("beneath-unresolved", "mutants.spellings:beneath_unresolved",
           "no symlink resolved beneath a canonical cwd, no device and inode looked up: a symlinked folder inside "
           "the repository (alias -> src) is another folder to leases, file: targets and reads",
           ("lease-exclusive",), (), ci=False),
    Mutant("file-slash-granted", "mutants.spellings:file_slash_granted",
           "x.py/ on an existing regular file taken for a folder: granted as a directory lease beside another "
           "session's exclusive lease of x.py, contending with nothing",
           ("lease-rules",), (), ci=False),
    Mutant("identity-blind", "mutants.spellings:identity_blind",
           "no identity (device and inode) recorded or looked up: once src/ is renamed under live leases and a "
           "symlink left in its place, a claim by the file's new name is granted beside the lease under its old",
           ("lease-exclusive",), (), ci=False),
    Mutant("rename-second-row", "mutants.spellings:rename_second_row",
           "a holder claiming its file by its new name (a folder above renamed) is not taken to hold it: a second "
           "row of one file for one session",
           ("lease-release-held",), (), ci=False),
    Mutant("name-unrecorded", "mutants.spellings:name_unrecorded",
           "a lease records its file's inode alone, never its name in its folder (schema 6's name_ident): once its "
           "holder's edit saved the file by rename and src/ was renamed, a claim by the file's new name is granted "
           "beside the lease under its old, and its holder's own claim by the new name takes a second row",
           # (another's claim while such a lease lives: lease-exclusive, in 24 runs of 24 (1 to 19 a run); its
           # holder's re-claim by the new name: lease-release-held, mostly)
           ("lease-exclusive",), ()),
    Mutant("renamed-beneath-unseen", "mutants.spellings:renamed_beneath_unseen",
           "directory claims and checks see beneath them by path alone: src.moved/ granted over, and its lease_check "
           "blind to, leases taken beneath it as src/",
           # (caught by either: a grant needs every lease beneath in its way to be under the old name,
           # lease-exclusive; a check_directory in the few seconds such leases live, read-answers' RD3)
           (), (), scenario=MOVED, ci=False),
    Mutant("file-target-as-stored", "mutants.spellings:file_target_as_stored",
           "file: targets match stored lease paths alone: a target by a folder's new name misses holders under its "
           "old one, and src/x.py the holders of src.moved/x.py",
           ("selectors",), (), scenario=MOVED, ci=False),
    Mutant("mount-blind", "mutants.spellings:mount_blind",
           "blind to a second mount of a folder beyond a lease's own identity: directory claims and checks see "
           "beneath them, file: targets reach, and drift reads lease events, by name alone: bound/<repo>/src/ "
           "(a bind mount of the repository) granted over leases of repos/<repo>/src/x.py",
           # (caught by any: lease-exclusive, or a check's RD3, a file: send's SE3, a drift check's drift-truth)
           (), (), ci=False),
    Mutant("pg-claim-unlocked", "mutants.leases_pg:claim_without_lock",
           "PostgreSQL's claim function forgets the write lock: claims of one path check and grant concurrently",
           # (its race window is one function's run, ~0.2 ms: missed by some runs of the scenario, so
           # rates.py only; tests/regression/test_mutant_bugs.py forces the interleaving every time)
           ("lease-exclusive",), ("lease-windows",), ci=False, postgres_only=True),
    Mutant("pg-claim-ignores-directories", "mutants.leases_pg:claim_ignores_directories",
           "PostgreSQL's claim function looks up the path's own holders only: no directory above or beneath",
           # (the black box compares a path's own windows: directory coverage is the replay's, as for directory-one-way)
           ("lease-exclusive",), postgres_only=True),
    Mutant("duplicate-delivery", "mutants.deliveries:duplicate_delivery",
           "a broadcast inserts one delivery per shared room (no DISTINCT, no primary key)",
           ("delivery-exactly-once", "delivery-forward"), scope=DELIVERY),
    Mutant("recv-two-transactions", "mutants.deliveries:recv_two_transactions",
           "msg_recv reads a page in one transaction and marks 'the first page of unread' in another",
           ("delivery-exactly-once",), scope=DELIVERY),
    Mutant("backward-delivery", "mutants.deliveries:backward_delivery",
           "msg_recv marks everything up to the newest id read (acked moves back to read), trigger dropped",
           ("delivery-forward",), scope=DELIVERY),
)


def _rule(name: str, must: tuple[str, ...], scope: tuple[str, ...] = (), *, ci: bool = False,
          blackbox: tuple[str, ...] = (), scenario: Path = ORACLE) -> Mutant:
    """A mutant of ``mutants/rules.py``: ``must`` the invariants that must flag it, ``scope``
    what else its bug may break (its consequences in other rules)."""
    from . import rules  # noqa: PLC0415

    factory = f"mutants.rules:{name}"
    bug = (getattr(rules, name).__doc__ or "").strip()
    return Mutant(name.replace("_", "-"), factory, bug, must, blackbox, tuple(dict.fromkeys((*must, *blackbox, *scope))),
                  scenario, ci)


# The oracle's mutants (tests/mutants/rules.py): at least one per rule group. ``ci`` marks the
# one per group that the default test run checks; rates.py runs them all.
LEASE_ALL = (*LEASE, "leave-effects")
ORACLE_MUTANTS = (
    _rule("rejoin_skips_rooms", ("sessions",), ("selectors", "read-answers", "autonomy", "leave-effects")),
    _rule("rejoin_new_session", ("sessions",), ("selectors", "read-answers", "autonomy", "lease-rules", "recv-order")),
    _rule("leave_keeps_memberships", ("selectors",), ("sessions", "read-answers", "leave-effects")),
    _rule("message_first_room_only", ("selectors",), ("read-answers",)),
    _rule("broadcast_to_sender", ("selectors",), ci=True),
    _rule("rooms_ignored", ("selectors",)),
    _rule("tag_compared_as_range", ("selectors",)),
    _rule("file_no_relative", ("selectors",)),
    _rule("file_relative_to_sender", ("selectors",)),
    _rule("departed_recipient", ("selectors",), ("sessions",), ci=True),
    _rule("expire_all", ("expiry",), ("recv-order", "ack"), ci=True),
    _rule("ttl_in_ms", ("expiry",), ("recv-order", "read-answers", "ack")),
    _rule("read_overdue", ("expiry",), ("recv-order", "read-answers")),
    _rule("recv_newest_first", ("recv-order",), ci=True),
    _rule("recv_limit_plus_one", ("recv-order",)),
    _rule("recv_stored_only", ("recv-order",), ("delivery-exactly-once", "read-answers", "ack")),
    _rule("history_marks_read", ("recv-order", "delivery-exactly-once"), ("read-answers", "ack"), ci=True),
    _rule("ack_any_recipient", ("ack",), ci=True),
    _rule("shared_lease_1ms", ("lease-ttl",), LEASE_ALL, ci=True),
    _rule("renew_keeps_ttl", ("lease-ttl",), LEASE_ALL),
    _rule("sweep_grace", ("lease-release-held",), LEASE_ALL),
    _rule("release_whole_path", ("lease-release-held",), LEASE_ALL),
    _rule("renew_same_token", ("lease-token-monotonic",), (*LEASE_ALL, "history-events")),  # renewals matched by token
    _rule("upgrade_beside_sharers", ("lease-exclusive",), LEASE_ALL, blackbox=("lease-windows",)),
    _rule("shared_denied_by_shared", ("lease-rules",), LEASE_ALL, ci=True),
    _rule("renew_exclusive_only", ("lease-rules",), LEASE_ALL),
    _rule("release_exclusive_only", ("lease-rules",), LEASE_ALL),
    _rule("leave_keeps_leases", ("leave-effects",), LEASE_ALL, ci=True),
    _rule("leave_keeps_unread", ("leave-effects",), DELIVERY),
    _rule("new_session_ignores_ask", ("autonomy",)),
    _rule("rejoin_lowers", ("autonomy",)),
    _rule("rejoin_not_clamped", ("autonomy",), ci=True),
    _rule("cap_off_by_one", ("autonomy",)),
    _rule("unread_counts_unacked", ("read-answers",)),
    _rule("unread_counts_overdue", ("read-answers",)),
    _rule("who_all_sessions", ("read-answers",), ci=True),
    _rule("lease_check_first_holder", ("read-answers",)),
    _rule("lease_list_one_per_path", ("read-answers",)),
    _rule("history_oldest_page", ("read-answers",)),
    _rule("sent_pending_counts_read", ("read-answers",)),
    _rule("drift_ignores_later_grants", ("drift-truth",), scenario=REGRESSION),
    # directory leases (store/coverage.py), each in the default run: the oracle's own coverage rule (sim/check/cover.py)
    _rule("prefix_no_boundary", ("lease-rules",), LEASE_ALL, ci=True),
    _rule("directory_one_way", ("lease-exclusive",), LEASE_ALL, ci=True),
    # (an expired directory lease left in place is renewed or released by its holder: refactor.toml's short leases)
    _rule("sweep_skips_directories", ("lease-release-held",), LEASE_ALL, scenario=REFACTOR, ci=True),
    _rule("file_ignores_directories", ("selectors",), ci=True),
    # (a file edited under another's directory lease after a read, then checked: refactor.toml).
    # The whole bug, drift blind to directories, is caught in every run; its subtle half (a
    # directory granted only after the read, nobody holding one at the read) in a few: rates.py.
    _rule("drift_blind_to_directories", ("drift-truth",), LEASE_ALL, scenario=REFACTOR, ci=True),
    _rule("drift_ignores_directories", ("drift-truth",), LEASE_ALL, scenario=REFACTOR),
    # the rules that had a check and no mutant of their own (docs/history.md's audit)
    _rule("leave_room_clears_all", ("sessions",), ("selectors", "read-answers", "autonomy")),
    _rule("departed_session_acts", ("sessions",), ("selectors", "read-answers", "expiry", "recv-order"), ci=True),
    # (a departed reader's delivery acked too; an ack event its session never asked for)
    _rule("ack_all_readers", ("ack",), ("read-answers", "sessions", "history-events")),
    _rule("ack_read_only_lookup", ("ack",)),
    _rule("sent_hides_undeliverable", ("delivery-exactly-once",)),
    _rule("claim_keeps_exclusive", ("lease-ttl",), LEASE_ALL),
    _rule("inbox_read_forgets_acked", ("read-answers",)),
    _rule("undeliverable_or_for_and", ("autonomy",)),
    _rule("denial_names_first_holder", ("lease-rules",), LEASE_ALL),
    _rule("who_unknown_with_pid", ("read-answers",)),
    # found by a hunt for escapes: each prompted the check that catches it
    _rule("history_default_not_repo", ("read-answers",)),
    _rule("cap_lowers_everyone", ("autonomy",)),
    _rule("sent_overdue_shown_unread", ("read-answers",), scenario=WAKE),  # its sleepers leave mail overdue
    _rule("sent_left_inverted", ("read-answers",)),
    _rule("double_ack_refused", ("ack",)),
    _rule("leave_room_always_refused", ("sessions",)),
    _rule("leave_room_not_in_ok", ("sessions",)),
    _rule("refusal_no_warning", ("autonomy",)),
    _rule("send_no_warning", ("selectors",)),
    _rule("self_send_dropped", ("selectors",)),
    _rule("claim_no_sweep", ("lease-ttl",), LEASE_ALL),
    _rule("sweep_without_event", ("lease-ttl",), LEASE_ALL),
    _rule("lease_default_ttl_60", ("lease-ttl",), LEASE_ALL),
    _rule("renew_default_600", ("lease-ttl",), LEASE_ALL),
    _rule("confirm_never", ("wake",), scenario=WAKE),
    _rule("touch_forgotten", ("wake",), scenario=WAKE),
    # found by a second hunt
    _rule("rejoin_tags_kept", ("selectors",)),
    _rule("who_room_ignored", ("read-answers",)),
    _rule("cap_event_anonymous", ("history-events",)),
    _rule("send_event_ttl_missing", ("expiry",)),
    _rule("renew_event_mode_exclusive", ("lease-ttl",), LEASE_ALL),
    _rule("recv_label_of_recipient", ("recv-order",)),
    _rule("sent_pending_skips_undeliverable", ("read-answers",), scenario=WAKE),  # its deaf agent: undeliverable
    # the wake lever's rules, on scenarios/wake.toml
    _rule("offer_any_level", ("wake",), scenario=WAKE, ci=True),
    _rule("offer_expired", ("wake",), scenario=WAKE),
    _rule("retry_names_all", ("wake",), scenario=WAKE),
    _rule("retry_flipped", ("wake",), scenario=WAKE),
    _rule("retry_without_event", ("wake",), scenario=WAKE),
    _rule("confirm_by_created", ("wake",), scenario=WAKE),
)
MUTANTS = MUTANTS + ORACLE_MUTANTS
BY_NAME = {m.name: m for m in MUTANTS}
