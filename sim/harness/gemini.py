"""The Gemini wire (Gemini CLI): ``/v1beta/models/MODEL:streamGenerateContent?alt=sse``
answered as ``data:`` lines of candidates with ``text`` or ``functionCall`` parts. Our MCP
tools are ``mcp_room_<tool>``; the shell is ``run_shell_command``.

Side requests: ``:generateContent`` (the routing classifier, the next-speaker and loop checks
ask for JSON: the answer is one object holding each key they read), ``:countTokens``, and any
request without tools.
"""

from __future__ import annotations

import json
from typing import Any

from .script import Call, Native, Say, ScriptError, Shell, ToolResult

# Every JSON answer a Gemini CLI side request reads: the router's choice, the next speaker.
SIDE_JSON = {"reasoning": "scripted model", "model_choice": "pro", "next_speaker": "user"}


def matches(path: str) -> bool:
    return path.startswith("/v1beta/models/") or path.startswith("/v1/models/")


def side(path: str, body: dict[str, Any]) -> bool:
    return ":streamGenerateContent" not in path or not body.get("tools")


def side_answer(path: str, body: dict[str, Any]) -> tuple[str, bytes]:
    if ":countTokens" in path:
        return "application/json", json.dumps({"totalTokens": max(1, len(json.dumps(body)) // 4)}).encode()
    chunk = _chunk([{"text": json.dumps(SIDE_JSON)}])
    if ":streamGenerateContent" in path:
        return "text/event-stream", f"data: {json.dumps(chunk)}\n\n".encode()
    return "application/json", json.dumps(chunk).encode()


def offered(body: dict[str, Any]) -> set[str]:
    return {f.get("name", "") for tool in body.get("tools") or [] for f in tool.get("functionDeclarations") or []}


def _chunk(parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2}}


def answer(reply: Say | list[Call], body: dict[str, Any]) -> tuple[str, bytes]:
    if isinstance(reply, Say):
        parts: list[dict[str, Any]] = [{"text": reply.text}]
    else:
        names = offered(body)
        parts = []
        for call in reply:
            if isinstance(call, Native):
                name, args = call.name, call.args
            elif isinstance(call, Shell):
                name, args = "run_shell_command", {"command": call.command}
            else:
                name, args = f"mcp_room_{call.tool}", call.args
            if name not in names:
                raise ScriptError(f"unknown tool {name}: the harness offers {sorted(names)}")
            parts.append({"functionCall": {"name": name, "args": args}})
    return "text/event-stream", f"data: {json.dumps(_chunk(parts))}\n\n".encode()


def _bare(name: str) -> str:
    return "shell" if name == "run_shell_command" else name.removeprefix("mcp_room_")


def _response_text(response: Any) -> str:
    if isinstance(response, dict):
        for key in ("output", "error", "content"):
            if isinstance(response.get(key), str):
                return response[key]
    return json.dumps(response)


def text(body: dict[str, Any]) -> str:
    parts = [p.get("text", "") for p in (body.get("systemInstruction") or {}).get("parts") or []]
    for content in body.get("contents") or []:
        if content.get("role") == "model":
            continue
        for part in content.get("parts") or []:
            if "text" in part:
                parts.append(part["text"])
            elif "functionResponse" in part:
                parts.append(_response_text(part["functionResponse"].get("response")))
    return "\n".join(parts)


def tool_results(body: dict[str, Any]) -> list[ToolResult]:
    contents = body.get("contents") or []
    last = max((i for i, c in enumerate(contents) if c.get("role") == "model"), default=-1)
    return [ToolResult(_bare(part["functionResponse"].get("name", "")), part["functionResponse"].get("id", ""),
                       _response_text(part["functionResponse"].get("response")))
            for content in contents[last + 1:] for part in content.get("parts") or [] if "functionResponse" in part]
