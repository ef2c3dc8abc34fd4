"""The scripted model over real HTTP (httpx against its uvicorn server on 127.0.0.1), one case
per wire: a main request takes the script's next reply in that wire's shape, a side request is
answered without it, and a script that ran out or names a tool the harness did not offer ends
the turn with a text naming the error (recorded) instead of hanging. ``wait_for`` fails naming
the agent and what it waited for. The real CLIs on it: tests/test_turn_each_cli.py."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx2 as httpx
import pytest

from sim.harness.model import ModelWaitError, ScriptedModel
from sim.harness.script import Say, Shell, ToolCall

ANTHROPIC_TOOLS = [{"name": "mcp__room__room_join", "input_schema": {}}, {"name": "Bash", "input_schema": {}}]
RESPONSES_TOOLS = [{"type": "function", "name": "exec_command"},
                   {"type": "namespace", "name": "mcp__room", "tools": [{"name": "room_join"}]}]
GEMINI_TOOLS = [{"functionDeclarations": [{"name": "mcp_room_room_join"}, {"name": "run_shell_command"}]}]


@pytest.fixture
def model():
    with ScriptedModel() as served:
        yield served


def events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[len("data: "):]) for line in text.splitlines() if line.startswith("data: ")]


def test_anthropic_wire_plays_the_script_and_answers_side_requests_apart(model: ScriptedModel) -> None:
    agent = model.agent("claude", [[ToolCall("room_join", {"label": "a"}), Shell("git status")], Say("done")])
    body = {"model": "claude-sonnet-4-5", "stream": True, "tools": ANTHROPIC_TOOLS, "system": "be brief",
            "messages": [{"role": "user", "content": "join"}]}
    with httpx.Client(base_url=agent.url) as http:
        assert http.head("").status_code == 200  # Claude Code's reachability check
        counted = http.post("/v1/messages/count_tokens", json=body).json()
        assert counted["input_tokens"] > 0
        title = http.post("/v1/messages", json={"model": "claude-haiku-4-5", "messages": body["messages"]}).json()
        assert title["content"] == [{"type": "text", "text": "ok"}]  # a title request: no tools, not streamed
        streamed = events(http.post("/v1/messages?beta=true", json=body).text)
        starts = [e["content_block"] for e in streamed if e["type"] == "content_block_start"]
        assert [(b["type"], b["name"]) for b in starts] == [("tool_use", "mcp__room__room_join"), ("tool_use", "Bash")]
        deltas = [json.loads(e["delta"]["partial_json"]) for e in streamed if e["type"] == "content_block_delta"]
        assert deltas == [{"label": "a"}, {"command": "git status"}]
        assert streamed[-2]["delta"]["stop_reason"] == "tool_use" and streamed[-1]["type"] == "message_stop"
        # the harness's next request brings the results back
        ids = [b["id"] for b in starts]
        body["messages"] += [{"role": "assistant", "content": [{"type": "tool_use", "id": ids[0], "name": starts[0]["name"],
                                                                "input": {}}]},
                             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": ids[0],
                                                           "content": [{"type": "text", "text": '{"session_id": "s1"}'}]},
                                                          {"type": "text", "text": "Stop hook feedback: 1 unread"}]}]
        ended = events(http.post("/v1/messages", json=body).text)
        assert ended[-2]["delta"]["stop_reason"] == "end_turn"
    assert len(agent.side_requests) == 2 and len(agent.requests) == 2 and agent.errors == []
    [result] = agent.requests[1].tool_results()
    assert (result.name, result.data()) == ("room_join", {"session_id": "s1"})
    assert "Stop hook feedback: 1 unread" in agent.requests[1].text() and "be brief" in agent.requests[1].text()


def test_responses_wire_names_the_namespace_and_ends_every_stream_completed(model: ScriptedModel) -> None:
    agent = model.agent("codex", [[ToolCall("room_join", {}), Shell("git commit -m x")]])
    body = {"model": "gpt-5-codex", "stream": True, "tools": RESPONSES_TOOLS,
            "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "join"}]}]}
    with httpx.Client(base_url=agent.url) as http:
        streamed = events(http.post("/v1/responses", json=body).text)
        calls = [e["item"] for e in streamed if e["type"] == "response.output_item.done"]
        assert [(c.get("namespace"), c["name"]) for c in calls] == [("mcp__room", "room_join"), (None, "exec_command")]
        assert json.loads(calls[1]["arguments"]) == {"cmd": "git commit -m x"}
        assert streamed[-1]["type"] == "response.completed"
        # the script has run out: the turn ends with the error as text, and it is recorded
        body["input"] += [{**calls[0]}, {"type": "function_call_output", "call_id": calls[0]["call_id"],
                                         "output": 'Output:\n{"session_id": "s2"}'}]
        ended = events(http.post("/v1/responses", json=body).text)
    [message] = [e["item"] for e in ended if e["type"] == "response.output_item.done"]
    assert "the script ran out after 1 replies" in message["content"][0]["text"]
    assert ended[-1]["type"] == "response.completed"
    assert len(agent.errors) == 1 and "ran out" in agent.errors[0]
    assert agent.requests[1].result_of("room_join").data() == {"session_id": "s2"}


def test_gemini_wire_refuses_a_tool_the_harness_does_not_offer_and_answers_the_classifier(model: ScriptedModel) -> None:
    agent = model.agent("gemini", [[ToolCall("room_bogus", {})]])
    body = {"contents": [{"role": "user", "parts": [{"text": "join"}]}], "tools": GEMINI_TOOLS}
    with httpx.Client(base_url=agent.url) as http:
        routed = http.post("/v1beta/models/gemini-2.5-flash-lite:generateContent", json={"contents": []}).json()
        choice = json.loads(routed["candidates"][0]["content"]["parts"][0]["text"])
        assert choice["model_choice"] == "pro"
        streamed = events(http.post("/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", json=body).text)
    [part] = streamed[0]["candidates"][0]["content"]["parts"]
    assert "unknown tool mcp_room_room_bogus" in part["text"] and streamed[0]["candidates"][0]["finishReason"] == "STOP"
    assert "mcp_room_room_join" in agent.errors[0] and len(agent.side_requests) == 1


def test_a_policy_may_hold_its_reply_while_the_server_answers_others(model: ScriptedModel) -> None:
    looked = threading.Event()

    def hold(request: Any) -> Say:
        assert looked.wait(30), "the test never looked"
        return Say("released")

    held = model.agent("held", hold)
    other = model.agent("other", [Say("free")])
    body = {"contents": [{"role": "user", "parts": [{"text": "x"}]}], "tools": GEMINI_TOOLS}
    answers: list[str] = []
    path = "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
    caller = threading.Thread(target=lambda: answers.append(httpx.post(held.url + path, json=body, timeout=30).text))
    caller.start()
    try:
        held.wait_for(lambda r: True, what="the held request", timeout=30)
        # the held reply blocks a worker thread, not the server
        assert "free" in httpx.post(other.url + path, json=body, timeout=30).text
        assert answers == []
    finally:
        looked.set()
        caller.join(30)
    assert "released" in answers[0]


def test_wait_for_names_the_agent_and_what_it_waited_for(model: ScriptedModel) -> None:
    agent = model.agent("idle-agent", [Say("x")])
    started = time.monotonic()
    with pytest.raises(ModelWaitError, match=r"idle-agent: waited for the join's result: nothing matched within 0.5 s"):
        agent.wait_for(lambda r: r.tool_results(), what="the join's result", timeout=0.5)
    assert time.monotonic() - started < 5
    with pytest.raises(ModelWaitError, match=r"idle-agent: waited for anything: codex exited with 1"):
        agent.wait_for(lambda r: True, what="anything", timeout=30, stop=lambda: "codex exited with 1")
    with pytest.raises(ValueError, match="already on this model"):
        model.agent("idle-agent", [])
    with pytest.raises(TypeError, match="script must be a list of replies or a callable policy"):
        model.agent("third", "join")  # type: ignore[arg-type]


def test_a_reply_the_wire_cannot_express_is_an_error_not_a_hang(model: ScriptedModel) -> None:
    agent = model.agent("bad", [["room_join"], [ToolCall("room_join", "not a dict")]])  # type: ignore[list-item]
    body = {"model": "m", "stream": True, "tools": ANTHROPIC_TOOLS, "messages": [{"role": "user", "content": "x"}]}
    with httpx.Client(base_url=agent.url) as http:
        first = events(http.post("/v1/messages", json=body).text)
        second = events(http.post("/v1/messages", json=body).text)
    texts = [e["delta"]["text"] for e in first + second if e["type"] == "content_block_delta"]
    assert "must be ToolCall, Shell or Native" in texts[0] and "args must be a dict" in texts[1]
    assert len(agent.errors) == 2
    assert httpx.post(f"http://127.0.0.1:{model.port}/v1/messages", json=body).status_code == 404
    assert model.unhandled == ["POST /v1/messages"]


def test_a_harness_still_connecting_its_servers_is_asked_to_wait_and_then_gets_the_same_reply(
        model: ScriptedModel) -> None:
    agent = model.agent("early", [[ToolCall("room_join", {})], Say("done")])
    connecting = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "x"}],
                  "tools": [{"name": "Bash"}, {"name": "WaitForMcpServers"}]}
    connected = {**connecting, "tools": ANTHROPIC_TOOLS}
    with httpx.Client(base_url=agent.url) as http:
        waits = [events(http.post("/v1/messages", json=connecting).text) for _ in range(2)]
        joined = events(http.post("/v1/messages", json=connected).text)
        done = events(http.post("/v1/messages", json=connected).text)
    for wait in waits:
        [call] = [e["content_block"] for e in wait if e["type"] == "content_block_start"]
        assert call["name"] == "WaitForMcpServers"
    assert [e["content_block"]["name"] for e in joined if e["type"] == "content_block_start"] == ["mcp__room__room_join"]
    assert done[-2]["delta"]["stop_reason"] == "end_turn" and agent.errors == []
    # servers that never connect: after the allowed waits the tool is unknown, the turn ends
    stuck = model.agent("stuck", [[ToolCall("room_join", {})]])
    with httpx.Client(base_url=stuck.url) as http:
        for _ in range(12):
            last = events(http.post("/v1/messages", json=connecting).text)
    assert "still not offered after 10 waits" in stuck.errors[0]
    assert last[-2]["delta"]["stop_reason"] == "end_turn"
