"""Every one-line mutant of ``tests/mutants/rules.py`` still builds against the store as it
is now: its snippet occurs exactly once. A store change under a snippet makes the mutant
fail to build, which a run reports only as an aborted start (verdict unknown); this finds
it in a second instead."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mutants import BY_NAME, rules  # noqa: E402
from mutants.mutation import rebind, rewrite  # noqa: E402


@pytest.mark.parametrize("name", sorted(rules.MUTATIONS))
def test_the_mutant_builds_and_changes_its_function(name: str) -> None:
    _rule, module, function, old, new, _bug = rules.MUTATIONS[name]
    owner_name, _, attr = function.rpartition(".")  # a function, or Class.method
    owner = getattr(module, owner_name) if owner_name else module
    shipped = getattr(owner, attr)
    try:
        rewrite(module, function, old, new)
        assert getattr(owner, attr) is not shipped
    finally:
        broken = getattr(owner, attr)
        setattr(owner, attr, shipped)
        rebind(broken, shipped)  # and wherever rewrite rebound it
    assert name.replace("_", "-") in BY_NAME  # in the matrix, with the invariants that must catch it


def test_the_spelling_mutant_builds_and_keys_paths_as_spelled(tmp_path: Path) -> None:
    """``spelling-keyed`` swaps the store's canonical-path rules (store/paths.py) for the
    spelling; when they are renamed or bypassed it must fail to build, not test nothing."""
    from agents_room.store import bounds, paths
    from mutants import spellings

    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    spelled, real = str(tmp_path / "link" / "x.py"), str((tmp_path / "real").resolve() / "x.py")
    assert bounds.path(spelled, "/") == real  # the shipped rule: one name per file
    shipped = {name: getattr(paths, name) for name in spellings.RULES}
    try:
        spellings.respell()
        assert bounds.path(spelled, "/") == spelled and paths.glob(spelled) == spelled
    finally:
        for mod_name, mod in list(sys.modules.items()):
            if mod_name.startswith("agents_room") and mod is not None:
                for attr, value in list(vars(mod).items()):
                    if value is spellings.as_spelled and attr in shipped:
                        setattr(mod, attr, shipped[attr])
    assert bounds.path(spelled, "/") == real
    assert "spelling-keyed" in BY_NAME
