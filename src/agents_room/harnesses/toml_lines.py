"""A TOML file edited by lines, for a configuration that is the user's own (Codex's
``config.toml``): a key's lines are replaced, removed or added inside its table, a table is
appended; every other byte, comments and layout included, stays as it was.

It understands the common layout (``[table]`` headers on their own lines, one ``key = value``
per line or a value spread over the lines that follow it). It does not check its own work:
the caller reads the result back with ``tomllib`` and refuses it unless it says what was meant.
"""

from __future__ import annotations

import json
import re
import tomllib
from typing import Any

HEADER = re.compile(r"^\s*\[(\[?)\s*([^\[\]]+?)\s*\]\]?\s*(#.*)?$")
# One part of a dotted name: bare, a basic string or a literal string (a path, as Codex's hook
# state keys are, is quoted and holds dots of its own).
_PART = r"""(?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|'[^']*')"""
KEY = re.compile(rf"^\s*({_PART}(?:\s*\.\s*{_PART})*)\s*=")
PART = re.compile(rf"\s*({_PART})\s*(?:\.|$)")
BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def toml_value(value: Any) -> str:
    """A value as TOML writes it on one line (TypeError for what has no TOML form)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):  # an inline table: each key is one key, never a dotted path
        pairs = (f"{k if BARE.match(k) else json.dumps(k)} = {toml_value(v)}" for k, v in value.items())
        return "{ " + ", ".join(pairs) + " }"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def toml_key(key: str) -> str:
    """A dotted name in one form: each part bare when it can be, else a basic string
    (``mcp_servers . "room"`` and ``mcp_servers.room`` are both ``mcp_servers.room``)."""
    return ".".join(part if BARE.match(part) else json.dumps(part) for part in _parts(key))


def _parts(name: str) -> list[str]:
    """The parts of a dotted name as TOML reads it: ``a."b.c"`` is ``a`` and ``b.c``. A name
    not written that way is split at its dots."""
    out, at, text = [], 0, name.strip()
    while at < len(text):
        m = PART.match(text, at)
        if not m or m.end() == at:
            return [part.strip().strip("\"'") for part in text.split(".")]
        raw = m.group(1)
        out.append(json.loads(raw) if raw[0] == '"' else raw[1:-1] if raw[0] == "'" else raw)
        at = m.end()
    return out


_name = toml_key  # a table or key name as written, in the one form the edits compare


class Document:
    def __init__(self, text: str) -> None:
        self.lines = text.splitlines(keepends=True)

    def text(self) -> str:
        return "".join(self.lines)

    # -- where things are ------------------------------------------------------------------------

    def _sections(self) -> list[tuple[str | None, int, int]]:
        """``(name, header line, end)`` per table; the root's name is None and its header -1.
        An array of tables (``[[x]]``) has the name ``[[x]]``: never edited."""
        out: list[tuple[str | None, int, int]] = []
        name: str | None = None
        start = -1
        for i, line in enumerate(self.lines):
            m = HEADER.match(line)
            if m:
                out.append((name, start, i))
                name, start = (f"[[{_name(m.group(2))}]]" if m.group(1) else _name(m.group(2))), i
        out.append((name, start, len(self.lines)))
        return out

    def _section(self, table: str | None) -> tuple[int, int] | None:
        for name, start, end in self._sections():
            if name == table:
                return start, end
        return None

    def has_table(self, table: str) -> bool:
        return self._section(table) is not None

    def _key_lines(self, table: str | None) -> list[tuple[str, int, int]]:
        """``(key, first line, end)`` for each key of a table's body, a value spread over
        several lines included whole."""
        found = self._section(table)
        if found is None:
            return []
        start, end = found
        out = []
        i = start + 1
        while i < end:
            m = KEY.match(self.lines[i])
            if not m or self.lines[i].lstrip().startswith("#"):
                i += 1
                continue
            j = i + 1
            while j < end and not self._parses(i, j):
                j += 1
            out.append((_name(m.group(1)), i, j))
            i = j
        return out

    def _parses(self, i: int, j: int) -> bool:
        try:
            tomllib.loads("".join(self.lines[i:j]))
        except tomllib.TOMLDecodeError:
            return False
        return True

    def keys(self, table: str | None) -> list[str]:
        return [key for key, _, _ in self._key_lines(table)]

    def has_key(self, table: str | None, key: str) -> bool:
        return key in self.keys(table)

    def defines_inline(self, key: str) -> bool:
        """Does the root table set ``key`` (or a dotted key under it) inline?"""
        return any(k == key or k.startswith(key + ".") for k in self.keys(None))

    # -- edits -----------------------------------------------------------------------------------

    def set_key(self, table: str, key: str, value: Any) -> None:
        """Replace ``key``'s lines in ``table`` with ``key = value``; add it after the table's
        last key when missing; ``value`` None removes it."""
        for name, first, end in self._key_lines(table):
            if name == key:
                self.lines[first:end] = [] if value is None else [f"{toml_key(key)} = {toml_value(value)}\n"]
                return
        if value is None:
            return
        start, end = self._section(table) or (len(self.lines), len(self.lines))
        at = start + 1
        for i in range(start + 1, end):
            if self.lines[i].strip() and not self.lines[i].lstrip().startswith("#"):
                at = i + 1
        self._ensure_newline(at)
        self.lines.insert(at, f"{toml_key(key)} = {toml_value(value)}\n")

    def drop_if_empty(self, table: str) -> None:
        """Remove ``[table]`` when no key is left in it (its blank lines with it)."""
        found = self._section(table)
        if found is None or self._key_lines(table):
            return
        start, end = found
        if any(line.strip() for line in self.lines[start + 1:end]):
            return  # a comment stays, and with it the header that keeps it in place
        while start > 0 and not self.lines[start - 1].strip():
            start -= 1
        self.lines[start:end] = []

    def add_subtable(self, table: str, sub: str, entry: dict[str, Any]) -> None:
        """``[table.sub]`` with ``entry``, placed after ``table`` and its sub-tables."""
        sections = self._sections()
        at = None
        for name, _, end in sections:
            if name == table or (at is not None and name and name.startswith(table + ".")):
                at = end
            elif at is not None:
                break
        at = len(self.lines) if at is None else at
        while at > 0 and not self.lines[at - 1].strip():  # before the blank lines that end it
            at -= 1
        self._ensure_newline(at)
        after = ["\n"] if at < len(self.lines) and self.lines[at].strip() else []  # a blank line before what follows
        self.lines[at:at] = ["\n", *self._table_lines(f"{table}.{sub}", entry), *after]

    def append_table(self, table: str, entry: dict[str, Any], subtables: dict[str, dict[str, Any]]) -> str:
        """The text with ``[table]`` (and its ``[table.<sub>]`` tables) added at the end."""
        self._ensure_newline(len(self.lines))
        if any(line.strip() for line in self.lines):
            self.lines.append("\n")
        self.lines += self._table_lines(table, entry)
        for sub, values in subtables.items():
            self.lines += ["\n", *self._table_lines(f"{table}.{sub}", values)]
        return self.text()

    def _table_lines(self, table: str, entry: dict[str, Any]) -> list[str]:
        return [f"[{toml_key(table)}]\n", *(f"{toml_key(k)} = {toml_value(v)}\n" for k, v in entry.items())]

    def _ensure_newline(self, at: int) -> None:
        """The line before ``at`` ends with a newline, so a line inserted at ``at`` starts its own."""
        if at > 0 and not self.lines[at - 1].endswith("\n"):
            self.lines[at - 1] += "\n"
