"""The commit guard's cost: ``git commit`` of PATHS staged files in a real repository, with the
pre-commit hook ``agents-room guard install`` writes, against LEASES live exclusive leases of
another session (none of them on a staged path, so every commit is checked in full and let
through; then once more with one of them on a staged path, which the guard must refuse). Three
timings, each the median wall time of RUNS runs from process start to exit:

- ``hook``: the hook command alone (``python -I -S guard_entry.py --db STORE``) in the work
  tree with the files staged, as git runs it: the guard's whole cost to a commit;
- ``commit``: ``git commit`` with the hook, then ``git reset --soft HEAD~`` (not timed), so each
  run commits the same 1,000 paths again;
- ``commit-without-hook``: the same with ``--no-verify``, git's own cost.

    .venv/bin/python bench/guard.py [--paths 1000] [--leases 1000] [--runs 15] [--db postgresql://...]

Each run uses its own store and repository in a temporary folder (never ~/.agents-room).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agents_room.store import Store

EXE = str(Path(sys.executable).with_name("agents-room"))
ENTRY = str(Path(__file__).resolve().parents[1] / "src" / "agents_room" / "guard_entry.py")
GIT = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.org"]


def timed(argv: list[str], cwd: Path, expect: int) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    assert done.returncode == expect, (argv, done.returncode, done.stderr.decode()[-400:])
    return elapsed * 1000


def setup(root: Path, db: str, paths: int, leases: int) -> tuple[Path, str]:
    repo = root / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "README.md").write_text("bench\n")  # a first commit: each timed one is reset to it
    subprocess.run([*GIT, "add", "README.md"], cwd=repo, check=True)
    subprocess.run([*GIT, "commit", "-q", "-m", "first"], cwd=repo, check=True)
    for i in range(paths):  # 20 folders of 50, two levels deep: ancestors to look up as well
        f = repo / "src" / f"pkg{i % 20}" / f"mod_{i}.py"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f"v = {i}\n")
    subprocess.run([*GIT, "add", "-A"], cwd=repo, check=True)
    subprocess.run([EXE, "--db", db, "guard", "install", "--repo", str(repo)], check=True, capture_output=True)
    with Store.open(db) as store:
        holder = store.room_join(cwd=str(repo), pid=None, label="holder").session_id
        for i in range(leases):  # live, exclusive, in the same repository, on files not staged
            assert store.lease_claim(holder, str(repo / "lib" / f"other_{i}.py"), ttl_s=3600).ok
    return repo, holder


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--paths", type=int, default=1000)
    p.add_argument("--leases", type=int, default=1000)
    p.add_argument("--runs", type=int, default=15)
    p.add_argument("--db", help="a postgresql:// store to use (default: a SQLite file in a temporary folder)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="agents-room-bench-guard-") as tmp:
        root = Path(tmp)
        db = args.db or str(root / "room.db")
        repo, holder = setup(root, db, args.paths, args.leases)
        hook = [sys.executable, "-I", "-S", ENTRY, "--db", db]
        results: dict[str, list[float]] = {"hook": [], "commit": [], "commit-without-hook": []}
        env_ok = {k: v for k, v in os.environ.items() if not k.startswith("AGENTS_ROOM_")}
        os.environ.clear()
        os.environ.update(env_ok)
        for _ in range(args.runs):  # interleaved, so a change of load touches all three alike
            results["hook"].append(timed(hook, repo, 0))
            for name, extra in (("commit", []), ("commit-without-hook", ["--no-verify"])):
                results[name].append(timed([*GIT, "commit", "-q", "-m", "bench", *extra], repo, 0))
                subprocess.run(["git", "reset", "-q", "--soft", "HEAD~"], cwd=repo, check=True)
        with Store.open(db) as store:  # one lease on a staged path: the guard must refuse
            store.lease_claim(holder, str(repo / "src" / "pkg3" / "mod_3.py"))
        refused = timed(hook, repo, 1)
    engine = "postgresql" if args.db else "sqlite"
    print(f"guard, {engine}: a commit of {args.paths} staged paths against {args.leases} live exclusive leases, "
          f"median of {args.runs} runs (wall ms, process start to exit)")
    for name, values in results.items():
        print(f"  {name:22} median {statistics.median(values):7.1f}   min {min(values):7.1f}   "
              f"max {max(values):7.1f}")
    print(f"  {'hook, refusing':22} {refused:7.1f} (one run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
