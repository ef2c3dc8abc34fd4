"""A run's bind mounts (sim/run/mounts.py): the namespace is made, a process entering it finds
the repository at its mount point (the same device and inode), the host's namespace never
holds the mount, and it is gone with the namespace; where none can be made, the run says so
(or, required, fails). The mapping the checker judges by (spellings.json) maps bound/ back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sim.run import mounts
from sim.run.layout import Layout, make_spellings
from sim.scenario.scenario import Repo

_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="a mount namespace needs root (unshare -m)")


def _mounted(pid: int, target: Path) -> bool:
    return any(line.split()[4] == str(target) for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines())


@_ROOT
def test_the_namespace_holds_the_mount_and_it_ends_with_it(tmp_path: Path) -> None:
    out = Path(os.path.realpath(tmp_path))
    repo = out / "repos" / "core"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "x.py").write_text("x = 1\n")
    space = mounts.MountSpace.make(mounts.targets(out, ["core"]))
    assert space is not None
    target = out / mounts.BOUND / "core"
    try:
        assert _mounted(space.holder.pid, target) and not _mounted(os.getpid(), target)
        looked = subprocess.run(space.command([sys.executable, "-c", "import os; s = os.stat('src/x.py'); "
                                               "print(os.getcwd(), s.st_dev, s.st_ino)"], cwd=target),
                                capture_output=True, text=True, timeout=60, check=True)
        real = os.stat(repo / "src" / "x.py")
        assert looked.stdout.split() == [str(target), str(real.st_dev), str(real.st_ino)]
        assert os.listdir(target) == []  # here, the mount point is an empty folder
    finally:
        space.close()
    assert space.holder.poll() is not None and not _mounted(os.getpid(), target)


def test_without_a_namespace_the_run_says_so_or_fails_when_required(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no unshare to be found: as where none can be made
    monkeypatch.delenv(mounts.REQUIRE_ENV, raising=False)
    binds = mounts.targets(tmp_path, ["core"])
    assert mounts.MountSpace.make(binds) is None
    assert "bind mounts: no mount namespace could be made" in capsys.readouterr().err
    monkeypatch.setenv(mounts.REQUIRE_ENV, "1")
    with pytest.raises(mounts.MountsUnavailable, match=f"{mounts.REQUIRE_ENV}=1 requires them"):
        mounts.MountSpace.make(binds)


def test_the_mount_point_is_judged_as_the_repository(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.repos.mkdir()
    names = make_spellings(layout, 1, ["core"], bound=True)
    real = os.path.realpath(layout.repos)
    assert names[str(tmp_path / "bound")] == real and names[str(tmp_path / "bound" / "core" / "alias")] == f"{real}/core/src"
    assert json.loads(layout.spellings.read_text()) == names
    repo = Repo("core", agents=3, bind_mounts=1)
    assert [layout.repo_path(repo, k) for k in range(3)] == [layout.repos / "core"] * 3  # not mounted: as ever
    layout.mounted = True
    assert layout.repo_path(repo, 2) == tmp_path / "bound" / "core" and layout.repo_path(repo, 1) == layout.repos / "core"
