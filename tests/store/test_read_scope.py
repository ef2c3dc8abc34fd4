"""note_read and drift_check read only files of the session's repository (the git work tree
holding its cwd, else its cwd): nothing else the server can read is hashed, so no caller
confirms a guess of /etc/passwd or /proc/self/environ. On each engine."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agents_room.store import InvalidArgument, Store


def refused(call: Callable[[], object], path: str) -> str:
    with pytest.raises(InvalidArgument) as caught:
        call()
    text = str(caught.value)
    assert text.startswith(f"invalid_argument: path: {path} is outside "), text
    assert "note_read and drift_check read only files of those repositories" in text
    return text


def test_reads_stay_inside_the_sessions_repository(store: Store, join: Callable[..., str], repo: Path,
                                                   tmp_path: Path) -> None:
    (repo / "src").mkdir()
    (repo / "src" / "a.py").write_text("a\n")
    (repo / "link").symlink_to("/etc/passwd")  # inside by name, outside by what it is
    outside = tmp_path / "secret.txt"
    outside.write_text("s3cret\n")
    me = join(cwd=repo / "src")  # a folder inside the repository: the whole work tree is its
    assert len(store.note_read(me, "a.py")) == 64
    assert len(store.note_read(me, str(repo / "README.md"))) == 64 if (repo / "README.md").exists() else True
    assert store.drift_check(me, "a.py").severity == "SAFE"
    for path, shown in [("/etc/passwd", "/etc/passwd"), ("/proc/self/environ", None), (str(outside), str(outside)),
                        ("../../secret.txt", str(outside)), (str(repo / "link"), "/etc/passwd")]:
        shown = shown or str(Path(path).resolve())
        refused(lambda p=path: store.note_read(me, p), shown)
        refused(lambda p=path: store.drift_check(me, p), shown)


def test_outside_any_repository_the_sessions_folder_is_the_bound(store: Store, join: Callable[..., str],
                                                                 tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    (plain / "sub").mkdir(parents=True)
    (plain / "sub" / "f.txt").write_text("f\n")
    (tmp_path / "beside.txt").write_text("b\n")
    me = join(cwd=plain)
    assert len(store.note_read(me, "sub/f.txt")) == 64
    refused(lambda: store.note_read(me, str(tmp_path / "beside.txt")), str(tmp_path / "beside.txt"))
    root = join(cwd="/")  # the whole file system is no repository
    refused(lambda: store.note_read(root, "/etc/hostname"), "/etc/hostname")


def test_a_repository_shared_through_a_room_may_be_read(store: Store, join: Callable[..., str], repo: Path,
                                                        other_repo: Path) -> None:
    """Sessions sharing a room coordinate across repositories (a drift check on the file
    another repository's agent holds): those repositories are readable, and only while one
    of their sessions is live in a room with the reader."""
    (other_repo / "b.py").write_text("b\n")
    me = join(cwd=repo, room="team:x")
    refused(lambda: store.note_read(me, str(other_repo / "b.py")), str(other_repo / "b.py"))
    peer = join(cwd=other_repo, room="team:x")
    assert len(store.note_read(me, str(other_repo / "b.py"))) == 64
    assert store.drift_check(me, str(other_repo / "b.py")).severity == "SAFE"
    store.room_leave(peer)
    refused(lambda: store.drift_check(me, str(other_repo / "b.py")), str(other_repo / "b.py"))
