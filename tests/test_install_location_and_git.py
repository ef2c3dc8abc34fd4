"""``agents-room install`` checks the store location before writing anything, and keeps the
machine-only files it writes inside a project out of git (``.git/info/exclude``). Real
subprocesses of the installed command, real git repositories, a scratch HOME."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agents_room.store.location import Location, unusable

AGENTS_ROOM = str(Path(sys.executable).parent / "agents-room")


def install(home: Path, project: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "AGENTS_ROOM_DB"}
    return subprocess.run([AGENTS_ROOM, "install", *args, "--command", AGENTS_ROOM], capture_output=True, text=True,
                          timeout=60, cwd=project, env={**base, "HOME": str(home), **env}, stdin=subprocess.DEVNULL)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def snapshot(*roots: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for root in roots for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path]:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    return home, project


@pytest.mark.parametrize("harness", ["claude-code", "codex", "gemini", "cursor"])
def test_a_store_location_that_can_never_be_made_is_refused_before_anything_is_written(
        places: tuple[Path, Path], tmp_path: Path, harness: str) -> None:
    home, project = places
    afile = tmp_path / "a-file"
    afile.write_text("notes")
    db = afile / "rooms" / "room.db"
    before = snapshot(home, project)
    done = install(home, project, harness, "--scope", "user", AGENTS_ROOM_DB=str(db))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line == (f"agents-room install: no store can be made at {db} (from $AGENTS_ROOM_DB): {afile} is a file, "
                    f"not a folder, so {db} cannot be made under it; nothing was written")
    assert snapshot(home, project) == before and afile.read_text() == "notes"
    # a location with no store yet, whose folders can be made, is fine: the first join makes it
    fine = install(home, project, harness, "--scope", "user", AGENTS_ROOM_DB=str(tmp_path / "new" / "room.db"))
    assert fine.returncode == 0, fine.stderr
    assert not (tmp_path / "new").exists()  # install checks; it makes no store


def test_the_location_check_names_each_reason(tmp_path: Path) -> None:
    def at(path: Path) -> str | None:
        return unusable(Location("sqlite", str(path)))

    (tmp_path / "folder.db").mkdir()
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    assert at(tmp_path / "new" / "deeper" / "room.db") is None
    assert at(tmp_path / "a-file") is None  # a file: whether it is a store, opening judges
    assert at(tmp_path / "folder.db") == f"{tmp_path / 'folder.db'} is not a regular file"
    assert at(tmp_path / "a-file" / "room.db") == (f"{tmp_path / 'a-file'} is a file, not a folder, so "
                                                   f"{tmp_path / 'a-file' / 'room.db'} cannot be made under it")
    assert at(tmp_path / "dangling" / "room.db") == f"{tmp_path / 'dangling'} is a link to nothing"
    assert str(at(Path("/proc/nope/room.db"))).startswith("nothing can be made in the folder /proc (")
    assert unusable(Location("postgresql", "postgresql://u@h/db")) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "dangling", "folder.db"]  # the probe left nothing


def test_the_machine_only_file_stays_out_of_git(places: tuple[Path, Path]) -> None:
    """claude-code's project install writes .claude/settings.local.json (this installation's
    paths): git status never offers it, install run twice adds one exclude line, a dry run
    writes none, and a repository that already ignores it is left alone."""
    home, project = places
    git(project, "init", "-q")
    dry = install(home, project, "claude-code", "--dry-run")
    assert dry.returncode == 0 and "would add /.claude/settings.local.json to" in dry.stdout
    exclude = Path(git(project, "rev-parse", "--absolute-git-dir").strip()) / "info" / "exclude"
    shipped = exclude.read_text()
    assert "settings.local.json" not in shipped
    said = []
    for _ in range(2):
        done = install(home, project, "claude-code")
        assert done.returncode == 0, done.stderr
        said.append("kept out of git: " in done.stdout)
    assert said == [True, False]
    assert (project / ".claude" / "settings.local.json").is_file()
    status = git(project, "status", "--porcelain", "--untracked-files=all").splitlines()
    assert "?? .mcp.json" in status and not [s for s in status if "settings.local.json" in s], status
    assert exclude.read_text() == shipped + "/.claude/settings.local.json\n"  # once, after the lines git wrote


def test_a_subfolder_project_a_worktree_and_a_team_gitignore(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    repo = tmp_path / "repo"
    sub = repo / "services" / "api"
    sub.mkdir(parents=True)
    git(repo, "init", "-q")
    git(repo, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "start")
    assert install(home, sub, "claude-code").returncode == 0
    exclude = repo / ".git" / "info" / "exclude"
    assert exclude.read_text().endswith("\n/services/api/.claude/settings.local.json\n")
    assert "settings.local.json" not in git(repo, "status", "--porcelain", "--untracked-files=all")
    # a linked worktree: its exclude is the main clone's (git rev-parse --git-path)
    tree = tmp_path / "tree"
    git(repo, "worktree", "add", "-q", str(tree))
    assert install(home, tree, "claude-code").returncode == 0
    assert exclude.read_text().endswith("\n/.claude/settings.local.json\n")
    assert "settings.local.json" not in git(tree, "status", "--porcelain", "--untracked-files=all")
    # a team that keeps it out in .gitignore: the exclude file is not touched
    team = tmp_path / "team"
    team.mkdir()
    git(team, "init", "-q")
    (team / ".gitignore").write_text(".claude/settings.local.json\n")
    team_exclude = team / ".git" / "info" / "exclude"
    before = team_exclude.read_text()
    done = install(home, team, "claude-code")
    assert done.returncode == 0 and "kept out of git" not in done.stdout
    assert team_exclude.read_text() == before
    # no git work tree: nothing made
    plain = tmp_path / "plain"
    plain.mkdir()
    assert install(home, plain, "claude-code").returncode == 0 and not (plain / ".git").exists()
