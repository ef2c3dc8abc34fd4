"""The guard holds for every way git moves a branch (guard_refs.py): merge, cherry-pick, rebase,
revert, am, commit-tree + update-ref and ``commit --no-verify`` are refused through the
``reference-transaction`` hook ``agents-room guard install`` writes, when their new commits
change a path another session holds exclusively. Fast-forwards, new branches at existing
commits, deletions and fetches pass. Real git, a real store on each engine."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from agents_room.store import Store
from test_guard import cli, git, guarded, head, holder, location, room  # noqa: F401 (fixtures)


def rev(repo: Path, what: str) -> str:
    return git(repo, "rev-parse", what).stdout.decode().strip()


def commit_file(repo: Path, name: str, text: str, message: str) -> str:
    (repo / name).write_text(text)
    git(repo, "add", name)
    git(repo, "commit", "-q", "-m", message)
    return rev(repo, "HEAD")


def refused(done: subprocess.CompletedProcess, repo: Path, branch: str, before: str, sid: str) -> str:
    err = done.stderr.decode(errors="replace")
    assert done.returncode != 0, err
    assert f"update of branch {branch} refused" in err and sid in err and "  a.py: held by session" in err, err
    assert rev(repo, f"refs/heads/{branch}") == before, f"{branch} moved"
    return err


def ok(done: subprocess.CompletedProcess) -> str:
    err = done.stderr.decode(errors="replace")
    assert done.returncode == 0, err
    assert "refused" not in err, err
    return err


def clean(repo: Path, before: str) -> None:
    for abort in (["merge", "--abort"], ["cherry-pick", "--abort"], ["revert", "--abort"], ["am", "--abort"],
                  ["rebase", "--abort"]):
        git(repo, *abort, check=False)
    git(repo, "checkout", "-q", "-f", "main")
    git(repo, "reset", "-q", "--hard", before)


def test_every_way_a_branch_moves_is_guarded(room: Store, guarded: Path, tmp_path: Path) -> None:
    repo = guarded
    git(repo, "branch", "-q", "-M", "main")
    base = rev(repo, "HEAD")
    # Before the lease: work on other branches that changes a.py, and some that does not.
    git(repo, "checkout", "-q", "-b", "side")
    side = commit_file(repo, "a.py", "side\n", "side changes a.py")
    patch = git(repo, "format-patch", "-1", "--stdout", side).stdout
    git(repo, "checkout", "-q", "-b", "other", base)
    commit_file(repo, "srcfoo.py", "other\n", "other changes srcfoo.py")
    git(repo, "checkout", "-q", "-b", "rv", base)
    touched = commit_file(repo, "a.py", "rv\n", "rv changes a.py")
    git(repo, "checkout", "-q", "main")
    main = commit_file(repo, "src/api/x.py", "main\n", "main changes x.py")
    upstream = tmp_path / "upstream"
    git(tmp_path, "clone", "-q", str(repo), str(upstream))
    commit_file(upstream, "a.py", "upstream\n", "upstream changes a.py")

    key = "3c3c3c3c-4d4d-4e5e-8f6f-7a7a7a7a7a7a"
    sid = holder(room, repo, harness_key=key)
    assert room.lease_claim(sid, str(repo / "a.py")).ok

    moves = {
        "merge --no-ff": ["merge", "-q", "--no-ff", "-m", "merge side", "side"],
        "cherry-pick": ["cherry-pick", side],
    }
    for what, argv in moves.items():
        refused(git(repo, *argv, check=False), repo, "main", main, sid)
        clean(repo, main)
    git(repo, "checkout", "-q", "rv")
    refused(git(repo, "revert", "--no-edit", touched, check=False), repo, "rv", touched, sid)
    clean(repo, main)
    am = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", "am", "-q"], cwd=repo,
                        input=patch, capture_output=True, timeout=60)
    refused(am, repo, "main", main, sid)
    clean(repo, main)
    (repo / "a.py").write_text("no-verify\n")
    git(repo, "add", "a.py")
    err = refused(git(repo, "commit", "-q", "--no-verify", "-m", "past pre-commit", check=False), repo, "main", main, sid)
    assert "AGENTS_ROOM_GUARD=warn git" in err  # a person: the way past, now that --no-verify is none
    clean(repo, main)
    # Plumbing: a commit object made by hand, then the branch (or a new one) pointed at it.
    made = git(repo, "commit-tree", f"{side}^{{tree}}", "-p", main, "-m", "by hand").stdout.decode().strip()
    refused(git(repo, "update-ref", "refs/heads/main", made, check=False), repo, "main", main, sid)
    done = git(repo, "update-ref", "refs/heads/fresh", made, check=False)
    assert done.returncode != 0 and "update of branch fresh refused" in done.stderr.decode()
    assert git(repo, "rev-parse", "-q", "--verify", "refs/heads/fresh", check=False).returncode != 0
    ok(git(repo, "update-ref", "refs/tags/by-hand", made))  # a tag is not guarded, and brings nothing in:
    refused(git(repo, "merge", "-q", "--ff-only", "by-hand", check=False), repo, "main", main, sid)
    clean(repo, main)
    # A rebase is checked once, when its branch moves at the end.
    ok(git(repo, "branch", "-q", "feature", side))  # a branch at an existing commit: nothing new
    refused(git(repo, "rebase", "-q", "main", "feature", check=False), repo, "feature", side, sid)
    clean(repo, main)

    # What passes: nothing new (fast-forward, a branch at an existing commit), deletions, other
    # paths, remote-tracking refs, the holder's own merge, and warn.
    git(repo, "checkout", "-q", "-b", "ff", base)
    ok(git(repo, "merge", "-q", "--ff-only", "side"))
    assert rev(repo, "ff") == side
    ok(git(repo, "branch", "-q", "copy", side))
    ok(git(repo, "branch", "-q", "-D", "copy", "side"))
    git(repo, "checkout", "-q", "main")
    ok(git(repo, "merge", "-q", "--no-ff", "-m", "merge other", "other"))
    ok(git(repo, "fetch", "-q", str(upstream), "main:refs/remotes/up/main"))
    merged = rev(repo, "HEAD")
    ok(git(repo, "cherry-pick", "ff", env={"AGENTS_ROOM_HARNESS_KEY": key}))  # alice's own: her lease never blocks her
    git(repo, "reset", "-q", "--hard", merged)
    err = ok(git(repo, "cherry-pick", "ff", env={"AGENTS_ROOM_GUARD": "warn"}))
    assert "warning (AGENTS_ROOM_GUARD=warn, update of main allowed)" in err and sid in err


def test_the_reference_transaction_hook_keeps_one_that_was_there(tmp_path: Path, repo: Path, location: str) -> None:
    if location.startswith("postgresql"):
        pytest.skip("the hook's files only: one engine is enough")
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(parents=True, exist_ok=True)
    seen = tmp_path / "seen.txt"
    theirs = hooks / "reference-transaction"
    theirs.write_text(f"#!/bin/sh\necho \"$1\" >> '{seen}'\ncat >> '{seen}'\n")
    theirs.chmod(0o755)
    done = cli("--db", location, "guard", "install", "--repo", str(repo))
    assert done.returncode == 0 and "reference-transaction.agents-room-chained" in done.stdout, done.stderr
    (repo / "a.py").write_text("a\n")
    git(repo, "add", "a.py")
    git(repo, "commit", "-q", "-m", "one")
    text = seen.read_text()
    assert "prepared\n" in text and "committed\n" in text and f" {rev(repo, 'HEAD')} " in text  # stdin reached it
    assert cli("guard", "uninstall", "--repo", str(repo)).returncode == 0
    assert theirs.read_text().startswith("#!/bin/sh\necho") and os.access(theirs, os.X_OK)
    assert not (hooks / "reference-transaction.agents-room-chained").exists()
