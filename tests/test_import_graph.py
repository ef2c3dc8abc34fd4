"""The import graph of ``src/agents_room`` and ``sim``: no cycles, and sim's stages import only
the stages before them.

Every import counts, at module level or inside a function (where a cycle hides best) or
under ``TYPE_CHECKING``; relative imports are resolved. A cycle between modules fails with
the modules named. Each stage of sim (a subpackage, or one of the modules at its top) may
import only what :data:`SIM_MAY_IMPORT` lists, and its ``__init__`` docstring says the same
in its ``Imports from sim:`` line: the test holds the two to each other. The functions are
tried on small packages made in a temporary folder, so they are seen to fail.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREES = {"agents_room": ROOT / "src" / "agents_room", "sim": ROOT / "sim"}

# What each stage of the simulator may import from the rest of sim, in pipeline order: a
# stage may use the ones before it, never one after (agents_room, the standard library and
# the third-party packages are free). ``check`` judges a run from its files alone, so it
# imports neither ``run`` nor ``faults`` and can judge a run made elsewhere; the nemesis
# acts on a run through ``faults.control.RunControl``, so ``faults`` never imports ``run``.
SIM_MAY_IMPORT: dict[str, set[str]] = {
    "sim.scenario": set(),
    "sim.check": set(),
    "sim.harness": set(),  # the scripted model and the real CLIs: the tests use it too
    "sim.fit": {"sim.scenario"},
    "sim.hosts": {"sim.scenario"},
    "sim.faults": {"sim.scenario", "sim.check"},
    "sim.run": {"sim.scenario", "sim.check", "sim.hosts", "sim.faults", "sim.harness"},
    "sim.report": {"sim.scenario", "sim.check", "sim.hosts", "sim.faults", "sim.run", "sim.fit"},
    "sim.pipeline": {"sim.scenario", "sim.check", "sim.hosts", "sim.faults", "sim.run", "sim.report", "sim.fit"},
    "sim.bench": {"sim.scenario", "sim.check", "sim.hosts", "sim.faults", "sim.run", "sim.report", "sim.pipeline",
                  "sim.fit"},
    "sim.cli": {"sim.scenario", "sim.check", "sim.hosts", "sim.faults", "sim.run", "sim.report", "sim.pipeline",
                "sim.bench", "sim.fit"},
    "sim": set(),  # sim/__init__.py: the map, no code
}


def modules(package: str, folder: Path) -> dict[str, Path]:
    """Dotted name -> file, for every module of the package in ``folder`` (a package is its
    ``__init__.py``)."""
    found = {}
    for path in sorted(folder.rglob("*.py")):
        parts = [package, *path.relative_to(folder).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The known modules ``name`` (in ``path``) imports anywhere in its code: ``from p import
    x`` is the module ``p.x`` when there is one, else ``p`` itself."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # ``import a.b.c`` of a non-module c
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def graph(trees: dict[str, Path]) -> dict[str, set[str]]:
    files = {name: path for package, folder in trees.items() for name, path in modules(package, folder).items()}
    return {name: imports_of(name, path, set(files)) for name, path in files.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def stage(module: str) -> str:
    """``sim.run.agent`` -> ``sim.run``; ``sim.cli`` -> ``sim.cli``; ``sim`` -> ``sim``."""
    return ".".join(module.split(".")[:2])


def forbidden(edges: dict[str, set[str]], may_import: dict[str, set[str]]) -> list[str]:
    """Each import from one sim stage into another that ``may_import`` does not allow."""
    out = []
    for source, targets in sorted(edges.items()):
        if not source.startswith("sim"):
            continue
        for target in sorted(targets):
            here, there = stage(source), stage(target)
            if target.startswith("sim") and there != here and there not in may_import.get(here, set()):
                out.append(f"{source} imports {target}: {here} may import only {sorted(may_import.get(here, set()))}")
    return out


# The store's engines: one subpackage each, behind the contract (store/engine.py). The rest of
# the store (the rules modules, the Store facade, the neutral modules) speaks only the
# contract; store/engines.py opens an engine by its module's name, never by an import.
STORE = "agents_room.store"
ENGINE_PACKAGES = ("agents_room.store.sqlite", "agents_room.store.postgres")


def engine_of(module: str) -> str | None:
    return next((p for p in ENGINE_PACKAGES if module == p or module.startswith(p + ".")), None)


def engine_leaks(edges: dict[str, set[str]]) -> list[str]:
    """Each import of an engine module by a store module outside that engine: a rules module
    (or any neutral one) importing an engine, or one engine importing another."""
    out = []
    for source, targets in sorted(edges.items()):
        if source != STORE and not source.startswith(STORE + "."):
            continue
        for target in sorted(targets):
            there = engine_of(target)
            if there and engine_of(source) != there:
                out.append(f"{source} imports {target}: only {there} itself may (the rest speaks store/engine.py)")
    return out


def docstring_rule(init: Path) -> set[str]:
    """The stages named on the ``Imports from sim:`` line of a package's docstring."""
    doc = ast.get_docstring(ast.parse(init.read_text())) or ""
    line = re.search(r"^Imports from sim:(.*(?:\n(?!\n).*)*)", doc, re.M)
    assert line, f"{init} has no 'Imports from sim:' line"
    return {f"sim.{n}" for n in re.findall(r"``(\w+)``", line.group(1))}


# -- the project --------------------------------------------------------------------------------


def test_no_import_cycles_in_src_or_sim() -> None:
    edges = graph(TREES)
    assert len(edges) > 60 and "sim.faults.nemesis" in edges and "agents_room.store.sqlite.turnqueue" in edges
    assert cycles(edges) == []


def test_sim_stages_import_only_earlier_stages() -> None:
    edges = graph(TREES)
    assert forbidden(edges, SIM_MAY_IMPORT) == []
    # The checker judges from files alone: nothing of run/ or faults/ in check/.
    assert not {t for s, ts in edges.items() if s.startswith("sim.check") for t in ts
                if t.startswith(("sim.run", "sim.faults"))}
    # The nemesis acts through RunControl, not the runner.
    assert "sim.faults.control" in edges["sim.faults.nemesis"]
    assert not {t for t in edges["sim.faults.nemesis"] | edges["sim.faults.reaper"] if t.startswith("sim.run")}


def test_no_store_module_outside_an_engine_imports_one() -> None:
    edges = graph(TREES)
    # The engines are there, and the rules modules are typed against the contract.
    assert {"agents_room.store.sqlite.database", "agents_room.store.postgres.database"} <= set(edges)
    for rules in ("leases", "messages", "reads", "rooms", "sessions", "overview", "wake"):
        assert "agents_room.store.engine" in edges[f"agents_room.store.{rules}"], rules
    assert engine_leaks(edges) == []


def test_every_stage_is_in_the_table_and_its_docstring_agrees() -> None:
    stages = {stage(m) for m in modules("sim", TREES["sim"])}
    assert stages == set(SIM_MAY_IMPORT)
    for init in sorted(TREES["sim"].glob("*/__init__.py")):
        name = f"sim.{init.parent.name}"
        assert docstring_rule(init) == SIM_MAY_IMPORT[name], f"{init}: its docstring and SIM_MAY_IMPORT differ"


# Folders of data files, no code, that Python sees as (namespace) packages: setuptools warns
# unless they are listed as packages, their files as package data.
DATA_PACKAGES = {"agents_room.dashboard.static"}


def test_every_package_is_installed() -> None:
    """setuptools installs only the packages pyproject lists: a new subpackage must be there."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    on_disk = {name for package, folder in TREES.items() for name, path in modules(package, folder).items()
               if path.name == "__init__.py"}
    assert listed == on_disk | DATA_PACKAGES
    for name in DATA_PACKAGES:
        folder = ROOT / "src" / Path(*name.split("."))
        files = sorted(p.name for p in folder.iterdir())
        assert files and not [f for f in files if f.endswith(".py")], (name, files)
        globs = setuptools["package-data"][name]
        assert all(any(Path(f).match(g) for g in globs) for f in files), (name, files, globs)  # every file shipped


# -- the checks fail where they should -------------------------------------------------------------


def make(tmp: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / rel).write_text(text)
    return tmp


def test_a_cycle_through_a_function_level_import_is_found(tmp_path: Path) -> None:
    root = make(tmp_path / "pkg", {
        "__init__.py": "",
        "run/__init__.py": "",
        "run/runner.py": "def go():\n    from ..faults.nemesis import Nemesis\n    return Nemesis\n",
        "faults/__init__.py": "",
        "faults/nemesis.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..run import runner\n"
                             "class Nemesis: ...\n",
        "faults/clock.py": "import pkg.faults.nemesis\n",
    })
    edges = graph({"pkg": root})
    assert edges["pkg.run.runner"] == {"pkg.faults.nemesis"}
    assert edges["pkg.faults.nemesis"] == {"pkg.run.runner"}
    assert cycles(edges) == [["pkg.faults.nemesis", "pkg.run.runner"]]
    # Without the TYPE_CHECKING import: a chain, no cycle.
    (root / "faults" / "nemesis.py").write_text("class Nemesis: ...\n")
    assert cycles(graph({"pkg": root})) == []


def test_a_longer_cycle_is_named_whole(tmp_path: Path) -> None:
    root = make(tmp_path / "pkg", {"__init__.py": "", "a.py": "from . import b\n", "b.py": "from .c import x\n",
                                   "c.py": "from pkg import a\nx = 1\n", "d.py": "from . import a\n"})
    assert cycles(graph({"pkg": root})) == [["pkg.a", "pkg.b", "pkg.c"]]


def test_a_checker_importing_the_run_is_refused(tmp_path: Path) -> None:
    root = make(tmp_path / "sim", {
        "__init__.py": "", "run/__init__.py": "", "run/layout.py": "",
        "check/__init__.py": "", "check/checker.py": "def f():\n    from ..run.layout import x\n",
        "faults/__init__.py": "", "faults/nemesis.py": "from ..check import checker\n",
    })
    edges = graph({"sim": root})
    assert forbidden(edges, SIM_MAY_IMPORT) == [
        "sim.check.checker imports sim.run.layout: sim.check may import only []"]


def test_a_rules_module_importing_an_engine_is_refused(tmp_path: Path) -> None:
    root = make(tmp_path / "agents_room", {
        "__init__.py": "", "store/__init__.py": "", "store/engine.py": "class Tx: ...\n",
        "store/leases.py": "from .engine import Tx\n",
        "store/reads.py": "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from .sqlite.database import Tx\n",
        "store/rooms.py": "def f():\n    from agents_room.store.postgres import listen\n",
        "store/sqlite/__init__.py": "", "store/sqlite/database.py": "from ..engine import Tx\nfrom . import opening\n",
        "store/sqlite/opening.py": "", "store/postgres/__init__.py": "",
        "store/postgres/listen.py": "from ..sqlite.opening import x\n",
    })
    assert engine_leaks(graph({"agents_room": root})) == [
        "agents_room.store.postgres.listen imports agents_room.store.sqlite.opening: only agents_room.store.sqlite "
        "itself may (the rest speaks store/engine.py)",
        "agents_room.store.reads imports agents_room.store.sqlite.database: only agents_room.store.sqlite itself "
        "may (the rest speaks store/engine.py)",
        "agents_room.store.rooms imports agents_room.store.postgres.listen: only agents_room.store.postgres itself "
        "may (the rest speaks store/engine.py)",
    ]
    # Typed against the contract only: nothing to refuse.
    (root / "store" / "reads.py").write_text("from .engine import Tx\n")
    (root / "store" / "rooms.py").write_text("")
    (root / "store" / "postgres" / "listen.py").write_text("from ..engine import Tx\nfrom ..errors import E\n")
    assert engine_leaks(graph({"agents_room": root})) == []


def test_a_docstring_rule_is_read(tmp_path: Path) -> None:
    init = make(tmp_path, {"x/__init__.py": '"""Things.\n\nImports from sim: ``scenario``,\n``check``.\n\nMore."""\n'})
    assert docstring_rule(init / "x" / "__init__.py") == {"sim.scenario", "sim.check"}
