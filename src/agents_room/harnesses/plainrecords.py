"""Plain records standing in for ``dataclasses``, in the edit guard's own process only.

The edit guard (agents_room/harnesses/editguard.py) runs the store's own rules
(store/editclaim.py and the modules it stands on) whenever an edit needs a write: a first edit
of a file, a denial, a read baseline. Those modules define their records as frozen
dataclasses, and importing ``dataclasses`` (with ``inspect``, ``ast``, ``dis``, ``tokenize``)
and building each record's class (``dataclass`` compiles its methods from source, class by
class) was about half of that path's CPU. The guard asks nothing of a record that only a
dataclass answers (``asdict``, ``fields`` for serialising are the server's and the CLI's): it
builds records, reads their fields and compares them.

So, in the guard's short-lived process, and only when ``dataclasses`` is not loaded yet,
:func:`standing_in` imports the store while this module is ``dataclasses``: ``@dataclass``
gives the same fields (a base record's first), defaults, construction by position and keyword,
equality, hash, repr and (``frozen``) refusal to assign, from shared methods rather than
compiled ones; any other option is refused (TypeError), never guessed. It is then forgotten, so
a later ``import dataclasses`` in the process is the real module. tests/test_editguard_cost.py
holds every record of the store built here to the real dataclass's fields and defaults.

Stdlib-free: imported on the guard's path, where every import costs.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MISSING = object()


class FrozenInstanceError(AttributeError):
    """An assignment to a frozen record's field (as ``dataclasses.FrozenInstanceError``)."""


class Field:
    """A record's field, as ``dataclasses.fields`` names it (``name``, ``default``)."""

    __slots__ = ("name", "default")

    def __init__(self, name: str, default: Any) -> None:
        self.name, self.default = name, default


def dataclass(cls: type | None = None, /, *, frozen: bool = False, **options: Any) -> Any:
    """``@dataclass`` / ``@dataclass(frozen=True)``: the record's methods over its annotated
    fields (see the module's docstring). Other options are refused."""
    if options:
        raise TypeError(f"plain records do not do {sorted(options)}")

    def wrap(c: type) -> type:
        return _build(c, frozen)

    return wrap if cls is None else wrap(cls)


def fields(record: Any) -> tuple[Field, ...]:
    return tuple(getattr(record, "__plain_fields__"))


def _build(cls: type, frozen: bool) -> type:
    order: dict[str, Field] = {}
    for base in reversed(cls.__mro__[1:]):
        for f in base.__dict__.get("__plain_fields__", ()):
            order[f.name] = f
    for name, kind in cls.__dict__.get("__annotations__", {}).items():
        if isinstance(kind, str) and kind.split("[")[0].strip() in ("ClassVar", "typing.ClassVar"):
            continue
        order[name] = Field(name, cls.__dict__.get(name, MISSING))
    made = tuple(order.values())
    names = tuple(order)
    cls.__plain_fields__ = made  # type: ignore[attr-defined]
    cls.__match_args__ = names  # type: ignore[attr-defined]
    own = cls.__dict__

    def __init__(self: Any, *args: Any, **kw: Any) -> None:
        if len(args) > len(names):
            raise TypeError(f"{cls.__name__}() takes {len(names)} arguments, got {len(args)}")
        values = dict(zip(names, args))
        for key, value in kw.items():
            if key not in order or key in values:
                raise TypeError(f"{cls.__name__}() got an unexpected or repeated argument {key!r}")
            values[key] = value
        for f in made:
            value = values.get(f.name, f.default)
            if value is MISSING:
                raise TypeError(f"{cls.__name__}() missing required argument: {f.name!r}")
            object.__setattr__(self, f.name, value)

    def __repr__(self: Any) -> str:
        return f"{type(self).__qualname__}(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in names) + ")"

    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)

    cls.__init__ = __init__  # type: ignore[misc]
    for name, method in (("__repr__", __repr__), ("__eq__", __eq__)):
        if name not in own:
            setattr(cls, name, method)
    if frozen:
        def __setattr__(self: Any, name: str, value: Any) -> None:
            if type(self) is cls or name in order:
                raise FrozenInstanceError(f"cannot assign to field {name!r}")
            object.__setattr__(self, name, value)

        def __delattr__(self: Any, name: str) -> None:
            if type(self) is cls or name in order:
                raise FrozenInstanceError(f"cannot delete field {name!r}")
            object.__delattr__(self, name)

        def __hash__(self: Any) -> int:
            return hash(tuple(getattr(self, n) for n in names))

        cls.__setattr__, cls.__delattr__ = __setattr__, __delattr__  # type: ignore[method-assign,assignment]
        if "__hash__" not in own or own["__hash__"] is None:
            cls.__hash__ = __hash__  # type: ignore[method-assign,assignment]
    elif "__eq__" not in own:
        cls.__hash__ = None  # type: ignore[assignment]  # eq without frozen: unhashable, as dataclass makes it
    return cls


def standing_in(active: bool = True) -> Any:
    """A context in which ``import dataclasses`` is this module (``active``), unless the real
    one is loaded already (then nothing changes); afterwards it is forgotten again."""
    return _Standing(active)


class _Standing:
    def __init__(self, active: bool) -> None:
        self.mine = active and "dataclasses" not in sys.modules

    def __enter__(self) -> None:
        if self.mine:
            sys.modules["dataclasses"] = sys.modules[__name__]

    def __exit__(self, *exc: object) -> None:
        if self.mine and sys.modules.get("dataclasses") is sys.modules[__name__]:
            del sys.modules["dataclasses"]
