"""The test cluster's reaper (tests/pgcluster.py): a cluster whose test process was killed
(its server still running) is stopped and removed by the next start; a cluster whose owner
lives, and a folder that names no owner, are left alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import pgcluster

TESTS = Path(__file__).resolve().parent

OWNER = """
import sys, time
sys.path.insert(0, sys.argv[1])
import pgcluster
cluster = pgcluster.start_cluster()
print(cluster.root, flush=True)
time.sleep(600)
"""


def server_pid(root: Path) -> int:
    return int((root / "data" / "postmaster.pid").read_text().split()[0])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1][:3]


@pytest.mark.postgres_only
def test_a_cluster_of_a_killed_test_process_is_reaped(pg_cluster, tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", OWNER, str(TESTS)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        root = Path(child.stdout.readline().strip())
        assert root.name.startswith(pgcluster.PREFIX) and pgcluster.owner_alive(root) is True
        server = server_pid(root)
    finally:
        child.send_signal(signal.SIGKILL)  # it never stops its cluster
        child.wait()
        child.stdout.close()  # type: ignore[union-attr]
    assert alive(server) and pgcluster.owner_alive(root) is False  # the server runs on, orphaned

    stray = tmp_path / f"{pgcluster.PREFIX}legacy"  # no owner file: never touched
    stray.mkdir()
    reaped = pgcluster.reap(pg_cluster.bindir, root.parent)
    assert root in reaped and pg_cluster.root not in reaped
    assert not root.exists()
    deadline = time.monotonic() + 10
    while alive(server) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(server)
    assert pgcluster.owner_alive(pg_cluster.root) is True and (pg_cluster.root / "data").is_dir()
    assert pgcluster.reap(pg_cluster.bindir, tmp_path) == [] and stray.is_dir()


@pytest.mark.postgres_only
def test_the_pgserver_wheel_binaries_run_the_store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Where the machine has no PostgreSQL, the binaries of PyPI's pgserver wheel (a dev
    dependency) start the cluster: forced here with AGENTS_ROOM_PG_BINDIR. As root they are
    put where the server user cannot reach them, as in a clone under a folder only its owner
    may enter (tmp_path's own folders are root's alone): the cluster runs from a copy."""
    from agents_room.store import Store

    bindir = pgcluster.pgserver_bindir()
    assert bindir is not None and (bindir / "pg_ctl").exists(), "pgserver is a dev dependency"
    if os.geteuid() == 0:
        (tmp_path / "private").mkdir(mode=0o700)
        bindir = pgcluster.copy_install(bindir, tmp_path / "private" / "wheel", 0, 0)
        assert not pgcluster.reachable(pgcluster._server_user(), bindir / "initdb")
    monkeypatch.setenv(pgcluster.BINDIR_ENV, str(bindir))
    assert pgcluster.find_bindir() == bindir
    cluster = pgcluster.start_cluster()
    try:
        assert cluster.copied_bin.exists() == (os.geteuid() == 0)
        with Store.open(pgcluster.new_schema(cluster)) as store:
            assert store.db.health()["server_version"].startswith("16.")  # the wheel's, not the system's 15
            sid = store.room_join(cwd="/work", pid=None, label="w").session_id
            assert store.lease_claim(sid, "/work/x.py").ok
        server = server_pid(cluster.root)
    finally:
        cluster.stop()
    assert not cluster.root.exists() and not alive(server)  # stopped by the copy's pg_ctl


@pytest.mark.postgres_only
def test_a_port_taken_before_the_server_binds_it_is_traded_for_another(pg_cluster, tmp_path: Path) -> None:
    import socket
    import tempfile

    with socket.socket() as taken:  # what another worker's server does between our look and our bind
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        root = Path(tempfile.mkdtemp(prefix=pgcluster.PREFIX))
        (root / pgcluster.OWNER).write_text(f"{os.getpid()} {pgcluster._started(os.getpid())}\n")
        cluster = pgcluster.Cluster(pg_cluster.bindir, root, port, "agents")
        try:
            cluster.start()
            assert cluster.port != port
            pgcluster.wait_ready(cluster.url(), 10.0)
            assert "could not bind" in (root / "log").read_text()  # the first start did meet the taken port
        finally:
            cluster.stop()


def _own_root() -> Path:
    import tempfile

    root = Path(tempfile.mkdtemp(prefix=pgcluster.PREFIX))
    (root / pgcluster.OWNER).write_text(f"{os.getpid()} {pgcluster._started(os.getpid())}\n")
    return root


@pytest.mark.postgres_only
def test_a_template_a_temporary_file_cleaner_emptied_is_made_again(pg_cluster) -> None:
    import shutil

    first = pgcluster.Cluster(pg_cluster.bindir, _own_root(), pgcluster._free_port(), "emptied")
    try:
        first.start()
        template = first._template().parent
        assert (template / "data" / "PG_VERSION").exists()
    finally:
        first.stop()
    try:
        shutil.rmtree(template / "data")  # what is left once a cleaner took the old files
        (template / "data").mkdir()
        again = pgcluster.Cluster(pg_cluster.bindir, _own_root(), pgcluster._free_port(), "emptied")
        try:
            again.start()
            pgcluster.wait_ready(again.url(), 10.0)
            assert (template / "data" / "PG_VERSION").exists()
        finally:
            again.stop()
    finally:
        shutil.rmtree(template, ignore_errors=True)  # this user's template is this test's alone
