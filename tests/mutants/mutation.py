"""Mutation by source: take a function of the shipped store, replace one exact snippet of its
source, and define the result in the function's own module (and under that name wherever
another module imported it), so every caller runs the broken copy. The snippet must
occur exactly once: when the shipped code changes under it, the mutant fails to build
instead of silently testing nothing."""

from __future__ import annotations

import __future__
import inspect
import sys
import textwrap
from types import ModuleType


class MutationError(RuntimeError):
    pass


def rewrite(module: ModuleType, name: str, old: str, new: str) -> None:
    """Replace ``old`` by ``new`` in the source of ``module.name`` and redefine it there;
    ``Class.method`` redefines that method on the class (callers that imported the class by
    name run the broken copy too)."""
    owner_name, _, method = name.rpartition(".")
    owner = getattr(module, owner_name) if owner_name else None
    shipped = getattr(owner or module, method)
    source = textwrap.dedent(inspect.getsource(shipped))
    found = source.count(old)
    if found != 1:
        raise MutationError(f"{module.__name__}.{name}: the snippet {old!r} occurs {found} times, not once")
    code = compile(source.replace(old, new), f"<mutant of {module.__name__}.{name}>", "exec",
                   flags=__future__.annotations.compiler_flag, dont_inherit=True)
    if owner is None:
        exec(code, module.__dict__)  # noqa: S102 (the store's own source, one snippet changed)
        rebind(shipped, getattr(module, name))
        return
    scratch = dict(module.__dict__)
    exec(code, scratch)  # noqa: S102 (the method's own source, one snippet changed; the module's globals)
    setattr(owner, method, scratch[method])


def rebind(shipped: object, broken: object) -> None:
    """Modules that imported the function by name (``from .delivery import advance``) call
    the broken copy too."""
    for mod_name, mod in list(sys.modules.items()):
        if mod is None or not mod_name.startswith("agents_room"):
            continue
        for attr, value in list(vars(mod).items()):
            if value is shipped:
                setattr(mod, attr, broken)
