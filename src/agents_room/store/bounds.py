"""The bounds on every input. Each check raises ``InvalidArgument`` naming the field and
what was wrong, before any transaction starts."""

from __future__ import annotations

import os
import re
import stat
from typing import Any, Literal, get_args

from . import coverage, paths
from .errors import InvalidArgument

Autonomy = Literal["hold", "notify", "wake"]
Mode = Literal["exclusive", "shared"]
AUTONOMY_LEVELS: tuple[str, ...] = get_args(Autonomy)  # lowest first
MODES: tuple[str, ...] = get_args(Mode)

LABEL_MAX = 64
TAGS_MAX = 16
TAG_MAX = 32
SUBJECT_MAX = 200
BODY_MAX_BYTES = 64 * 1024
PATH_MAX_BYTES = 4096
GLOB_MAX = 256
LIMIT_RANGE = (1, 1000)
MESSAGE_TTL_RANGE = (1, 2_592_000)
LEASE_TTL_RANGE = (1, 86_400)
LEASE_TTL_DEFAULT = 600
HARNESS_MAX = 64
SESSION_ID_RE = re.compile(r"[0-9a-f]{16}")
ROOM_RE = re.compile(r"[a-z0-9][a-z0-9._:/-]{0,63}")


def shown(value: Any, limit: int = 60) -> str:
    """The value an error quotes back ("got 'sharde'", "got 42", "got ['a']"), as its JSON
    (a string in quotes), cut to ``limit`` characters: the value itself says more than its type."""
    import json  # here: the hook's news path imports this module, never an error

    try:
        text = repr(value) if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _encodable(value: str) -> bool:
    """A lone surrogate (possible in a Python str, not in UTF-8) would fail inside SQLite's
    binding with a UnicodeEncodeError instead of a coded error."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _text(field: str, value: Any, *, limit: int, allow_empty: bool = True) -> str:
    if not isinstance(value, str):
        raise InvalidArgument(field, f"must be a string, got {shown(value)}")
    if "\x00" in value:
        raise InvalidArgument(field, "must not contain NUL bytes")
    if not _encodable(value):
        raise InvalidArgument(field, "is not valid text (it holds a lone surrogate)")
    if len(value) > limit:
        raise InvalidArgument(field, f"at most {limit} characters, got {len(value)}")
    if not allow_empty and not value.strip():
        raise InvalidArgument(field, "must not be empty")
    return value


def label(value: Any) -> str | None:
    return None if value is None else _text("label", value, limit=LABEL_MAX, allow_empty=False)


def harness(value: Any) -> str | None:
    return None if value is None else _text("harness", value, limit=HARNESS_MAX, allow_empty=False)


def tags(value: Any) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list | tuple):
        raise InvalidArgument("tags", f"must be a list of strings, got {shown(value)}")
    if len(value) > TAGS_MAX:
        raise InvalidArgument("tags", f"at most {TAGS_MAX} tags, got {len(value)}")
    out = [_text("tags", t, limit=TAG_MAX, allow_empty=False) for t in value]
    return list(dict.fromkeys(out))


def room(value: Any, field: str = "room") -> str:
    if not isinstance(value, str):
        raise InvalidArgument(field, f"must be a string, got {shown(value)}")
    if not ROOM_RE.fullmatch(value):
        raise InvalidArgument(
            field, f"{shown(value)} is not a room name (lowercase letters, digits and ._:/-, at most 64)"
        )
    return value


def rooms(value: Any, field: str = "extra_rooms") -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise InvalidArgument(field, f"must be a list of room names, got {shown(value)}")
    if len(value) > TAGS_MAX:
        raise InvalidArgument(field, f"at most {TAGS_MAX} rooms, got {len(value)}")
    return [room(r, field) for r in value]


def autonomy(value: Any, field: str = "autonomy") -> str:
    if value not in AUTONOMY_LEVELS:
        raise InvalidArgument(field, f"must be one of {', '.join(AUTONOMY_LEVELS)}, got {shown(value)}")
    return value


def mode(value: Any) -> str:
    if value not in MODES:
        raise InvalidArgument("mode", f"must be exclusive or shared, got {shown(value)}")
    return value


def harness_key(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InvalidArgument("harness_key", f"must be a UUID string, got {shown(value)}")
    if _canonical_uuid(value):  # the store's form already (what every hook sends): uuid would say the same
        return value
    import uuid  # here, not at the top: the hook's news path imports this module, not this check

    try:
        return str(uuid.UUID(value.strip()))
    except ValueError:
        raise InvalidArgument("harness_key", f"{shown(value)} is not a UUID") from None


def _canonical_uuid(value: str) -> bool:
    """Is ``value`` a UUID exactly as ``str(uuid.UUID(value))`` writes it (lowercase hex,
    dashed 8-4-4-4-12)? Checked by hand: importing ``uuid`` (with ``platform``) costs the edit
    guard more than its check."""
    parts = value.split("-")
    return [len(p) for p in parts] == [8, 4, 4, 4, 12] and all(c in "0123456789abcdef" for p in parts for c in p)


def session_id_text(value: Any, field: str = "session_id") -> str:
    if not isinstance(value, str):
        raise InvalidArgument(field, f"must be a string (16 lowercase hex), got {shown(value)}")
    if "\x00" in value or len(value) > 128 or not _encodable(value):
        raise InvalidArgument(field, "is not a session id (16 lowercase hex)")
    return value.strip()


def integer(field: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgument(field, f"must be a number from {lo} to {hi}, got {shown(value)}")
    if value != value or not lo <= value <= hi:  # NaN fails the first test
        raise InvalidArgument(field, f"must be from {lo} to {hi}, got {shown(value)}")
    return value


def limit(value: Any, default: int) -> int:
    return default if value is None else int(integer("limit", value, *LIMIT_RANGE))


def lease_ttl(value: Any) -> float:
    return float(LEASE_TTL_DEFAULT if value is None else integer("ttl_s", value, *LEASE_TTL_RANGE))


def message_ttl(value: Any) -> float | None:
    return None if value is None else float(integer("ttl_s", value, *MESSAGE_TTL_RANGE))


def subject(value: Any) -> str:
    return "" if value is None else _text("subject", value, limit=SUBJECT_MAX)


def body(value: Any) -> str:
    if value is None:
        return ""
    text = _text("body", value, limit=BODY_MAX_BYTES)
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > BODY_MAX_BYTES:
        raise InvalidArgument("body", f"at most {BODY_MAX_BYTES} bytes, got {size}")
    return text


def glob(value: str) -> str:
    if len(value) > GLOB_MAX:
        raise InvalidArgument("to", f"file: glob at most {GLOB_MAX} characters, got {len(value)}")
    if not value:
        raise InvalidArgument("to", "file: needs a glob after the colon")
    if not _encodable(value):
        raise InvalidArgument("to", "is not valid text (it holds a lone surrogate)")
    return value


def spelling(value: Any, cwd: str) -> str:
    """``value`` made absolute against the session's cwd as written (:func:`.paths.absolute`:
    no symlink resolved, and every ``..`` kept, for the kernel's rule to apply it to the
    resolved folder): what the caller meant by it, and, without a ``..``, what stores written
    before paths were canonical keyed by (docs/decisions.md, "One canonical path per file")."""
    if not isinstance(value, str):
        raise InvalidArgument("path", f"must be a string, got {shown(value)}")
    if "\x00" in value:
        raise InvalidArgument("path", "must not contain NUL bytes")
    if not value.strip():
        raise InvalidArgument("path", "must not be empty")
    try:
        size = len(value.encode("utf-8"))  # strict: SQLite cannot store a lone surrogate
    except UnicodeError:
        raise InvalidArgument("path", "is not valid text") from None
    if size > PATH_MAX_BYTES:
        raise InvalidArgument("path", f"at most {PATH_MAX_BYTES} bytes, got {size}")
    return _fits(paths.absolute(os.path.expanduser(value), cwd))


def _fits(normal: str) -> str:
    if len(normal.encode("utf-8", "surrogatepass")) > PATH_MAX_BYTES:
        raise InvalidArgument("path", f"at most {PATH_MAX_BYTES} bytes once made absolute")
    return normal


def path(value: Any, cwd: str) -> str:
    """The canonical path of ``value`` against the session's cwd (store/paths.py): the one
    name of the file, whichever spelling the caller used."""
    return _not_a_file(value, _canonical(spelling(value, cwd), cwd))


def _not_a_file(value: str, where: str) -> str:
    """``where``, unless ``value`` names a folder (a trailing ``/``) and ``where`` is an
    existing file that is not one: to the kernel ``x.py/`` is no such folder (``ENOTDIR``),
    and as a directory lease beside a lease of ``x.py`` it would contend with nothing. One
    ``stat``, on a trailing ``/`` only."""
    if value.endswith(coverage.SEP) and len(where) > 1:
        try:
            mode = os.stat(where.rstrip(coverage.SEP)).st_mode
        except OSError:
            return where
        if not stat.S_ISDIR(mode):
            raise InvalidArgument("path", f"{value} ends with / but {where.rstrip(coverage.SEP)} is a file, "
                                          "not a directory: name it without the /")
    return where


def _canonical(spelled: str, cwd: str) -> str:
    # A relative path is looked up beneath its cwd alone when that cwd is canonical.
    return _fits(paths.canonical(spelled, cwd if cwd and paths.found_canonical(cwd) else ""))


def lease_paths(value: Any, cwd: str) -> tuple[str, str]:
    """``(the stored form of a lease's path, the caller's spelling in the same form)``
    (store/coverage.py): :func:`path` and :func:`spelling`, with a trailing ``/`` when the
    caller wrote one or the path is an existing directory (a directory lease)."""
    spelled = spelling(value, cwd)
    where = coverage.lease_path(_not_a_file(value, _canonical(spelled, cwd)), value)
    return where, coverage.as_directory(spelled) if coverage.is_directory(where) else spelled


def lease_path(value: Any, cwd: str) -> str:
    """The stored form of a lease's path: the first of :func:`lease_paths`."""
    return lease_paths(value, cwd)[0]


def message_id(value: Any, field: str = "message_id") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and value.isdigit():
            value = int(value)
        else:
            raise InvalidArgument(field, f"must be a positive integer, got {shown(value)}")
    if not 1 <= value <= 2**63 - 1:
        raise InvalidArgument(field, f"must be a positive integer, got {shown(value)}")
    return value
