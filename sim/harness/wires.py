"""The three wires behind one interface, told apart by the request's path."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import anthropic, gemini, responses
from .script import Call, Say, ToolResult, Wire


@dataclass(frozen=True)
class WireFormat:
    name: Wire
    matches: Callable[[str], bool]
    side: Callable[[str, dict[str, Any]], bool]  # a side request: answered without the script
    side_answer: Callable[[str, dict[str, Any]], tuple[str, bytes]]
    answer: Callable[[Say | list[Call], dict[str, Any]], tuple[str, bytes]]  # (media type, body)
    text: Callable[[dict[str, Any]], str]
    tool_results: Callable[[dict[str, Any]], list[ToolResult]]


WIRES = [WireFormat(name, m.matches, m.side, m.side_answer, m.answer, m.text, m.tool_results)
         for name, m in (("anthropic", anthropic), ("responses", responses), ("gemini", gemini))]


def of(path: str) -> WireFormat | None:
    return next((w for w in WIRES if w.matches(path)), None)
