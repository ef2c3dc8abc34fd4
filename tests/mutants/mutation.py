"""Mutation by source: take a function of the shipped store, replace one exact snippet of its
source, and define the result in the function's own module, so every caller (the ``Store``
facade calls ``leases.claim(...)`` through the module) runs the broken copy. The snippet must
occur exactly once: when the shipped code changes under it, the mutant fails to build
instead of silently testing nothing."""

from __future__ import annotations

import __future__
import inspect
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
    source = textwrap.dedent(inspect.getsource(getattr(owner, method) if owner else getattr(module, name)))
    found = source.count(old)
    if found != 1:
        raise MutationError(f"{module.__name__}.{name}: the snippet {old!r} occurs {found} times, not once")
    code = compile(source.replace(old, new), f"<mutant of {module.__name__}.{name}>", "exec",
                   flags=__future__.annotations.compiler_flag, dont_inherit=True)
    if owner is None:
        exec(code, module.__dict__)  # noqa: S102 (the store's own source, one snippet changed)
        return
    scratch = dict(module.__dict__)
    exec(code, scratch)  # noqa: S102 (the method's own source, one snippet changed; the module's globals)
    setattr(owner, method, scratch[method])
