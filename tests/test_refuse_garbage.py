"""A store file damaged between two runs (truncated, or overwritten with garbage) is refused by
everything that opens it: ``agents-room serve``, ``agents-room doctor`` and ``sim run
--store``. Each exits non-zero with a message naming the file, and leaves the file byte for
byte as it was, with no ``-wal`` or ``-shm`` made beside it. A healthy store an earlier run
left is taken by ``sim run --store``, and the second run is checked on its own events."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agents_room.store import Store

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
AGENTS_ROOM = str(Path(sys.executable).parent / "agents-room")
SMOKE = ROOT / "scenarios" / "smoke.toml"
PAGE = 4096


def healthy_store(path: Path, repo: Path) -> bytes:
    """A store with some of everything in it, closed (its WAL folded back in)."""
    with Store.open(path) as store:
        a = store.room_join(cwd=str(repo), pid=os.getpid(), label="a", extra_rooms=["team"]).session_id
        b = store.room_join(cwd=str(repo), pid=os.getpid(), label="b", extra_rooms=["team"]).session_id
        for n in range(200):
            store.msg_send(a, "*", subject=f"note {n}", body="x" * 300)
            store.lease_claim(b, str(repo / f"f{n % 7}.py"), ttl_s=60)
        store.msg_recv(b, 1000)
    assert not Path(f"{path}-wal").exists()
    return path.read_bytes()


DAMAGE = {
    "truncated to half": lambda d: d[: len(d) // 2],
    "truncated inside a page": lambda d: d[: 3 * PAGE + 123],
    "truncated inside the header": lambda d: d[:60],
    "overwritten with garbage": lambda d: os.urandom(len(d)),
    "garbage over its first page": lambda d: os.urandom(PAGE) + d[PAGE:],
    "garbage over interior pages": lambda d: d[: 2 * PAGE] + os.urandom(3 * PAGE) + d[5 * PAGE:],
}


def fingerprint(path: Path) -> tuple[str, list[str]]:
    return hashlib.sha256(path.read_bytes()).hexdigest(), sorted(os.listdir(path.parent))


def commands(path: Path, out: Path) -> dict[str, tuple[list[str], dict[str, str]]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTS_ROOM_")}
    return {
        "doctor": ([AGENTS_ROOM, "--db", str(path), "doctor"], env),
        "serve": ([AGENTS_ROOM, "serve"], {**env, "AGENTS_ROOM_DB": str(path)}),
        "sim": ([sys.executable, "-m", "sim.cli", "run", str(SMOKE), "--store", str(path), "--out", str(out),
                 "--no-live"], env),
    }


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_store_is_refused_by_serve_doctor_and_sim(damage: str, tmp_path: Path, repo: Path) -> None:
    path = tmp_path / "store" / "room.db"
    path.write_bytes(DAMAGE[damage](healthy_store(path, repo)))
    for name, (argv, env) in commands(path, tmp_path / "sim-out").items():
        before = fingerprint(path)
        done = subprocess.run(argv, env=env, cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == (2 if name == "sim" else 1), (name, done.returncode, done.stderr[-500:])
        assert str(path) in done.stderr, (name, done.stderr[-500:])
        assert "Traceback" not in done.stderr, (name, done.stderr[-2000:])
        assert any(w in done.stderr for w in ("not an agents-room store", "corrupt", "quick_check")), done.stderr
        assert fingerprint(path) == before, f"{name} changed the {damage} store or left files beside it"
    assert not (tmp_path / "sim-out").exists()  # refused before anything was made


def test_a_healthy_store_of_an_earlier_run_is_reused(tmp_path: Path) -> None:
    store = tmp_path / "kept" / "room.db"
    reports = []
    for run in ("first", "second"):
        done = subprocess.run([sys.executable, "-m", "sim.cli", "run", str(SMOKE), "--store", str(store), "--out",
                               str(tmp_path / run), "--duration", "2", "--no-live", "--no-plots"], cwd=ROOT, capture_output=True,
                              text=True, timeout=180)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        reports.append(json.loads((tmp_path / run / "report.json").read_text()))
    with Store.open(store) as s:
        every = s.events(0, 10**6)
    first, second = (r["run"]["events"] for r in reports)
    # The second run was checked on its own events: those after the first run's (and the prune
    # of the first run's sessions, whose agents are gone).
    between = every[first:len(every) - second]
    assert between and all(e.kind in ("leave", "lease_release", "delivery") for e in between)
    assert {e.payload.get("reason") for e in between if e.kind == "leave"} == {"prune"}
    sessions = [{e.session_id for e in part if e.session_id} for part in (every[:first], every[len(every) - second:])]
    assert sessions[0] and sessions[1] and not sessions[0] & sessions[1]
    assert all(r["verdict"] == "valid" for r in reports)
