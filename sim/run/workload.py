"""What an agent does next: pure functions of a seeded ``random.Random``, the scenario's
workload and a snapshot of what the agent knows (leases it holds, files it read, messages
it has not acked, peers it has seen). No I/O here, so a seed replays the same choices for
the same answers.

A mix entry that makes no sense in the agent's state (release with nothing held, ack with
nothing read) becomes the operation that would make it possible next time (claim, recv),
the way a real agent works towards what it wants to do.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..scenario.scenario import OpenLoop, Think, Workload
from ..scenario.think import draw_ms

# Operations that take SQLite's write lock (the rest are read transactions): the ones whose
# longest latency is the "longest wait for the write lock" of the fairness table.
WRITE_OPS = frozenset({"room_join", "room_leave", "room_leave_room", "msg_send", "msg_recv", "msg_ack",
                       "lease_claim", "lease_renew", "lease_release", "note_read", "guarded_edit"})


@dataclass(frozen=True)
class Held:
    """A lease the agent believes it holds, as the store answered the grant or renewal."""

    mode: str
    token: int
    expires_at: float  # store clock, Unix seconds


@dataclass(frozen=True)
class Known:
    """A snapshot of the agent's own knowledge, the generator's only input besides the rng."""

    held: dict[str, Held] = field(default_factory=dict)
    reads: tuple[str, ...] = ()  # paths it note_read, the one read longest ago first
    unacked: tuple[int, ...] = ()
    peers: tuple[str, ...] = ()
    now: float = 0.0  # wall clock, the store's clock
    stale: tuple[str, ...] = ()  # paths whose lease ran out while the agent held it (by its clock)
    seen: tuple[int, ...] = ()  # message ids a room_history answer showed
    got: tuple[int, ...] = ()  # message ids its own msg_recv answers returned, and its own sends (the latest)
    contested: tuple[str, ...] = ()  # paths it read, then was denied a lease on: another took them since
    first_sharer: str | None = None  # a path a lease_check listed it first of several sharers
    acked: tuple[int, ...] = ()  # message ids its own msg_ack answered ok (the latest)


@dataclass(frozen=True)
class Op:
    """One operation to perform: ``f`` is a tool name, ``edit`` or ``churn`` (leave every room
    and join again: a new session); ``kind`` refines ``f`` for the report (selector kind)."""

    f: str
    args: dict[str, Any]
    kind: str = ""


@dataclass(frozen=True)
class Files:
    """The files an agent may touch: all of its repo's, the first ``hot`` of them hot."""

    paths: tuple[str, ...]
    hot: int
    tags: tuple[str, ...] = ()
    rooms: tuple[str, ...] = ()


def think_time(think: Think, rng: random.Random) -> float:
    """Seconds to wait after an answer before the next operation (closed loop)."""
    if think.kind == "zero" or think.mean_ms <= 0:
        return 0.0
    if think.kind == "fixed":
        return think.mean_ms / 1000
    if think.kind == "empirical":
        return draw_ms(think.quantiles_ms, rng.random()) / 1000
    return rng.expovariate(1000 / think.mean_ms)


def schedule(open_loop: OpenLoop, start_ns: int, end_ns: int, rng: random.Random) -> Iterator[int]:
    """Intended start times (monotonic ns) of an open-loop agent: Poisson arrivals at the
    given rate, or evenly spaced with a random phase. Independent of how fast answers come,
    which is the point: a stall makes later operations late instead of hiding them."""
    gap_ns = 1e9 / open_loop.rate_per_agent
    t = start_ns + (rng.random() * gap_ns if open_loop.arrivals == "uniform" else rng.expovariate(1 / gap_ns))
    while t < end_ns:
        yield int(t)
        t += gap_ns if open_loop.arrivals == "uniform" else rng.expovariate(1 / gap_ns)


def pick_path(w: Workload, files: Files, rng: random.Random) -> str:
    hot = min(files.hot, len(files.paths))
    if hot and rng.random() < w.hot_fraction:
        return files.paths[rng.randrange(hot)]
    return files.paths[rng.randrange(len(files.paths))]


def _claim(w: Workload, files: Files, known: Known, rng: random.Random, mode: str | None = None) -> Op:
    if len(known.held) >= w.max_held:
        return _release(known, rng)
    path = pick_path(w, files, rng)
    if mode is None:
        mode = "shared" if rng.random() < w.shared_fraction else "exclusive"
    return Op("lease_claim", {"path": path, **_ttl(w, rng), "mode": mode})


def directories(files: Files) -> tuple[str, ...]:
    """The directories a refactor claims (always written with the trailing ``/``): the repo's
    ``src/`` (over every file), the repo itself, and a new package named like the modules'
    common prefix (``src/mod_0/``: nothing beneath it yet, while ``src/mod_00.py`` beside it
    shares its name up to the ``/``: a prefix that is not a parent)."""
    if not files.paths:
        return ()
    src, base = files.paths[0].rsplit("/", 1)
    stem = base.rsplit(".", 1)[0]
    return (src + "/", src.rsplit("/", 1)[0] + "/", f"{src}/{stem[:-1] or stem}/")


def _refactor(w: Workload, files: Files, known: Known, rng: random.Random) -> Op:
    """A directory claim: a refactor takes ``src/`` (most often), the whole repo, or a new package."""
    if len(known.held) >= w.max_held:
        return _release(known, rng)
    src, repo, package = directories(files)
    path = rng.choices((src, repo, package), (0.5, 0.2, 0.3))[0]
    mode = "shared" if rng.random() < w.shared_fraction else "exclusive"
    return Op("lease_claim", {"path": path, **_ttl(w, rng), "mode": mode}, "directory")


def _file_slash(w: Workload, files: Files, rng: random.Random) -> Op:
    """A claim of one of its files as a folder (``mod_00.py/``): refused ``invalid_argument`` (LR6)."""
    mode = "shared" if rng.random() < w.shared_fraction else "exclusive"
    return Op("lease_claim", {"path": pick_path(w, files, rng) + "/", **_ttl(w, rng), "mode": mode}, "file-slash")


def _writable(w: Workload, files: Files, known: Known) -> list[tuple[str, str]]:
    """(file, the lease it is written under): files held exclusive, and files beneath a
    directory held exclusive, with time left on the lease."""
    out = []
    for path, h in sorted(known.held.items()):
        if h.mode != "exclusive" or h.expires_at - known.now <= w.edit_margin_s:
            continue
        if path.endswith("/"):
            out += [(f, path) for f in files.paths if f.startswith(path)]
        else:
            out.append((path, path))
    return out


def _ttl(w: Workload, rng: random.Random) -> dict[str, Any]:
    """A lease call's ttl_s drawn from ``lease_ttl_s``; a 0 leaves it out (the store's default:
    600 s for a claim, the lease's own for a renewal)."""
    ttl = rng.choice(w.lease_ttl_s)
    return {"ttl_s": ttl} if ttl else {}


def _release(known: Known, rng: random.Random) -> Op:
    path = rng.choice(sorted(known.held))
    return Op("lease_release", {"path": path})


def _send(kind: str, w: Workload, files: Files, known: Known, rng: random.Random) -> Op:
    if kind == "session" and known.peers:
        to = rng.choice((*known.peers, SELF))  # now and then its own id: a message to oneself is delivered
    elif kind == "tag" and files.tags:
        to = "tag:" + rng.choice(files.tags)
    elif kind == "file" and files.paths:
        path = pick_path(w, files, rng)
        base = path.rsplit("/", 1)[-1]
        # the three forms a leased path is matched in: base name, path relative to the holder's
        # cwd (the sender's own repo layout, so it also matches other repos' holders), absolute;
        # and a glob
        to = "file:" + rng.choice((base, "src/" + base, path, base[:-4] + "*", "*.py"))
    else:
        kind, to = "broadcast", "*"
    args: dict[str, Any] = {"to": to}
    if w.message_ttl_s:
        ttl = rng.choice(w.message_ttl_s)
        if ttl:
            args["ttl_s"] = ttl
    return Op("msg_send", args, kind)


# The most unacked message ids an agent keeps in mind (the oldest go first).
MAX_UNACKED = 200
# A session send's target that stands for the agent's own session id (``Agent.perform`` puts it in).
SELF = "@self"
# A room no agent ever joins: leaving it must be refused (invalid_argument).
NOWHERE = "nowhere"
LEVELS = ("hold", "notify", "wake")
# What the simulator's wake lever answers a signal (drivers.ScriptedLever): accepted, unknown, refused.
WAKE_ANSWERS = ("accept", "unknown", "refuse")


def _more(w: Workload, files: Files, known: Known, choice: str, rng: random.Random) -> Op:
    """The reads, the autonomy moves, and the stale lease calls and unread count of an agent
    that slept."""
    if choice == "msg_unread":
        return Op("msg_unread", {})
    if choice == "msg_sent":
        return Op("msg_sent", {"limit": rng.choice((1, 5, 50))})
    if choice == "room_history":
        room = {"room": rng.choice(files.rooms)} if files.rooms and rng.random() < 0.7 else {}
        return Op("room_history", {**room, "limit": rng.choice((1, 5, 50))})
    if choice == "lease_check":
        # half the time a path it holds shared: who else shares it (every sharer must show)
        shared = sorted(p for p, h in known.held.items() if h.mode == "shared")
        if shared and rng.random() < 0.5:
            return Op("lease_check", {"path": rng.choice(shared)})
        return Op("lease_check", {"path": pick_path(w, files, rng)})
    if choice == "lease_list":
        return Op("lease_list", {})
    if choice == "rejoin":  # now and then with another tag: a rejoin replaces the tags given
        tags = {"tags": [rng.choice(files.tags)]} if files.tags and rng.random() < 0.3 else {}
        return Op("rejoin", {"autonomy": rng.choice(LEVELS), **tags})
    if choice == "set_cap":
        room = {"room": rng.choice(files.rooms)} if files.rooms else {}
        return Op("room_set_autonomy_cap", {**room, "autonomy": rng.choice(LEVELS)})
    if choice in ("renew_stale", "release_stale"):
        # a lease that already ran out, else the one that runs out first: the agent sleeps
        # past its expiry before the call (``Agent.perform``), as a paused agent would
        if known.stale:
            path = rng.choice(known.stale)
        elif known.held:
            path = min(known.held, key=lambda p: known.held[p].expires_at)
        else:
            return _claim(w, files, known, rng)
        if choice == "renew_stale":
            return Op("lease_renew", {"path": path, **_ttl(w, rng)}, "stale")
        return Op("lease_release", {"path": path}, "stale")
    if choice == "unread_paused":
        # the agent sleeps past the shortest message ttl_s first (``Agent.perform``), as a
        # paused agent would, then checks its unread count before any recv
        return Op("msg_unread", {}, "paused")
    if choice == "stale_session":
        # leave, then one send under the id it left with (``Agent.perform``), then join anew:
        # the agent that kept its old id; the store must refuse it (unknown_session)
        return Op("stale_session", {})
    if choice == "ack_seen":
        # ack a message a room's history showed that no recv of its own returned: another's,
        # or its own still unread or expired (the store must refuse both, each its own way)
        foreign = [m for m in known.seen if m not in known.got]
        if not foreign:
            room = {"room": rng.choice(files.rooms)} if files.rooms and rng.random() < 0.7 else {}
            return Op("room_history", {**room, "limit": 50})
        # the newest are the likeliest still unread by it; the older, read by other recipients
        return Op("msg_ack", {"message_id": rng.choice(foreign[-5:] if rng.random() < 0.5 else foreign)}, "seen")
    if choice == "mode_change":
        # claim a lease it holds again in the other mode: an upgrade to exclusive (denied while
        # others share it: the denial must name one of them, never the claimer) or a step-down
        # to shared; holding none, a shared claim of a hot path, the likeliest to be shared.
        # Upgrades first: three times in four when it shares a path, of the path it has shared
        # longest (its oldest token: the likeliest others joined since; see next_op too).
        if known.held:
            shared = [p for p, h in known.held.items() if h.mode == "shared"]
            if shared and rng.random() < 0.75:
                path = min(shared, key=lambda p: known.held[p].token)
            else:
                path = rng.choice(sorted(known.held))
            mode = "shared" if known.held[path].mode == "exclusive" else "exclusive"
            return Op("lease_claim", {"path": path, **_ttl(w, rng), "mode": mode},
                      "upgrade" if mode == "exclusive" else "step-down")
        hot = files.paths[:max(1, files.hot)]
        return Op("lease_claim", {"path": rng.choice(hot), **_ttl(w, rng), "mode": "shared"})
    raise ValueError(f"unknown mix entry {choice!r}")


def next_op(w: Workload, files: Files, known: Known, rng: random.Random) -> Op:
    """Draw the next operation from the mix, given what the agent knows."""
    first = known.first_sharer
    if first is not None and first in known.held and known.held[first].mode == "shared" and w.weights().get("mode_change"):
        # its lease_check listed it first of several sharers: it tries to take the file for
        # itself at once (the one upgrade denied with the claimer itself the path's first
        # holder: a store that names the first holder names the claimer)
        return Op("lease_claim", {"path": first, **_ttl(w, rng), "mode": "exclusive"}, "upgrade")
    names, weights = zip(*[(k, v) for k, v in w.mix if v > 0], strict=True)
    choice = rng.choices(names, weights)[0]
    if choice == "lease_claim":
        return _claim(w, files, known, rng)
    if choice == "refactor":
        return _refactor(w, files, known, rng)
    if choice in ("file_slash", "check_directory"):  # a file as a folder; a directory's holders (every lease beneath)
        return _file_slash(w, files, rng) if choice == "file_slash" else Op("lease_check", {"path": rng.choice(directories(files))}, "directory")
    if choice in ("lease_renew", "lease_release"):
        if not known.held:
            return _claim(w, files, known, rng)
        if choice == "lease_release":
            return _release(known, rng)
        path = rng.choice(sorted(known.held))
        return Op("lease_renew", {"path": path, **_ttl(w, rng)})
    if choice == "edit":
        writable = _writable(w, files, known)
        if not writable:  # a lease to write under first: a file's, or (as often as refactors are drawn) a directory's
            weights = w.weights()
            refactors = weights.get("refactor", 0)
            if refactors and rng.random() < refactors / (refactors + weights.get("lease_claim", 0)):
                return _refactor(w, files, known, rng)
            return _claim(w, files, known, rng, mode="exclusive")
        path, lease = rng.choice(writable)
        return Op("edit", {"path": path, "under": lease})
    if choice == "guarded_edit":  # no lease first: the harness's edit guard is asked (sim/run/editguard.py)
        return Op("guarded_edit", {"path": pick_path(w, files, rng)})
    if choice.startswith("send_"):
        return _send(choice.removeprefix("send_"), w, files, known, rng)
    if choice == "msg_recv":
        return Op("msg_recv", {"limit": w.recv_limit})
    if choice == "msg_ack":
        draw = rng.random()
        if known.seen and draw < 0.2:  # a message seen in a room's history, maybe not ours
            return Op("msg_ack", {"message_id": rng.choice(known.seen)}, "seen")
        if known.acked and draw > 0.7:  # one it acked already: again is a no-op
            return Op("msg_ack", {"message_id": rng.choice(known.acked)}, "again")
        if not known.unacked:
            return Op("msg_recv", {"limit": w.recv_limit})
        return Op("msg_ack", {"message_id": known.unacked[0]})
    if choice == "note_read":
        return Op("note_read", {"path": pick_path(w, files, rng)})
    if choice == "drift_check":
        if not known.reads:
            return Op("note_read", {"path": pick_path(w, files, rng)})
        # first a path it read and was since denied (another took it: has it changed under
        # the agent?), else half the time the read longest ago, else any read
        if known.contested:
            return Op("drift_check", {"path": known.contested[0]})
        return Op("drift_check", {"path": known.reads[0] if rng.random() < 0.5 else rng.choice(known.reads)})
    if choice == "room_who":  # one time in four, the members of one of its shared rooms
        return Op("room_who", {"room": rng.choice(files.rooms)} if files.rooms and rng.random() < 0.25 else {})
    if choice == "leave_room":
        if not files.rooms:
            return Op("room_who", {})
        return Op("room_leave_room", {"room": rng.choice((*files.rooms, NOWHERE))})  # not in it: refused
    if choice == "churn":
        return Op("churn", {})
    if choice in ("wake", "wake_idle", "wake_turn"):
        # the agent's wake lever looks for due deliveries and signals them; the lever's answer
        # is drawn: the harness took it, cannot say, or refused. Idle: it looks again a retry
        # window later, with no tool call between (``Agent.perform``), as for an agent asleep.
        # Turn: it looks, takes a turn (one tool call that writes) and looks again, which must
        # accept what it signalled the first time.
        args = {"retry_s": w.wake_retry_s, "answer": rng.choice(WAKE_ANSWERS)}
        return Op("wake", args, choice.removeprefix("wake").removeprefix("_"))
    return _more(w, files, known, choice, rng)


def learn(k: Known, f: str, args: dict[str, Any], got: dict[str, Any] | None, session: str | None,
          last_error: str) -> Known:
    """What the agent knows after ``f`` answered ``got`` (None: it failed, with ``last_error``)."""
    held = k.held
    if f == "lease_claim" and got and got["ok"]:
        held = {**held, args["path"]: Held(got["mode"], got["token"], got["expires_at"])}
    elif f == "lease_renew" and got:
        held = {**held, args["path"]: Held(got["mode"], got["token"], got["expires_at"])}
    elif f in ("lease_release", "lease_renew") and (got is not None or last_error == "lease_not_held"):
        held = {p: h for p, h in held.items() if p != args["path"]}
    unacked = k.unacked
    if f == "msg_recv" and got:
        unacked = (unacked + tuple(got["message_ids"]))[-MAX_UNACKED:]
    elif f == "msg_ack":
        unacked = tuple(m for m in unacked if m != args["message_id"])
    reads = k.reads
    if f == "note_read" and got:  # oldest read first: a re-read moves the path to the end
        reads = tuple(p for p in reads if p != args["path"]) + (args["path"],)
    contested = k.contested
    if f == "lease_claim" and got and not got["ok"] and args["path"] in reads:
        contested = (tuple(p for p in contested if p != args["path"]) + (args["path"],))[-10:]
    elif f in ("drift_check", "note_read"):
        contested = tuple(p for p in contested if p != args["path"])
    peers = k.peers
    if f == "room_who" and got:
        peers = tuple(s for s in got["sessions"] if s and s != session)
    stale = tuple(p for p in k.stale if p != args.get("path")) if f in ("lease_renew", "lease_release") else k.stale
    seen = (k.seen + tuple(got["message_ids"]))[-50:] if f == "room_history" and got else k.seen
    mine = (k.got + tuple(got["message_ids"]))[-200:] if f == "msg_recv" and got else k.got
    mine = (mine + (got["message_id"],))[-200:] if f == "msg_send" and got else mine
    first = k.first_sharer
    if f == "lease_check" and got:  # listed first of several sharers: upgrade it next (workload)
        holders = got["holders"]
        if len(holders) > 1 and holders[0][0] == session and holders[0][1] == "shared":
            first = args["path"]
        elif first == args["path"]:
            first = None
    elif f == "lease_claim" and first == args["path"]:
        first = None  # upgraded, or denied: once
    acked = (k.acked + (args["message_id"],))[-10:] if f == "msg_ack" and got is not None else k.acked
    return Known(held, reads, unacked, peers, k.now, stale, seen, mine, contested, first, acked)


def body(n_bytes: int, tag: str) -> str:
    """A message body of ``n_bytes`` ASCII bytes that starts with the op tag."""
    text = f"{tag} " + "x" * n_bytes
    return text[:n_bytes]


def agent_rng(seed: int, agent_no: int, generation: int) -> random.Random:
    """The agent's own stream: the same scenario seed gives each agent a different, stable one."""
    return random.Random(f"{seed}/{agent_no}/{generation}")
