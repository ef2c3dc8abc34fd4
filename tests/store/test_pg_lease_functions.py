"""PostgreSQL's lease functions (claim, release, renew; store/postgres/migrate_4.sql, called in one round trip by
store/postgres/leasecalls.py) against the rules they stand in for (store/leases.py): the same
calls on two fresh stores of the same cluster, one through the functions and one through the
Python rules, must give the same answers, the same errors and the same events, payloads,
tokens and times included. A table of the cases the rules name, then a long seeded mix."""

from __future__ import annotations

import json
import random
from dataclasses import astuple
from pathlib import Path
from typing import Any

import pytest

import pgcluster
from agents_room.store import Clock, RoomError, Store

pytestmark = pytest.mark.postgres_only

START = 1_800_000_000.0
NOBODY = "0123456789abcdef"  # well-formed, never joined


class Twin:
    """One store and its session ids by name: ``served`` runs the functions, else the rules."""

    def __init__(self, url: str, served: bool, cwd: Path) -> None:
        self.clock = Clock(fixed=START)
        self.store = Store.open(url, clock=self.clock, busy_timeout_s=5.0)
        self.store.db.serves_leases = served
        self.url, self.ids = url, {}
        for name in ("ann", "bob", "cy"):
            self.ids[name] = self.store.room_join(cwd=str(cwd), pid=None, label=name).session_id
        self.ids["nobody"] = NOBODY
        self.seen = len(self.store.events())

    def words(self, text: str) -> str:
        """``text`` with this store's own ids and location named alike in both stores."""
        for name, sid in self.ids.items():
            text = text.replace(sid, f"<{name}>")
        return text.replace(self.url, "<store>")

    def run(self, who: str, op: str, path: str, mode: str = "exclusive", ttl: float = 60.0) -> Any:
        """The answer (or error) and the events it left, with ids and locations made alike."""
        try:
            if op == "claim":
                answer: Any = astuple(self.store.lease_claim(self.ids[who], path, ttl, mode))
            elif op == "renew":
                answer = astuple(self.store.lease_renew(self.ids[who], path, None if mode == "own" else ttl))
            else:
                answer = self.store.lease_release(self.ids[who], path)
        except RoomError as exc:
            answer = (type(exc).__name__, str(exc))
        events = self.store.events()
        new, self.seen = events[self.seen:], len(events)
        return (self.words(repr(answer)),
                [(e.kind, self.words(e.session_id or ""), e.path, json.loads(json.dumps(e.payload)), e.at)
                 for e in new])


@pytest.fixture
def twins(pg_cluster: Any, tmp_path: Path) -> Any:
    repo = tmp_path / "r"
    (repo / "sub" / "deep").mkdir(parents=True)
    served = Twin(pgcluster.new_schema(pg_cluster), True, repo)
    rules = Twin(pgcluster.new_schema(pg_cluster), False, repo)
    yield served, rules, repo
    served.store.close()
    rules.store.close()


def _same(twins: Any, steps: list[tuple]) -> None:
    served, rules, _repo = twins
    for step in steps:
        if step[0] == "wait":
            served.clock.shift(step[1])
            rules.clock.shift(step[1])
            continue
        got, want = served.run(*step), rules.run(*step)
        assert got == want, step


CASES = [
    ("ann", "claim", "a.py"), ("bob", "claim", "a.py"),  # deny an exclusive holder
    ("ann", "claim", "a.py", "exclusive", 30), ("ann", "claim", "a.py", "shared"),  # extend; step down
    ("bob", "claim", "a.py", "shared"), ("cy", "claim", "a.py", "shared"),  # sharers
    ("ann", "claim", "a.py"), ("bob", "release", "a.py"), ("cy", "release", "a.py"),  # upgrade denied; freed
    ("ann", "claim", "a.py"),  # now the upgrade is granted
    ("bob", "claim", "sub/"), ("cy", "claim", "sub/deep/x.py"), ("cy", "claim", "sub/deep/"),  # covered
    ("ann", "claim", "./"), ("ann", "claim", "./", "shared"),  # a directory above others' leases
    ("bob", "claim", "sub/y.py"), ("cy", "claim", "sub/", "shared"),  # own leases never stand in the way
    ("nobody", "claim", "a.py"), ("nobody", "release", "a.py"),  # unknown session
    ("bob", "release", "a.py"), ("bob", "release", "nothing.py"), ("bob", "release", "sub"),  # not held
    ("ann", "claim", str(Path("/elsewhere/abs.py"))), ("ann", "claim", ""),  # absolute; bad path
    ("ann", "renew", "a.py", "own"), ("ann", "renew", "a.py", "exclusive", 90), ("bob", "renew", "a.py"),
    ("bob", "renew", "sub/"), ("nobody", "renew", "a.py"),  # renewals: own ttl, new ttl, not held, unknown
    ("wait", 91.0),  # every lease runs out: swept (with events) by the next write
    ("cy", "claim", "sub/deep/x.py", "shared", 5), ("ann", "release", "a.py"),
    ("bob", "claim", "sub/", "shared", 2), ("wait", 3.0), ("ann", "claim", "sub/"), ("bob", "release", "sub/"),
]


def test_the_functions_answer_as_the_rules_do(twins: Any) -> None:
    _same(twins, CASES)


def test_a_long_mix_of_claims_releases_and_expiries(twins: Any) -> None:
    rng = random.Random(32)
    paths = ["a.py", "b.py", "sub/", "sub/c.py", "sub/deep/", "sub/deep/e.py", "./", "/", "/r2/x.py"]
    steps: list[tuple] = []
    for _ in range(160):
        if rng.random() < 0.1:
            steps.append(("wait", rng.choice([1.0, 3.0, 7.0])))
            continue
        who = rng.choice(["ann", "bob", "cy", "cy", "nobody"])
        op = rng.choices(["claim", "release", "renew"], [0.55, 0.3, 0.15])[0]
        mode = rng.choice(["exclusive", "shared"] if op == "claim" else ["own", "exclusive"])
        steps.append((who, op, rng.choice(paths), mode, rng.choice([2.0, 5.0, 60.0])))
    _same(twins, steps)
