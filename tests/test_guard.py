"""The commit guard (issue 30): real git repositories, real commits through the pre-commit hook
``agents-room guard install`` writes, against a real store on each engine (a SQLite file, a
PostgreSQL schema). A refused commit leaves HEAD where it was."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from agents_room.store import Clock, Store

EXE = str(Path(sys.executable).with_name("agents-room"))
ENTRY = str(Path(__file__).parents[1] / "src" / "agents_room" / "guard_entry.py")
ORCHESTRATOR = str(Path(__file__).with_name("orchestrator.py"))
ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgresql":
        return request.getfixturevalue("pg_url")
    return str(tmp_path / "store" / "room.db")


@pytest.fixture
def room(location: str):
    """The store at the wall clock (the guard reads it at the wall clock, or PostgreSQL's)."""
    with Store.open(location, busy_timeout_s=2.0) as s:
        yield s


def git(repo: Path, *args: str, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args], cwd=repo,
                          capture_output=True, env={**os.environ, **(env or {})}, check=check, timeout=60)


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").stdout.decode().strip()


def commit(repo: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    git(repo, "add", "-A")
    return git(repo, "commit", "-q", "-m", "change", env=env, check=False)


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([EXE, *args], capture_output=True, text=True, env=env, timeout=60)


@pytest.fixture
def guarded(repo: Path, location: str) -> Path:
    """``repo`` with a first commit and the guard installed, the store written into the hook."""
    (repo / "a.py").write_text("a\n")
    (repo / "src" / "api").mkdir(parents=True)
    (repo / "src" / "api" / "x.py").write_text("x\n")
    (repo / "srcfoo.py").write_text("f\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "first")
    done = cli("--db", location, "guard", "install", "--repo", str(repo))
    assert done.returncode == 0, done.stderr
    return repo


def holder(store: Store, repo: Path, label: str = "alice", **kw: object) -> str:
    return store.room_join(cwd=str(repo), pid=None, label=label, **kw).session_id


def refused(done: subprocess.CompletedProcess, repo: Path, before: str) -> str:
    err = done.stderr.decode(errors="replace")
    assert done.returncode != 0, err
    assert head(repo) == before, "a refused commit must not be made"
    assert "commit refused" in err, err
    return err


def allowed(done: subprocess.CompletedProcess, repo: Path, before: str) -> str:
    err = done.stderr.decode(errors="replace")
    assert done.returncode == 0, err
    assert head(repo) != before
    return err


def test_another_sessions_exclusive_lease_refuses_the_commit(room: Store, guarded: Path) -> None:
    sid = holder(room, guarded)
    lease = room.lease_claim(sid, str(guarded / "a.py")).lease
    (guarded / "a.py").write_text("changed\n")
    before = head(guarded)
    err = refused(commit(guarded), guarded, before)
    line = next(x for x in err.splitlines() if x.strip().startswith("a.py:"))
    assert sid in line and "(alice)" in line and time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(lease.expires_at)) in line
    assert "No agents-room session made this commit" in err and "AGENTS_ROOM_GUARD=warn git" in err  # a person: how to proceed


@pytest.mark.parametrize("case", ["own-key", "own-pid", "shared", "expired", "released", "other-repo"])
def test_leases_that_never_block(room: Store, guarded: Path, other_repo: Path, location: str, case: str) -> None:
    env = {}
    target = guarded / "a.py"
    if case == "own-key":
        key = str(uuid.uuid4())
        sid = holder(room, guarded, harness_key=key)
        env["AGENTS_ROOM_HARNESS_KEY"] = key
    elif case == "own-pid":  # this test process is an ancestor of the hook, as a harness is
        sid = room.room_join(cwd=str(guarded), pid=os.getpid(), label="me").session_id
    else:
        sid = holder(room, guarded)
    if case == "other-repo":
        (other_repo / "a.py").write_text("b\n")
        target = other_repo / "a.py"
    if case == "expired":
        with Store.open(location, clock=Clock(fixed=time.time() - 3600)) as past:
            past.lease_claim(sid, str(target), ttl_s=600)  # ended 50 minutes ago, not swept
    else:
        room.lease_claim(sid, str(target), mode="shared" if case == "shared" else None)
    if case == "released":
        room.lease_release(sid, str(target))
    (guarded / "a.py").write_text("changed\n")
    before = head(guarded)
    err = allowed(commit(guarded, env), guarded, before)
    assert "commit refused" not in err and "warning" not in err, err


def test_own_lease_but_anothers_still_blocks(room: Store, guarded: Path) -> None:
    key = str(uuid.uuid4())
    mine, theirs = holder(room, guarded, "me", harness_key=key), holder(room, guarded, "bob")
    room.lease_claim(mine, str(guarded / "a.py"))
    room.lease_claim(theirs, str(guarded / "srcfoo.py"))
    (guarded / "a.py").write_text("changed\n")
    (guarded / "srcfoo.py").write_text("changed\n")
    before = head(guarded)
    err = refused(commit(guarded, {"AGENTS_ROOM_HARNESS_KEY": key}), guarded, before)
    assert "srcfoo.py:" in err and "\n  a.py:" not in err
    assert f"You commit as session {mine} (me)" in err


ALICE, BOB = "a11ce000-0000-4000-8000-000000000001", "b0b00000-0000-4000-8000-000000000002"


@pytest.mark.slow
def test_a_process_hosting_two_agents_commits_as_nobody_unless_its_environment_names_one(
        room: Store, guarded: Path, location: str, tmp_path: Path) -> None:
    """An orchestrator (tests/orchestrator.py) hosts alice's and bob's MCP clients, so it is
    the recorded harness process of both sessions, and runs git commit itself: nothing says
    which agent commits, so each one's exclusive lease refuses it, until the commit's
    environment names a harness key."""
    named = {"AGENTS_ROOM_HARNESS_KEY": ALICE}
    plan = {"db": location, "repo": str(guarded), "agents": [
        {"label": "alice", "key": ALICE, "lease": "src/api"},  # a directory lease
        {"label": "bob", "key": BOB, "lease": "srcfoo.py"},
    ], "commits": [
        {"paths": ["src/api/x.py"]}, {"paths": ["srcfoo.py"]},
        {"paths": ["src/api/x.py"], "env": named}, {"paths": ["srcfoo.py"], "env": named},
    ]}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    before = head(guarded)
    done = subprocess.run([sys.executable, ORCHESTRATOR, str(tmp_path / "plan.json")], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    alice, bob = out["sessions"]["alice"], out["sessions"]["bob"]
    with room.db.read() as tx:  # both sessions record the orchestrator as their harness process
        assert tx.all("SELECT pid FROM sessions WHERE id IN (?, ?)", (alice, bob)) == [(out["pid"],)] * 2
    over_alices, over_bobs, as_alice, as_alice_over_bobs = out["commits"]
    candidates = [f"    session {alice} (alice, unknown)", f"    session {bob} (bob, unknown)"]
    for attempt, line in ((over_alices, f"src/api/x.py: held by session {alice} (alice) (under its lease of src/api/)"),
                          (over_bobs, f"srcfoo.py: held by session {bob} (bob) until")):
        err = attempt["stderr"]
        assert attempt["code"] != 0 and "commit refused" in err and line in err, err
        assert [x for x in err.splitlines() if x.startswith("    session ")] == candidates, err
        assert "checked as nobody's" in err and "AGENTS_ROOM_HARNESS_KEY=<key> git commit" in err, err
    assert as_alice["code"] == 0 and as_alice["stderr"] == "", as_alice  # alice's own lease
    err = as_alice_over_bobs["stderr"]
    assert as_alice_over_bobs["code"] != 0 and f"srcfoo.py: held by session {bob} (bob)" in err, err
    assert f"You commit as session {alice} (alice)." in err and "    session " not in err, err
    assert git(guarded, "rev-list", "--count", f"{before}..HEAD").stdout.strip() == b"1"  # alice's commit alone


@pytest.mark.slow
def test_an_agent_behind_a_launcher_is_hosted_by_the_process_too(room: Store, guarded: Path, location: str,
                                                                tmp_path: Path) -> None:
    """The orchestrator runs alice's server itself and bob's through a shell that stays its
    parent, so bob's session records the shell, no ancestor of the commit: ancestry alone finds
    alice only, and her lease would wave through a commit bob may have made. The process tree
    finds bob beneath the orchestrator: the commit is nobody's until its environment names one."""
    plan = {"db": location, "repo": str(guarded), "agents": [
        {"label": "alice", "key": ALICE, "lease": "src/api"},
        {"label": "bob", "key": BOB, "lease": "srcfoo.py", "launcher": True},
    ], "commits": [
        {"paths": ["src/api/x.py"]}, {"paths": ["src/api/x.py"], "env": {"AGENTS_ROOM_HARNESS_KEY": BOB}},
        {"paths": ["src/api/x.py"], "env": {"AGENTS_ROOM_HARNESS_KEY": ALICE}},
    ]}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    before = head(guarded)
    done = subprocess.run([sys.executable, ORCHESTRATOR, str(tmp_path / "plan.json")], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    alice, bob = out["sessions"]["alice"], out["sessions"]["bob"]
    with room.db.read() as tx:
        pids = dict(tx.all("SELECT id, pid FROM sessions WHERE id IN (?, ?)", (alice, bob)))
    assert pids[alice] == out["pid"] and pids[bob] not in (None, out["pid"])  # bob's records the launcher
    unnamed, as_bob, as_alice = out["commits"]
    err = unnamed["stderr"]
    assert unnamed["code"] != 0 and f"src/api/x.py: held by session {alice} (alice)" in err, err
    assert [x for x in err.splitlines() if x.startswith("    session ")] == [
        f"    session {alice} (alice, unknown)", f"    session {bob} (bob, unknown)"], err
    assert "AGENTS_ROOM_HARNESS_KEY=<key> git commit" in err, err
    assert as_bob["code"] != 0 and f"You commit as session {bob} (bob)." in as_bob["stderr"], as_bob
    assert as_alice["code"] == 0 and as_alice["stderr"] == "", as_alice
    assert git(guarded, "rev-list", "--count", f"{before}..HEAD").stdout.strip() == b"1"


@pytest.mark.parametrize("side", ["old", "new"])
def test_both_sides_of_a_rename(room: Store, guarded: Path, side: str) -> None:
    sid = holder(room, guarded)
    room.lease_claim(sid, str(guarded / ("a.py" if side == "old" else "b.py")))
    git(guarded, "mv", "a.py", "b.py")
    assert b"R" in git(guarded, "diff", "--cached", "--name-status", "-M").stdout
    before = head(guarded)
    err = refused(commit(guarded), guarded, before)
    assert ("a.py:" if side == "old" else "b.py:") in err


def test_a_deletion(room: Store, guarded: Path) -> None:
    room.lease_claim(holder(room, guarded), str(guarded / "a.py"))
    git(guarded, "rm", "-q", "a.py")
    before = head(guarded)
    assert "a.py:" in refused(commit(guarded), guarded, before)


def test_a_directory_lease_covers_by_whole_components(room: Store, guarded: Path) -> None:
    """A directory lease (stored with a trailing /, store/coverage.py) covers what is beneath
    it, never a sibling that merely starts with its name."""
    sid = holder(room, guarded)
    room.lease_claim(sid, str(guarded / "README.md"))  # a lease row the store's claim wrote...
    with room.db.write() as tx:  # ...and the directory form beside it
        tx.execute("UPDATE leases SET path = ? WHERE session_id = ?", (f"{guarded}/src/", sid))
    (guarded / "srcfoo.py").write_text("changed\n")
    before = head(guarded)
    allowed(commit(guarded), guarded, before)
    (guarded / "src" / "api" / "x.py").write_text("changed\n")
    before = head(guarded)
    err = refused(commit(guarded), guarded, before)
    assert "src/api/x.py:" in err and "under its lease of src/" in err


def test_names_with_spaces_newlines_and_bytes_that_are_not_utf8(room: Store, guarded: Path) -> None:
    sid = holder(room, guarded)
    odd = guarded / "two words\nand a line.py"
    odd.write_text("o\n")
    room.lease_claim(sid, str(odd))
    before = head(guarded)
    err = refused(commit(guarded), guarded, before)
    assert "'two words\\nand a line.py':" in err  # escaped: a newline must not start a line
    git(guarded, "reset", "-q")
    odd.unlink()
    raw = os.fsencode(guarded) + b"/src/caf\xe9.py"  # Latin-1, not UTF-8: a lease cannot name it...
    with open(raw, "w") as f:
        f.write("c\n")
    assert commit(guarded).returncode == 0
    with open(raw, "w") as f:
        f.write("changed\n")
    with room.db.write() as tx:  # ...but its folder's lease covers it
        tx.execute("UPDATE leases SET path = ? WHERE session_id = ?", (f"{guarded}/src/", sid))
    before = head(guarded)
    assert "caf\\udce9.py" in refused(commit(guarded), guarded, before)


@pytest.mark.parametrize("mode", ["warn", "off", "bogus"])
def test_warn_reports_off_skips_and_a_bad_value_is_one_line(room: Store, guarded: Path, mode: str) -> None:
    room.lease_claim(holder(room, guarded), str(guarded / "a.py"))
    (guarded / "a.py").write_text("changed\n")
    before = head(guarded)
    done = commit(guarded, {"AGENTS_ROOM_GUARD": mode})
    err = done.stderr.decode()
    if mode == "bogus":
        assert done.returncode != 0 and head(guarded) == before
        assert err.strip().splitlines() == [err.strip()] and "AGENTS_ROOM_GUARD='bogus'" in err
    elif mode == "warn":
        allowed(done, guarded, before)
        assert "warning" in err and "a.py:" in err and "commit refused" not in err
    else:
        assert allowed(done, guarded, before) == ""


def test_no_store_allows_the_commit_in_one_line_and_creates_none(repo: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "room.db"
    (repo / "a.py").write_text("a\n")
    bare = {k: v for k, v in os.environ.items() if k != "AGENTS_ROOM_DB"}
    assert cli("guard", "install", "--repo", str(repo), env=bare).returncode == 0  # no store written in
    done = commit(repo, {"AGENTS_ROOM_DB": str(missing)})
    assert done.returncode == 0 and head(repo)
    assert done.stderr.decode().strip().splitlines() == [f"agents-room guard: no store at {missing}, so no leases; "
                                                         "commit allowed"]
    assert not missing.parent.exists()


def test_core_hooks_path_is_honoured(room: Store, repo: Path, location: str) -> None:
    git(repo, "config", "core.hooksPath", ".githooks")
    assert cli("--db", location, "guard", "install", "--repo", str(repo)).returncode == 0
    assert (repo / ".githooks" / "pre-commit").exists() and not (repo / ".git" / "hooks" / "pre-commit").exists()
    (repo / "a.py").write_text("a\n")
    room.lease_claim(holder(room, repo), str(repo / "a.py"))
    git(repo, "add", "a.py")
    done = git(repo, "commit", "-q", "-m", "x", check=False)
    assert done.returncode != 0 and b"a.py:" in done.stderr


@pytest.mark.parametrize("verdict", [0, 1])
def test_an_existing_hook_is_chained_and_put_back(room: Store, repo: Path, location: str, verdict: int) -> None:
    hook = repo / ".git" / "hooks" / "pre-commit"
    original = f"#!/bin/sh\necho ran >> '{repo}/../chained.log'\nexit {verdict}\n"
    hook.write_text(original)
    hook.chmod(0o750)
    assert cli("--db", location, "guard", "install", "--repo", str(repo)).returncode == 0
    assert cli("--db", location, "guard", "install", "--repo", str(repo)).returncode == 0  # twice: still one chain
    (repo / "a.py").write_text("a\n")
    done = commit(repo)
    assert (repo.parent / "chained.log").read_text() == "ran\n"
    assert (done.returncode == 0) == (verdict == 0)  # the chained hook's refusal stands
    if verdict == 0:  # and ours still runs after it
        room.lease_claim(holder(room, repo), str(repo / "a.py"))
        (repo / "a.py").write_text("b\n")
        assert b"a.py:" in commit(repo).stderr
    assert cli("guard", "uninstall", "--repo", str(repo)).returncode == 0
    assert hook.read_text() == original and hook.stat().st_mode & 0o777 == 0o750
    assert sorted(p.name for p in hook.parent.iterdir() if p.name.startswith("pre-commit")) == ["pre-commit",
                                                                                                 "pre-commit.sample"]


def test_uninstall_removes_the_guard(room: Store, guarded: Path) -> None:
    room.lease_claim(holder(room, guarded), str(guarded / "a.py"))
    done = cli("guard", "uninstall", "--repo", str(guarded))
    assert done.returncode == 0 and "removed the guard" in done.stdout
    assert not (guarded / ".git" / "hooks" / "pre-commit").exists()
    (guarded / "a.py").write_text("changed\n")
    before = head(guarded)
    allowed(commit(guarded), guarded, before)
    assert "nothing changed" in cli("guard", "uninstall", "--repo", str(guarded)).stdout


def test_uninstall_leaves_a_foreign_hook_alone(repo: Path) -> None:
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\nexit 0\n")
    done = cli("guard", "uninstall", "--repo", str(repo))
    assert done.returncode == 1 and "not agents-room's guard" in done.stderr and hook.read_text() == "#!/bin/sh\nexit 0\n"


def test_the_hook_path_imports_neither_the_store_package_nor_subprocess(tmp_path: Path, repo: Path) -> None:
    """Every commit pays for the guard: on SQLite it loads only the store modules it runs."""
    db = tmp_path / "room.db"
    with Store.open(db) as s:
        s.lease_claim(s.room_join(cwd=str(repo), pid=None).session_id, str(repo / "README.md"))
    git(repo, "add", "-A")
    done = subprocess.run([sys.executable, "-X", "importtime", "-I", "-S", ENTRY, "--db", str(db)], cwd=repo,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 1 and "README.md:" in done.stderr, done.stderr  # it did check
    loaded = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert {"agents_room.guard", "agents_room.store.commitguard"} <= loaded, loaded
    assert not loaded & {"subprocess", "dataclasses", "agents_room.store.leases", "mcp", "re"}, loaded


def test_commit_all_checks_the_index_git_commits(room: Store, guarded: Path) -> None:
    """``git commit -a`` stages into a temporary index (GIT_INDEX_FILE) for the hook: that is
    the one checked, not the repository's own."""
    room.lease_claim(holder(room, guarded), str(guarded / "a.py"))
    (guarded / "a.py").write_text("changed, not added\n")
    before = head(guarded)
    done = git(guarded, "commit", "-q", "-a", "-m", "all", check=False)
    assert "a.py:" in refused(done, guarded, before)
