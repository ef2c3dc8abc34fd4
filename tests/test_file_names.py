"""No file in the tree is named after the work that made it (an issue, a pass, a commit): a
name says what the file holds, so a newcomer can tell which figure a doc cites
(measurements/README.md indexes the measurements by what they measure)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# A commit's short hash: seven or more hex characters with a digit and a letter among them
# (a date's digits alone, or a word like "defaced", is not one).
HASH = re.compile(r"(?<![0-9a-z])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,}(?![0-9a-z])")
WORK = re.compile(r"issue|pass-?[0-9]")
SKIPPED = {".git", ".venv", "__pycache__", ".pytest_cache", ".hypothesis", "reports", "build", "dist"}


def named_after_work(path: str) -> str | None:
    """What in ``path`` names an issue, a pass or a commit, else None."""
    lowered = path.lower()
    found = WORK.search(lowered) or HASH.search(lowered)
    return found.group(0) if found else None


def tree_files() -> list[str]:
    """The tree's files: git's (tracked, and new ones not ignored) in a clone, else a walk."""
    if (ROOT / ".git").exists():
        done = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                              capture_output=True, text=True, check=True)
        return done.stdout.splitlines()
    found = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIPPED and not d.endswith(".egg-info")]
        found += [str(Path(folder, f).relative_to(ROOT)) for f in files]
    return found


def test_the_check_knows_a_work_name_from_a_content_name() -> None:
    for bad in ("measurements/bench-issue32-after.json", "measurements/rates-20-pass3-w3-targeted.jsonl",
                "measurements/multi-host-runs-at-5c63358-stopped.txt", "docs/Issue-40.md", "tests/pass-2.py",
                "notes/at-0e8a24d.txt"):
        assert named_after_work(bad), bad
    for good in ("measurements/pg-claims-by-writers-2026-12-04.json", "measurements/mutant-rates-8-runs-2026-12-04.jsonl",
                 "src/agents_room/store/leases.py", "tests/store/test_pg_durability.py", "reports/.gitkeep",
                 "data/1800000000.json", "sim/passage.py"):
        assert named_after_work(good) is None, good


def test_no_file_is_named_after_an_issue_a_pass_or_a_commit() -> None:
    files = tree_files()
    assert "pyproject.toml" in files and "measurements/README.md" in files
    offenders = {path: what for path in files if (what := named_after_work(path))}
    assert not offenders, f"files named after the work that made them (name them by what they hold): {offenders}"


def test_every_measurement_is_indexed_and_cited_by_a_doc() -> None:
    folder = ROOT / "measurements"
    index = (folder / "README.md").read_text()
    docs = "\n".join(p.read_text() for p in sorted((ROOT / "docs").rglob("*.md")))
    kept = sorted(p.name for p in folder.iterdir() if p.name != "README.md")
    assert kept
    for name in kept:
        assert f"`{name}`" in index, f"measurements/{name} is not in measurements/README.md"
        # a doc may cite a series of runs once, as run<N>
        assert name in docs or re.sub(r"run[0-9]+", "run<N>", name) in docs, f"no doc cites measurements/{name}"
