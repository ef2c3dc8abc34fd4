"""The layers stay apart: the store imports neither ``mcp`` nor the adapters nor ``sim``; the
CLI does not import ``mcp`` until ``serve`` runs (hooks must start fast)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import agents_room.store

STORE = Path(agents_room.store.__file__).parent


def imported_names(path: Path) -> list[tuple[int, str]]:
    """(relative level, module) for every import in a file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(0, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module or ""))
    return found


def test_store_sources_import_nothing_above_the_store() -> None:
    sources = sorted(STORE.rglob("*.py"))
    assert len(sources) >= 8
    for path in sources:
        depth = len(path.relative_to(STORE).parts)  # store/x.py: 1; store/sqlite/x.py: 2
        for level, module in imported_names(path):
            top = module.split(".")[0]
            assert level <= depth, f"{path.name} reaches outside the store: {'.' * level}{module}"
            assert top not in {"mcp", "mcp_types", "sim", "starlette", "uvicorn"}, f"{path.name} imports {module}"
            if top == "agents_room":
                assert module.startswith("agents_room.store"), f"{path.name} imports {module}"


def loaded_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_importing_the_store_loads_no_adapter() -> None:
    loaded = loaded_after("import agents_room.store")
    assert not {m for m in loaded if m.split(".")[0] in {"mcp", "mcp_types", "sim", "pydantic"}}
    assert not {m for m in loaded if m.startswith(("agents_room.server", "agents_room.cli", "agents_room.harnesses"))}


def test_importing_the_cli_does_not_load_mcp() -> None:
    loaded = loaded_after("import agents_room.cli")
    assert "agents_room.cli" in loaded
    assert not {m for m in loaded if m.split(".")[0] in {"mcp", "mcp_types", "pydantic"}}


def test_importing_the_store_loads_no_engine_and_opening_one_loads_only_it(tmp_path: Path) -> None:
    """The rules speak the contract (store/engine.py): an engine is imported when a store of
    it is opened, so PostgreSQL never loads SQLite's admission queue, nor SQLite psycopg."""
    engines = ("agents_room.store.sqlite", "agents_room.store.postgres", "psycopg")
    assert not {m for m in loaded_after("import agents_room.store") if m.startswith(engines)}
    opened = loaded_after(f"from agents_room.store import Store; Store.open({str(tmp_path / 'r.db')!r}).close()")
    assert "agents_room.store.sqlite.admission" in opened
    assert not {m for m in opened if m.startswith(("agents_room.store.postgres", "psycopg"))}


def test_opening_a_postgresql_store_loads_nothing_of_sqlite(pg_url: str) -> None:
    opened = loaded_after(f"from agents_room.store import Store; Store.open({pg_url!r}).close()")
    assert "agents_room.store.postgres.database" in opened
    assert not {m for m in opened if m.startswith("agents_room.store.sqlite")}


MODULE_MAX_LINES = 400  # a module says one thing: split it by concern before it grows past this


def test_no_module_of_the_project_is_over_the_line_bound() -> None:
    root = STORE.parents[2]
    sources = sorted((root / "src" / "agents_room").rglob("*.py")) + sorted((root / "sim").rglob("*.py"))
    assert len(sources) > 100
    long = {str(p.relative_to(root)): n for p in sources if (n := len(p.read_text().splitlines())) > MODULE_MAX_LINES}
    assert not long, f"modules over {MODULE_MAX_LINES} lines (split them by concern): {long}"
