"""``[[repos]] spellings``: the run makes a symlink to the folder above the repositories, hands
the agents of one repository its path spelled both ways in turn, and records each spelled
folder with the real folder it names (``spellings.json``) for the checker. The runs of
tests/regression/ (both drivers) show the spellings reach the store and that the verdict
judges files; here, the layout itself."""

from __future__ import annotations

import json
import os
from pathlib import Path

from sim.check.identity import Spellings
from sim.run.layout import MOVED, Layout, inner_file, move_src, prepare, read_spellings
from sim.scenario.scenario import parse

SCENARIO = """
[run]
duration_s = 1
[[repos]]
name = "core"
agents = 4
files = 2
spellings = 3
[[repos]]
name = "edge"
agents = 2
files = 1
[workload.mix]
lease_claim = 1
"""


def test_the_run_links_the_repositories_and_deals_the_spellings_round(tmp_path: Path) -> None:
    scenario = parse(SCENARIO)
    layout = Layout(tmp_path / "run")
    prepare(scenario, layout)
    real = os.path.realpath(layout.repos)
    for k in (1, 2):
        link = layout.out / "spelled" / str(k)
        assert link.is_symlink() and os.readlink(link) == "../repos"  # relative: the run's folder may move
        assert os.path.realpath(link / "core" / "src" / "mod_00.py") == f"{real}/core/src/mod_00.py"
    assert not (layout.out / "spelled" / "3").exists()
    core, edge = scenario.repos
    assert [layout.repo_path(core, i) for i in range(4)] == [
        layout.repos / "core", layout.out / "spelled/1/core", layout.out / "spelled/2/core", layout.repos / "core"]
    assert {layout.repo_path(edge, i) for i in range(2)} == {layout.repos / "edge"}
    recorded = json.loads(layout.spellings.read_text())
    plain = {} if str(layout.repos) == real else {str(layout.repos): real}  # (a temp folder under a symlink)
    assert recorded == read_spellings(layout) == {**plain, str(layout.out / "spelled/1"): real,
                                                  str(layout.out / "spelled/2"): real}
    names = Spellings(recorded)
    assert names.path(str(layout.out / "spelled/2/core/src/mod_01.py")) == f"{real}/core/src/mod_01.py"


def test_inner_spellings_name_src_through_a_symlinked_folder_and_through_dotdot(tmp_path: Path) -> None:
    """``inner_spellings = 3``: the agents of a repository spell ``src/`` as itself, as ``alias/``
    (``alias -> src``) and as ``via/../`` (``via -> src/pkg``: the kernel's ``..`` climbs out of
    ``src/pkg``, the text's out of ``via``), and spellings.json maps each to the real ``src``."""
    scenario = parse(SCENARIO.replace('name = "core"', 'name = "core"\ninner_spellings = 3', 1))
    layout = Layout(tmp_path / "run")
    prepare(scenario, layout)
    core = scenario.repos[0]
    real = os.path.realpath(layout.repos)
    spelled = [inner_file("src/mod_00.py", core, i) for i in range(9)]
    # dealt by position // spellings, so each folder spelling meets each inner one
    assert spelled == ["src/mod_00.py"] * 3 + ["alias/mod_00.py"] * 3 + ["via/../mod_00.py"] * 3
    for name in spelled:  # every spelling is the same file to the kernel
        assert os.path.realpath(layout.repos / "core" / name) == f"{real}/core/src/mod_00.py"
    assert os.path.abspath(layout.repos / "core" / "via/../mod_00.py") != f"{real}/core/src/mod_00.py"  # not as text
    names = Spellings(read_spellings(layout))
    for name in spelled:
        assert names.path(f"{layout.out}/spelled/2/core/{name}") == f"{real}/core/src/mod_00.py"
    assert names.path(f"{layout.repos}/edge/alias/mod_00.py") == f"{layout.repos}/edge/alias/mod_00.py"  # edge: none


def test_a_moved_src_is_the_same_folder_under_a_symlink_and_judged_by_its_old_name(tmp_path: Path) -> None:
    """``move_src_at_s``: ``src/`` becomes ``src.moved/`` (the same folder, device and inode) and
    ``src`` a symlink to it, in one step; every spelling of a file still leads to it, and
    spellings.json maps the new name back to ``src`` for the checker."""
    scenario = parse(SCENARIO.replace('name = "core"', 'name = "core"\ninner_spellings = 3\nmove_src_at_s = 2', 1))
    assert scenario.repos[0].move_src_at_s == 2 and scenario.repos[1].move_src_at_s == 0
    layout = Layout(tmp_path / "run")
    prepare(scenario, layout)
    real = os.path.realpath(layout.repos)
    before = os.stat(layout.repos / "core" / "src")
    move_src(layout.repos / "core")
    moved = layout.repos / "core" / MOVED
    assert (layout.repos / "core" / "src").is_symlink() and not moved.is_symlink()
    assert os.readlink(layout.repos / "core" / "src") == MOVED  # relative: a bind mount's name of the repo stays its
    assert (os.stat(moved).st_dev, os.stat(moved).st_ino) == (before.st_dev, before.st_ino)
    for name in ("src/mod_00.py", "alias/mod_00.py", "via/../mod_00.py"):
        assert os.path.realpath(layout.repos / "core" / name) == f"{real}/core/{MOVED}/mod_00.py"
    names = Spellings(read_spellings(layout))
    assert names.path(f"{real}/core/{MOVED}/mod_00.py") == f"{real}/core/src/mod_00.py"
    assert names.path(f"{layout.out}/spelled/2/core/{MOVED}/") == f"{real}/core/src/"
    assert names.path(f"{real}/edge/{MOVED}/mod_00.py") == f"{real}/edge/{MOVED}/mod_00.py"  # edge: never moved


def test_a_run_folder_reached_through_a_symlink_records_that_spelling_too(tmp_path: Path) -> None:
    (tmp_path / "disk").mkdir()
    (tmp_path / "home").symlink_to(tmp_path / "disk")
    layout = Layout(tmp_path / "home" / "run")
    prepare(parse(SCENARIO.replace("spellings = 3", "spellings = 1")), layout)
    # Every agent spells repos/ through home/, the store keys by the real disk/: the checker must know both.
    assert read_spellings(layout) == {str(layout.repos): os.path.realpath(tmp_path / "disk" / "run" / "repos")}
    assert not (layout.out / "spelled").exists()


def test_a_run_made_before_spellings_were_recorded_has_none(tmp_path: Path) -> None:
    assert read_spellings(Layout(tmp_path)) == {}
