"""The Anthropic Messages wire (Claude Code): ``POST /v1/messages`` answered as server-sent
events (message_start, content_block_start/delta/stop, message_delta, message_stop), and
``/v1/messages/count_tokens``. Our MCP tools are ``mcp__room__<tool>``; the shell is ``Bash``.

A main request offers tools; one that offers none, or names the small model the launcher pins
(``SIDE_MODEL``), is a side request (title, summary) and gets a short text.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from .script import Call, Native, NotYet, Say, ScriptError, Shell, ToolResult

SIDE_MODEL = "claude-haiku-4-5"
_ids = itertools.count(1)


def matches(path: str) -> bool:
    return path.startswith("/v1/messages")


def side(path: str, body: dict[str, Any]) -> bool:
    return path.startswith("/v1/messages/count_tokens") or not body.get("tools") or body.get("model") == SIDE_MODEL


def side_answer(path: str, body: dict[str, Any]) -> tuple[str, bytes]:
    if path.startswith("/v1/messages/count_tokens"):
        return "application/json", json.dumps({"input_tokens": max(1, len(json.dumps(body)) // 4)}).encode()
    return answer(Say("ok"), body)


def tool_name(call: Call) -> str:
    if isinstance(call, Native):
        return call.name
    return "Bash" if isinstance(call, Shell) else f"mcp__room__{call.tool}"


def bare(name: str) -> str:
    return name.removeprefix("mcp__room__") if name.startswith("mcp__room__") else ("shell" if name == "Bash" else name)


def offered(body: dict[str, Any]) -> set[str]:
    return {t.get("name", "") for t in body.get("tools") or []}


def answer(reply: Say | list[Call], body: dict[str, Any],
           raw: tuple[tuple[str, dict[str, Any]], ...] = ()) -> tuple[str, bytes]:
    """The reply as the Messages API streams it (or as one JSON message when not streamed);
    ``raw``: calls of the harness's own tools by name, as they are. NotYet when the reply's
    room tools are not offered yet and the harness can be asked to wait for them."""
    n = next(_ids)
    blocks: list[dict[str, Any]] = []
    if isinstance(reply, Say):
        blocks.append({"type": "text", "text": reply.text})
        stop = "end_turn"
    else:
        names = offered(body)
        if "WaitForMcpServers" in names and any(tool_name(c) not in names for c in reply):
            # an interactive Claude Code session connects its servers beside its first turn
            raise NotYet(*answer([], body, raw=(("WaitForMcpServers", {"servers": ["room"]}),)))
        for i, call in enumerate(reply):
            name = tool_name(call)
            if name not in names:
                raise ScriptError(f"unknown tool {name}: the harness offers {sorted(names)}")
            args = {"command": call.command} if isinstance(call, Shell) else call.args
            if not isinstance(args, dict):
                raise ScriptError(f"{name}: Claude Code's tools take an object of arguments, got {args!r}")
            blocks.append({"type": "tool_use", "id": f"toolu_{n:04d}_{i}", "name": name, "input": args})
        blocks += [{"type": "tool_use", "id": f"toolu_{n:04d}_w{i}", "name": name, "input": args}
                   for i, (name, args) in enumerate(raw)]
        stop = "tool_use"
    usage = {"input_tokens": 1, "output_tokens": 1}
    message = {"id": f"msg_{n:04d}", "type": "message", "role": "assistant", "model": body.get("model", ""),
               "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}
    if not body.get("stream"):
        return "application/json", json.dumps({**message, "content": blocks, "stop_reason": stop}).encode()
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": message})]
    for i, block in enumerate(blocks):
        if block["type"] == "text":
            start, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
        else:
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events += [("content_block_start", {"type": "content_block_start", "index": i, "content_block": start}),
                   ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}),
                   ("content_block_stop", {"type": "content_block_stop", "index": i})]
    events += [("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                  "usage": {"output_tokens": 1}}),
               ("message_stop", {"type": "message_stop"})]
    return "text/event-stream", "".join(f"event: {e}\ndata: {json.dumps(d)}\n\n" for e, d in events).encode()


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    out = []
    for block in content or []:
        if block.get("type") == "text":
            out.append(block.get("text", ""))
        elif block.get("type") == "tool_result":
            out += _texts(block.get("content"))
    return out


def text(body: dict[str, Any]) -> str:
    parts = _texts(body.get("system"))
    for message in body.get("messages") or []:
        if message.get("role") != "assistant":
            parts += _texts(message.get("content"))
    return "\n".join(parts)


def tool_results(body: dict[str, Any]) -> list[ToolResult]:
    messages = body.get("messages") or []
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    names = {b.get("id"): b.get("name", "") for m in messages if m.get("role") == "assistant"
             for b in (m.get("content") if isinstance(m.get("content"), list) else [])}
    out = []
    for message in messages[last + 1:]:
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_result":
                call_id = block.get("tool_use_id", "")
                out.append(ToolResult(bare(names.get(call_id, "")), call_id, "\n".join(_texts(block.get("content")))))
    return out
