"""Files install and guard install write go through one helper (agents_room/safe_write.py): a
link a repository commits cannot redirect a write out of the project, nor into the person's
own settings. Real subprocesses of the installed command, a scratch HOME."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agents_room.safe_write import UnsafeWrite, write_file

AGENTS_ROOM = str(Path(sys.executable).parent / "agents-room")
GLOBAL = '{"hooks": {}, "mine": "the person\'s own settings"}\n'


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    (path / ".claude").mkdir(parents=True)
    (path / ".claude" / "settings.json").write_text(GLOBAL)
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "home" / "src" / "project"  # a project under the home folder, as most are
    path.mkdir(parents=True)
    return path


def run(home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != "AGENTS_ROOM_DB"}
    return subprocess.run([AGENTS_ROOM, *args], check=False, capture_output=True, text=True, timeout=60, cwd=cwd,
                          env={**base, "HOME": str(home)})


def test_a_committed_link_under_the_old_temporary_name_is_not_written_through(home: Path, project: Path) -> None:
    """The old install wrote ``.claude/.settings.local.json.agents-room.tmp`` following links,
    then renamed it: a repository committing that name as a link to ~/.claude/settings.json
    had the person's settings replaced. Every name the old code used is planted here."""
    (project / ".claude").mkdir()
    target = home / ".claude" / "settings.json"
    for name in (".mcp.json", ".claude/settings.json", ".claude/settings.local.json"):
        where = project / name
        (where.parent / f".{where.name}.agents-room.tmp").symlink_to(target)
    done = run(home, project, "install", "claude-code", "--command", AGENTS_ROOM)
    assert done.returncode == 0, done.stderr
    assert target.read_text() == GLOBAL
    assert "hook_entry.py" in (project / ".claude" / "settings.local.json").read_text()
    assert not [p for p in project.rglob("*") if p.name.endswith(".tmp") and not p.is_symlink()]


def test_a_link_leading_out_of_the_project_is_refused_unless_asked(home: Path, project: Path) -> None:
    (project / ".claude").symlink_to(home / ".claude")  # the repository's .claude is the person's own
    before = sorted(p.name for p in project.iterdir())
    done = run(home, project, "install", "claude-code", "--command", AGENTS_ROOM)
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line.startswith(f"agents-room install: {project / '.claude' / 'settings.local.json'}: not written: the symbolic "
                           f"link {project / '.claude'} leads to {home / '.claude' / 'settings.local.json'}, outside "), line
    assert "--follow-links" in line
    assert (home / ".claude" / "settings.json").read_text() == GLOBAL
    assert sorted(p.name for p in project.iterdir()) == before  # nothing written, .mcp.json neither
    dry = run(home, project, "install", "claude-code", "--command", AGENTS_ROOM, "--dry-run")
    assert dry.returncode == 1 and "not written" in dry.stderr
    asked = run(home, project, "install", "claude-code", "--command", AGENTS_ROOM, "--follow-links")
    assert asked.returncode == 0, asked.stderr
    assert "hook_entry.py" in (home / ".claude" / "settings.local.json").read_text()


def test_a_link_inside_the_folder_is_written_through_and_kept(home: Path, project: Path) -> None:
    """Dotfiles kept in a repository of their own under the home folder: the link stays, the
    file it leads to gets the change (user scope: the home folder is the bound)."""
    dotfiles = home / "dotfiles" / "claude-settings.json"
    dotfiles.parent.mkdir()
    (home / ".claude" / "settings.json").rename(dotfiles)
    (home / ".claude" / "settings.json").symlink_to(dotfiles)
    dotfiles.chmod(0o640)
    done = run(home, project, "install", "claude-code", "--scope", "user", "--command", AGENTS_ROOM)
    assert done.returncode == 0, done.stderr
    assert (home / ".claude" / "settings.json").is_symlink()
    assert '"mine"' in dotfiles.read_text() and "hook_entry.py" in dotfiles.read_text()
    assert dotfiles.stat().st_mode & 0o777 == 0o640


def test_the_helper_creates_its_temporary_file_exclusively(tmp_path: Path) -> None:
    """Every name the helper may pick is random; a planted link of any fixed name is never
    followed, and a folder that is a link out of the bound is refused."""
    outside = tmp_path / "outside"
    outside.write_text("untouched\n")
    inside = tmp_path / "proj"
    inside.mkdir()
    for fixed in (".f.tmp", ".f.agents-room.tmp", "f.tmp"):
        (inside / fixed).symlink_to(outside)
    assert write_file(inside / "f", "new\n", within=inside) == str(inside / "f")
    assert (inside / "f").read_text() == "new\n" and outside.read_text() == "untouched\n"
    assert sorted(p.name for p in inside.iterdir()) == [".f.agents-room.tmp", ".f.tmp", "f", "f.tmp"]
    (inside / "out").symlink_to(tmp_path)
    with pytest.raises(UnsafeWrite, match=r"the symbolic link .*/proj/out leads to"):
        write_file(inside / "out" / "outside", "x", within=inside)
    assert outside.read_text() == "untouched\n"


def git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args], cwd=repo,
                          capture_output=True, text=True, check=True, timeout=60)


def test_guard_install_in_a_committed_hooks_folder_follows_no_planted_link(home: Path, repo: Path) -> None:
    """A repository whose README says ``git config core.hooksPath .githooks`` commits that
    folder: the old ``.pre-commit.agents-room.tmp`` there, as a link, replaced the file it led to."""
    victim = home / ".bashrc"
    victim.write_text("# mine\n")
    (repo / ".githooks").mkdir()
    (repo / ".githooks" / ".pre-commit.agents-room.tmp").symlink_to(victim)
    git(repo, "config", "core.hooksPath", ".githooks")
    done = run(home, repo, "guard", "install")
    assert done.returncode == 0, done.stderr
    assert victim.read_text() == "# mine\n"
    hook = repo / ".githooks" / "pre-commit"
    assert "agents-room guard" in hook.read_text() and hook.stat().st_mode & 0o111
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", "a.txt")
    assert subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "x"],
                          cwd=repo, capture_output=True, timeout=60, env={**os.environ, "HOME": str(home)}
                          ).returncode == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="a folder of another user is made with chown")
def test_a_folder_of_a_shared_temporary_directory_is_this_user_s_alone(tmp_path: Path, monkeypatch, pg_url: str) -> None:
    """A marker folder in /tmp is made by whoever comes first: one another user made, a link, a
    file, or a folder others may write in is refused, naming it; the wake waiter's folder of a
    PostgreSQL store (kept in the temporary directory) and the edit guard's markers too."""
    from agents_room.harnesses.editguard import _first_time
    from agents_room.harnesses.hook_wait import waiters_folder
    from agents_room.safe_write import own_folder
    from agents_room.store import Store

    fresh = tmp_path / "fresh"
    assert own_folder(fresh) == str(fresh) and os.stat(fresh).st_mode & 0o777 == 0o700
    assert own_folder(fresh) == str(fresh)  # again: it is ours
    foreign, link, file, open_to_all = (tmp_path / n for n in ("foreign", "link", "file", "open"))
    foreign.mkdir(mode=0o700)
    os.chown(foreign, 65534, 65534)
    link.symlink_to(fresh)
    file.write_text("")
    open_to_all.mkdir()
    os.chmod(open_to_all, 0o777)
    for bad in (foreign, link, file, open_to_all):
        with pytest.raises(UnsafeWrite, match=str(bad)):
            own_folder(bad)

    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    squatted = tmp_path / f"agents-room-{os.getuid()}"
    squatted.mkdir(mode=0o755)
    os.chown(squatted, 65534, 65534)
    with Store.open(pg_url) as store, pytest.raises(UnsafeWrite, match=str(squatted)):
        waiters_folder(store)

    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    guard = tmp_path / f"agents-room-editguard-{os.getuid()}"
    guard.mkdir(mode=0o755)
    (guard / "s1").write_text("")  # planted: "s1 was told already"
    os.chown(guard, 65534, 65534)
    assert _first_time("s1") and _first_time("s1")  # never silenced by another user's folder
    os.chown(guard, os.getuid(), os.getgid())
    (guard / "s1").unlink()
    assert _first_time("s1") and not _first_time("s1")  # its own folder: once
