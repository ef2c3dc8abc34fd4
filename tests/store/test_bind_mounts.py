"""A repository mounted at a second place in one mount namespace (``mount --bind``, as a checkout
mounted into a second tree, or a volume two containers share): two names no symlink joins and
realpath cannot see, one device and inode per file and folder. Beyond a file's lease
(tests/store/test_paths.py's bind-mount test), a directory lease by one name meets the leases
beneath it by the other, and a ``file:`` target by either name reaches the holder under the
other; the repo room is one (it is named by the top folder's name). Both engines."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

_SCRIPT = """
import sys
from agents_room.store import Store
location, real, mounted = sys.argv[1:]
with Store.open(location) as store:
    a = store.room_join(cwd=real, pid=None, label="real")
    b = store.room_join(cwd=mounted, pid=None, label="mounted")
    c = store.room_join(cwd=real, pid=None, label="sender").session_id
    print(a.rooms == b.rooms, sorted(a.rooms))
    a, b = a.session_id, b.session_id
    assert store.lease_claim(a, "src/x.py").ok
    denied = store.lease_claim(b, "src/", mode="shared")  # beneath by the other name: in the way
    print(denied.ok, denied.holder.session_id == a, denied.holder.path)
    print([h.session_id == a for h in store.lease_check(b, "src/").holders])
    print(store.lease_claim(b, "lib/y.py").ok)
    to_a = store.msg_send(c, f"file:{mounted}/src/x.py", body="by the mounted name").recipients
    to_b = store.msg_send(c, f"file:{real}/lib/y.py", body="by the real name").recipients
    print(to_a == [a], to_b == [b])
    store.lease_release(a, "src/x.py")
    print(store.lease_claim(b, "src/").ok)  # nothing beneath now: granted
    print(store.lease_claim(a, "src/new.py").ok)  # beneath b's directory lease by the other name
    store.note_read(c, "lib/w.py")
    assert store.lease_claim(b, "lib/w.py").ok
    store.lease_release(b, "lib/w.py")  # gone before the drift check: only its events remain
    with open(f"{mounted}/lib/w.py", "a") as f:
        f.write("w = 2\\n")
    drift = store.drift_check(c, "lib/w.py")
    print(drift.severity, drift.holder == b)
    assert store.lease_claim(b, "lib/v.py").ok
    store.note_read(c, "lib/v.py")  # read while b holds it by the other name
    store.lease_release(b, "lib/v.py")
    with open(f"{mounted}/lib/v.py", "a") as f:
        f.write("v = 2\\n")
    drift = store.drift_check(c, "lib/v.py")
    print(drift.severity, drift.holder == b)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="a mount namespace needs root (unshare -m)")
def test_a_bind_mount_s_folders_and_file_targets_are_one(location: str, tmp_path: Path, make_repo) -> None:
    top = Path(os.path.realpath(tmp_path))
    real = make_repo(top / "real" / "repo")
    (real / "src").mkdir()
    (real / "src" / "x.py").write_text("x = 1\n")
    (real / "lib").mkdir()
    (real / "lib" / "y.py").write_text("y = 1\n")
    (real / "lib" / "w.py").write_text("w = 1\n")
    (real / "lib" / "v.py").write_text("v = 1\n")
    mounted = top / "mnt" / "repo"
    mounted.mkdir(parents=True)
    script = 'mount --bind "$1" "$2" && exec "$3" -c "$4" "$5" "$1" "$2"'
    done = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", str(real),
                           str(mounted), sys.executable, _SCRIPT, location], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "True ['repo:repo']"  # one repo room: named by the top folder's name
    assert lines[1] == f"False True {real}/src/x.py"  # the directory claim by the mounted name is denied
    assert lines[2] == "[True]"  # and its check lists the holder under the real name
    assert lines[3] == "True"
    assert lines[4] == "True True"  # file: by either name reaches the holder under the other
    assert lines[5] == "True"
    assert lines[6] == "False"
    assert lines[7] == "CRITICAL True"  # held by the other name since the read, released before the check
    assert lines[8] == "CRITICAL True"  # held by the other name at the read
    assert str(mounted) not in Path("/proc/self/mountinfo").read_text()  # the mount was the namespace's alone


# A container's agent: its own mount namespace, the checkout mounted where the host has nothing
# (the mount point stays an empty folder outside), its session joined there.
_CONTAINER = """
import sys
from agents_room.store import Store
location, mounted, verb, name = sys.argv[1:]
with Store.open(location) as store:
    me = store.room_join(cwd=mounted, pid=None, label="container").session_id
    if verb == "claim":
        got = store.lease_claim(me, f"src/{name}", ttl_s=600)
        print(me, got.ok, got.holder.session_id if got.holder else None)
    else:
        print(me, [h.session_id for h in store.lease_check(me, f"src/{name}").holders])
"""


def _in_container(location: str, real: Path, mounted: Path, verb: str, name: str) -> list[str]:
    script = 'mount --bind "$1" "$2" && exec "$3" -c "$4" "$5" "$2" "$6" "$7"'
    done = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", str(real),
                           str(mounted), sys.executable, _CONTAINER, location, verb, name],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split(maxsplit=1)


@pytest.mark.skipif(os.geteuid() != 0, reason="a mount namespace needs root (unshare -m)")
def test_a_container_s_own_mount_of_the_checkout_is_one_set_of_files_with_the_host_s(
        location: str, tmp_path: Path, make_repo) -> None:
    """A container mounts the checkout at a path the host has nothing at, in a mount namespace
    only its processes see; the host's agent works in the checkout itself. Each one's lease
    path leads nowhere in the other's view, and a file saved by rename since the claim has a new
    inode: the lease is met by its name in its folder (the folder's device and inode, one kernel),
    both ways, for files that exist and names not created yet; the commit guard sees it too.
    A session of another kernel's view is never met by identity (its numbers are not ours)."""
    from agents_room.store import Store, paths
    from agents_room.store.commitguard import blockers

    top = Path(os.path.realpath(tmp_path))
    real = make_repo(top / "host" / "repo")
    (real / "src").mkdir()
    for name in ("x.py", "y.py"):
        (real / "src" / name).write_text("v = 1\n")
    mounted = top / "container" / "workspace"
    mounted.mkdir(parents=True)
    holder, answer = _in_container(location, real, mounted, "claim", "x.py")
    assert answer.split()[0] == "True"
    temp = real / "src" / ".x.py.swp"
    temp.write_text("v = 2\n")
    os.replace(temp, real / "src" / "x.py")  # the host's editor saves it: a new inode
    with Store.open(location) as store:
        host = store.room_join(cwd=str(real), pid=None, label="host").session_id
        denied = store.lease_claim(host, "src/x.py")
        assert (denied.ok, denied.holder.session_id, denied.holder.path) == (False, holder, f"{mounted}/src/x.py")
        assert [h.session_id for h in store.lease_check(host, "src/x.py").holders] == [holder]
        with store.db.read() as tx:
            staged = [f"{real}/src/x.py"]
            assert [b.session_id for b in blockers(tx, staged, {host}, paths.identifier(str(real)), paths.same)] == [holder]
        assert store.lease_claim(host, "src/y.py").ok and store.lease_claim(host, "src/new.py").ok
        for name in ("y.py", "new.py"):  # the other way: the container's claim meets the host's leases
            other, answer = _in_container(location, real, mounted, "claim", name)
            assert answer.split() == ["False", host], name
        other, answer = _in_container(location, real, mounted, "check", "y.py")
        assert answer.strip() == f"['{host}']"
        with store.db.write() as tx:  # the container's session as if another kernel's: no identity of ours
            tx.execute("UPDATE sessions SET view = ? WHERE id = ?", ("another-boot/1", holder))
        assert store.lease_claim(host, "src/x.py").ok
