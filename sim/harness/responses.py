"""The OpenAI Responses wire (Codex): ``POST /v1/responses`` answered as server-sent events
dispatched on their ``type`` (response.created, response.output_item.done, response.completed,
which must end every stream). Codex offers an MCP server's tools as one ``namespace`` tool,
``mcp__room``: a call names the namespace and the bare tool. Its shell is whichever of its
shell tools the request offers (``shell_command``, ``exec_command``, ``shell``).

Codex's main requests always offer tools; one without any is a side request (a summary).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from .script import Call, Native, Say, ScriptError, Shell, ToolResult

NAMESPACE = "mcp__room"
_ids = itertools.count(1)


def matches(path: str) -> bool:
    return path.startswith("/v1/responses")


def side(path: str, body: dict[str, Any]) -> bool:
    return not body.get("tools")


def side_answer(path: str, body: dict[str, Any]) -> tuple[str, bytes]:
    return answer(Say("ok"), body)


def offered(body: dict[str, Any]) -> set[str]:
    """The tools as ``name`` or ``namespace/name``."""
    out = set()
    for tool in body.get("tools") or []:
        if tool.get("type") == "namespace":
            out |= {f"{tool.get('name')}/{t.get('name')}" for t in tool.get("tools") or []}
        else:
            out.add(tool.get("name") or tool.get("type", ""))
    return out


def _shell_item(command: str, names: set[str]) -> dict[str, Any]:
    if "shell_command" in names:
        return {"name": "shell_command", "arguments": {"command": command}}
    if "exec_command" in names:
        return {"name": "exec_command", "arguments": {"cmd": command}}
    if "shell" in names:
        return {"name": "shell", "arguments": {"command": ["bash", "-lc", command]}}
    raise ScriptError(f"no shell tool offered: the harness offers {sorted(names)}")


def answer(reply: Say | list[Call], body: dict[str, Any]) -> tuple[str, bytes]:
    n = next(_ids)
    items: list[dict[str, Any]] = []
    if isinstance(reply, Say):
        items.append({"type": "message", "role": "assistant", "id": f"msg_{n:04d}",
                      "content": [{"type": "output_text", "text": reply.text}]})
    else:
        names = offered(body)
        for i, call in enumerate(reply):
            if isinstance(call, Native) and isinstance(call.args, str):  # a freeform (custom) tool
                if call.name not in names:
                    raise ScriptError(f"unknown tool {call.name}: the harness offers {sorted(names)}")
                items.append({"type": "custom_tool_call", "id": f"ctc_{n:04d}_{i}", "call_id": f"call_{n:04d}_{i}",
                              "name": call.name, "input": call.args})
                continue
            if isinstance(call, Native):
                if call.name not in names:
                    raise ScriptError(f"unknown tool {call.name}: the harness offers {sorted(names)}")
                made = {"name": call.name, "arguments": call.args}
            elif isinstance(call, Shell):
                made = _shell_item(call.command, names)
            else:
                if f"{NAMESPACE}/{call.tool}" not in names:
                    raise ScriptError(f"unknown tool {NAMESPACE}/{call.tool}: the harness offers {sorted(names)}")
                made = {"namespace": NAMESPACE, "name": call.tool, "arguments": call.args}
            items.append({"type": "function_call", "id": f"fc_{n:04d}_{i}", "call_id": f"call_{n:04d}_{i}",
                          **made, "arguments": json.dumps(made["arguments"])})
    response = {"id": f"resp_{n:04d}", "object": "response", "status": "completed", "output": items,
                "usage": {"input_tokens": 1, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 1,
                          "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 2}}
    events = [{"type": "response.created", "response": {"id": response["id"]}}]
    for i, item in enumerate(items):
        events.append({"type": "response.output_item.added", "output_index": i, "item": item})
        if item["type"] == "message":
            events.append({"type": "response.output_text.delta", "output_index": i, "item_id": item["id"],
                           "content_index": 0, "delta": item["content"][0]["text"]})
        events.append({"type": "response.output_item.done", "output_index": i, "item": item})
    events.append({"type": "response.completed", "response": response})
    return "text/event-stream", "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [c.get("text", "") for c in content or [] if isinstance(c, dict) and "text" in c]


def _from_model(item: dict[str, Any]) -> bool:
    return item.get("type") in ("function_call", "custom_tool_call", "reasoning") or item.get("role") == "assistant"


def text(body: dict[str, Any]) -> str:
    parts = _texts(body.get("instructions"))
    for item in body.get("input") or []:
        if item.get("type") in ("function_call_output", "custom_tool_call_output"):
            parts += _texts(item.get("output"))
        elif not _from_model(item):
            parts += _texts(item.get("content"))
    return "\n".join(parts)


def tool_results(body: dict[str, Any]) -> list[ToolResult]:
    items = body.get("input") or []
    last = max((i for i, item in enumerate(items) if _from_model(item)), default=-1)
    names = {item.get("call_id"): item.get("name", "") for item in items
             if item.get("type") in ("function_call", "custom_tool_call")}
    return [ToolResult(_bare(names.get(item.get("call_id"), "")), item.get("call_id", ""),
                       "\n".join(_texts(item.get("output"))))
            for item in items[last + 1:] if item.get("type") in ("function_call_output", "custom_tool_call_output")]


def _bare(name: str) -> str:
    return "shell" if name in ("shell_command", "exec_command", "shell") else name
