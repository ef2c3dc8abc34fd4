"""The harnesses: what ``agents-room install`` writes for each, and what runs inside them.

One module per harness, what its install writes and how its agent is woken:
``claude_code``, ``codex``, ``gemini``, ``cursor``; ``registry`` lists them for install
(adding a harness is one module there). What they share:

- ``install``: the ``agents-room install`` command; ``config_change`` (a change to one file,
  how our entries are known), ``json_files`` and ``toml_lines`` (editing the files in place);
- ``hook``: ``agents-room hook``, the command every harness runs on its events (started by
  ``agents_room/hook_entry.py``), with ``hook_news`` (its answer when there is news),
  ``hook_store`` (the store's modules it loads alone) and ``hook_wait`` (``--wait``, the
  Stop-hook wake lever);
- ``wake``: the wake levers and the watcher that pulls them; ``channel``: Claude Code's
  channel, a lever the MCP server speaks;
- ``identity``: which harness and which agent a server process serves.

Nothing is imported here: the hook imports ``agents_room.harnesses.hook`` on every harness
event, and this package's import is part of its start.
"""
