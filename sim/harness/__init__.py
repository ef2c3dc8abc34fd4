"""Real harness agents: Claude Code, Codex and Gemini CLI running turns against a scripted
model on loopback, for the end-to-end tests and for ``sim run``'s harness driver.

- ``script``: what the model answers (``ToolCall``, ``Shell``, ``Say``; a list of replies or a
  policy) and what it was asked (``Request``: ``text()``, ``tool_results()``);
- ``model``: ``ScriptedModel``, the server (starlette on uvicorn, its own thread) hosting one
  ``ScriptedAgent`` per agent (its script, its requests, ``wait_for``);
- ``wires``: the three wires behind one interface: ``anthropic`` (Messages), ``responses``
  (OpenAI Responses), ``gemini`` (streamGenerateContent);
- ``clis``: the CLIs found in ``$AGENTS_ROOM_NPM_CACHE``, installed and pointed at the model
  (``prepare``), their command lines; ``process``: a CLI's run (``Turn``), ended whole.

Imports from sim: nothing.
"""
