"""Agent-written text as a person's terminal shows it: labels, subjects, bodies, paths, host
names, rooms. A terminal executes control characters: an escape sequence in a subject could
set the window title, erase a line and print a fake "CI passed", or write the clipboard
(OSC 52). So every control character of such text is shown as its escape (``\\x1b``,
``\\x07``, ``\\u202e``), the way Python's ``repr`` writes it, and nothing of it reaches the
terminal raw: C0 controls (a tab kept where the caller allows it, a newline where the caller
splits lines itself), DEL, C1 controls (``\\x9b`` is a CSI on many terminals) and the
bidirectional overrides and isolates (text that reads one way and is another).

JSON output needs none of this: ``json.dumps`` escapes every control character. Cheap to
import (the commit guard prints through it): a translate table, nothing else."""

from __future__ import annotations

_CONTROLS = [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), 0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F),
             *range(0x2066, 0x206A)]


def _escape(code: int) -> str:
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_LINE = {code: _escape(code) for code in _CONTROLS if code != 0x09}
_TEXT = {code: e for code, e in _LINE.items() if code != 0x0A}


def visible(text: object, *, newlines: bool = False) -> str:
    """``text`` with each control character written as its escape; a tab stays, and with
    ``newlines`` a newline stays (a body printed as its lines)."""
    return str(text).translate(_TEXT if newlines else _LINE)
