"""What a scripted model answers, and what it was asked.

A reply answers one main-model request: a list of :class:`ToolCall` / :class:`Shell` (the
model calls them, the harness runs them and asks again with their results), or a
:class:`Say` (text that ends the turn). A script is a list of replies, played in order, or a
policy: a callable ``policy(request) -> reply`` that decides from what the harness just showed
(it runs on a worker thread, so it may block, for example until a test has looked at the store).

Every request is kept as a :class:`Request`: the wire, the path, the parsed JSON body, when it
arrived; ``text()`` flattens what the harness showed the model, ``tool_results()`` decodes the
tool outputs this request carries (those after the model's last turn).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Wire = Literal["anthropic", "responses", "gemini"]


@dataclass(frozen=True)
class ToolCall:
    """One of agents-room's MCP tools by its bare name (``room_join``); each wire names it as
    its harness does (``mcp__room__room_join``, namespace ``mcp__room``, ``mcp_room_room_join``)."""

    tool: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Shell:
    """A command line through the harness's own shell tool (Claude Code ``Bash``, Codex's
    shell/exec tool, Gemini CLI ``run_shell_command``)."""

    command: str


@dataclass(frozen=True)
class Native:
    """A call of one of the harness's own tools by its own name, with its own arguments
    (Claude Code ``Edit``, ``Write``, ``Read``; Gemini CLI ``write_file``, ``replace``,
    ``read_file``; Codex ``apply_patch``, whose ``args`` is the patch text when the harness
    offers it as a freeform tool)."""

    name: str
    args: dict[str, Any] | str = field(default_factory=dict)


@dataclass(frozen=True)
class Say:
    """Text that ends the turn (end_turn / response.completed / STOP)."""

    text: str


Call = ToolCall | Shell | Native
Reply = Say | Sequence[Call]
Policy = Callable[["Request"], Reply]
Script = Sequence[Reply] | Policy


@dataclass(frozen=True)
class ToolResult:
    """One tool output the harness sent back: the bare tool name where the wire says it
    (``room_join``, ``shell``), the call id, and the output as text."""

    name: str
    call_id: str
    text: str

    def data(self) -> Any:
        """The output's first JSON object or array, decoded (our tools answer JSON); None if
        there is none."""
        decoder = json.JSONDecoder()
        for match in re.finditer(r"[{\[]", self.text):
            try:
                return decoder.raw_decode(self.text, match.start())[0]
            except ValueError:
                continue
        return None


@dataclass
class Request:
    """One request a harness made to the model."""

    agent: str
    wire: Wire
    path: str
    body: dict[str, Any]
    at: float  # time.time() on arrival
    side: bool = False  # a side request (title, small model, classifier, token count): no script turn
    reply: Any = None  # what the model answered (a Reply, or the side answer's text)
    _text: Callable[[dict[str, Any]], str] | None = field(default=None, repr=False)
    _results: Callable[[dict[str, Any]], list[ToolResult]] | None = field(default=None, repr=False)

    def text(self) -> str:
        """Everything the harness showed the model in this request, flattened: system text,
        user texts, tool results, hook feedback (the model's own turns left out)."""
        return self._text(self.body) if self._text else json.dumps(self.body)

    def tool_results(self) -> list[ToolResult]:
        """The tool outputs this request brings back (those after the model's last turn)."""
        return self._results(self.body) if self._results else []

    def result_of(self, name: str) -> ToolResult:
        """The output of the bare tool ``name`` in this request; AssertionError if absent."""
        found = [r for r in self.tool_results() if r.name == name]
        if not found:
            raise AssertionError(f"{self.agent}: no result of {name} in this request; it holds "
                                 f"{[r.name for r in self.tool_results()]}")
        return found[-1]


class ScriptError(Exception):
    """A script the model could not play: it ran out, names a tool the harness does not offer,
    or holds a reply the wire cannot express. The model records it and ends the turn with it."""


class NotYet(Exception):
    """The reply names tools the harness has not offered yet (its MCP servers still connecting)
    and the harness offers a way to wait for them: send ``answer`` (that wait) now and the
    same reply to the next request."""

    def __init__(self, kind: str, content: bytes) -> None:
        super().__init__("the harness's MCP servers are still connecting")
        self.kind, self.content = kind, content


def check_reply(reply: Any) -> Reply:
    """The reply as the wires take it, or ScriptError saying what is wrong with it."""
    if isinstance(reply, Say):
        if not isinstance(reply.text, str):
            raise ScriptError(f"Say.text must be a string, got {type(reply.text).__name__}")
        return reply
    if isinstance(reply, ToolCall | Shell | Native):
        return [reply]
    if isinstance(reply, list | tuple) and reply:
        for call in reply:
            if isinstance(call, ToolCall):
                if not isinstance(call.args, dict):
                    raise ScriptError(f"ToolCall({call.tool!r}).args must be a dict, got {type(call.args).__name__}")
            elif not isinstance(call, Shell | Native):
                raise ScriptError(f"a reply's calls must be ToolCall, Shell or Native, got {call!r}")
        return list(reply)
    raise ScriptError(f"a reply must be Say(...) or a non-empty list of ToolCall/Shell, got {reply!r}")
