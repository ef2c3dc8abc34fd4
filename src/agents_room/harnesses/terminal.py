"""The terminal wake lever: an idle agent in a tmux pane is woken by typing into that pane.

A harness with no wake lever of its own (Codex, Gemini CLI) still reads its person's
keyboard, and a person who runs several agents at once mostly runs them in tmux, whose panes
carry ``TMUX`` and ``TMUX_PANE`` into the harness's environment. The stdio server finds them
in its harness's environment (:func:`find_pane`), records the lever ``terminal`` at
``room_join``, and its watcher (agents_room/harnesses/wake.py) signals through
:class:`TerminalLever`: ``tmux send-keys -l`` with a short prompt, then ``Enter`` once the pane
shows it (a TUI that gets the Enter in the same burst takes it for part of a paste).

It types only into a pane that waits for its person, never over one:

- the harness ended its turn and started none since: its hooks mark the pane
  (agents_room/harnesses/turns.py), and the lever marks it ``turn`` once it typed;
- the input line holds nothing the person typed: the pane's cursor row shows nothing left of
  the cursor after the prompt glyph, and right of it nothing but the harness's placeholder
  (faint text, or a placeholder it is known to show);
- the pane is not in a mode (copy mode, a chooser) and its process is running, and the
  harness process is still the one that started (after its person quit, the pane is their
  shell: Codex's server outlives its TUI in the app-server daemon).

When it is not, no signal is emitted: the delivery stays ``stored`` and unannounced, so the
harness's own hooks tell it in the turn that is running (or in the person's next one), and
the watcher looks again every half second while that mail waits (two short tmux commands a
look, only while the pane is idle with a line typed). A line it saw typed and then empty was
most likely submitted, the harness's start-of-turn hook about to mark the pane: it waits
``SUBMIT_GRACE_S`` after it last saw the line typed before it takes it for one the person
cleared. A prompt that went in is ``accepted``
(the harness's start-of-turn hook marked the pane: it took it); one that did not show or did
not go stays ``offered``.

Off per session: ``AGENTS_ROOM_TERMINAL_WAKE=off`` in the harness's environment. The prompt:
``AGENTS_ROOM_TERMINAL_PROMPT`` (``{session_id}`` in it becomes the session's id). GNU screen
and zellij are not supported: neither gives a way to read the cursor row of the pane a program
runs in before typing into it (screen's ``STY``/``WINDOW`` name a window, not its screen), and
that look is what keeps a person's half-typed line safe.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..store import Pending, Session
from . import turns
from .identity import is_codex_daemon

TERMINAL = "terminal"
OFF_ENV = "AGENTS_ROOM_TERMINAL_WAKE"
PROMPT_ENV = "AGENTS_ROOM_TERMINAL_PROMPT"
# ``{session_id}`` is the woken session's id (msg_recv asks for it).
DEFAULT_PROMPT = "You have new mail in agents-room: read it with msg_recv (session_id {session_id}), then carry on."
PROMPT_HEAD = "You have new mail in agents-room"
# Prompt glyphs harnesses draw at the start of their input line (Codex ›, Gemini CLI > and *).
PROMPT_GLYPHS = frozenset("›>❯*│┃|")
# Placeholders a harness shows in an empty input line without fading them (Gemini CLI's, under
# NO_COLOR); a faint one (Codex's rotating suggestions) is known by its style.
PLACEHOLDERS = ("Type your message or @path/to/file",)
# How long the lever waits for its typed text to show, and for the Enter to take it: generous,
# a loaded machine may take seconds to redraw a TUI (the watcher's thread is all that waits).
SHOW_S = 10.0
TAKE_S = 5.0
# A line the lever saw typed and then empty was most likely submitted: the harness's
# start-of-turn hook is about to mark the pane. The lever waits this long after it last saw
# the line typed before it takes the empty line for one the person cleared.
SUBMIT_GRACE_S = 5.0
# Right after the end of a turn a TUI is still redrawing (Gemini CLI's input row shows other
# text for a moment): a line seen typed this soon after the idle mark is not taken for the
# person's (it still stops the lever, but starts no grace).
REDRAW_S = 1.0


@dataclass(frozen=True)
class Pane:
    """A tmux pane: the server's socket and the pane's id (``%N``)."""

    socket: str
    pane: str
    key: str  # agents_room/harnesses/turns.py's name for it

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Pane | None:
        key = turns.pane_key(env)
        if key is None:
            return None
        return cls(env["TMUX"].split(",")[0], env["TMUX_PANE"], key)


def process_env(pid: int, proc: str = "/proc") -> dict[str, str]:
    """A process's environment; empty when it is gone or not ours to read."""
    try:
        with open(f"{proc}/{pid}/environ", "rb") as f:
            data = f.read()
    except OSError:
        return {}
    out = {}
    for item in data.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep:
            out[name.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return out


def find_pane(env: Mapping[str, str], harness_pid: int | None) -> Pane | None:
    """The pane the harness runs in: from the harness process's environment (Codex passes its
    MCP servers none of it), else our own; None outside tmux, when tmux is not installed, when
    the person turned the lever off (``AGENTS_ROOM_TERMINAL_WAKE=off`` in either), or when the
    harness process is a Codex app-server daemon (identity.conversation_holder could not tell
    which of its TUIs the session is: typing into its starter's pane could wake another)."""
    if harness_pid and is_codex_daemon(harness_pid):
        return None  # a daemon serves any number of Codex TUIs: its TMUX_PANE is only its starter's
    theirs = process_env(harness_pid) if harness_pid else {}
    for source in (theirs, env):
        if source.get(OFF_ENV, "").strip().lower() in ("off", "0", "no", "false"):
            return None
    pane = Pane.from_env(theirs) or Pane.from_env(env)
    if pane is None or shutil.which("tmux") is None:
        return None
    return pane


def started_at(pid: int, proc: str = "/proc") -> str | None:
    """A process's start time (clock ticks since boot): a pid is reused, the pair is not. None
    when it is gone or a zombie."""
    try:
        with open(f"{proc}/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == "Z" else fields[19]


@dataclass(frozen=True)
class Cell:
    text: str
    faint: bool


def parse_row(row: str) -> list[Cell]:
    """One row of ``capture-pane -e``: its cells (a wide character and the column after it
    count as two cells) with whether each is drawn faint (SGR 2), the style harnesses draw
    placeholders in."""
    cells: list[Cell] = []
    faint = False
    i = 0
    while i < len(row):
        ch = row[i]
        if ch == "\x1b" and i + 1 < len(row) and row[i + 1] == "[":
            end = i + 2
            while end < len(row) and not ("@" <= row[end] <= "~"):
                end += 1
            if end < len(row) and row[end] == "m":
                for code in (row[i + 2:end] or "0").split(";"):
                    if code in ("", "0", "22"):
                        faint = False
                    elif code == "2":
                        faint = True
            i = end + 1
            continue
        if ch == "\x1b":  # another escape (a charset, a hyperlink): skip its introducer
            i += 2
            continue
        cells.append(Cell(ch, faint))
        if unicodedata.east_asian_width(ch) in ("W", "F"):
            cells.append(Cell("", faint))
        i += 1
    return cells


def line_is_empty(row: str, cursor_x: int) -> bool:
    """Does the input line at the cursor hold nothing the person typed? Left of the cursor:
    nothing but the harness's prompt glyph and blanks. Right of it: blank, faint, or a known
    placeholder (a person's words moved past with Home or the arrow keys are neither)."""
    cells = parse_row(row)
    left = "".join(c.text for c in cells[:cursor_x]).strip()
    if left.lstrip("".join(PROMPT_GLYPHS)).strip():
        return False
    right = cells[cursor_x:]
    plain = "".join(c.text if not c.faint else " " for c in right).strip()
    if not plain:
        return True
    return any(plain.startswith(p) for p in PLACEHOLDERS) and not _after_placeholder(plain)


def _after_placeholder(plain: str) -> bool:
    """Text beyond the placeholder on the row, other than a box's border."""
    for p in PLACEHOLDERS:
        if plain.startswith(p):
            return bool(plain[len(p):].strip(" │┃|"))
    return True


@dataclass
class TerminalLever:
    """Types ``prompt`` into ``pane`` (see the module's doc); ``folder`` holds the turn marks."""

    pane: Pane
    folder: str
    prompt: str = DEFAULT_PROMPT
    # The harness process and its start time: once it is gone the pane is its person's shell
    # again (Codex's server, a child of the app-server daemon, outlives its TUI), never typed into.
    harness: tuple[int, str] | None = None
    name: str = TERMINAL
    tmux: str = field(default_factory=lambda: shutil.which("tmux") or "tmux")
    # It declined due mail at its last look (the watcher then looks again soon: wake.BUSY_LOOK_S).
    waiting: bool = field(default=False, compare=False)
    # When it last saw the person's line typed (monotonic), since the pane was last marked idle.
    typed_seen: float | None = field(default=None, compare=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str], harness_pid: int | None) -> TerminalLever | None:
        pane = find_pane(env, harness_pid)
        where = turns.folder(env)
        if pane is None or where is None:
            return None
        theirs = process_env(harness_pid) if harness_pid else {}
        prompt = (env.get(PROMPT_ENV) or theirs.get(PROMPT_ENV) or DEFAULT_PROMPT).replace("\n", " ").strip()
        started = started_at(harness_pid) if harness_pid else None
        return cls(pane, where, prompt or DEFAULT_PROMPT, (harness_pid, started) if harness_pid and started else None)

    def _run(self, *args: str) -> str | None:
        try:
            done = subprocess.run([self.tmux, "-S", self.pane.socket, *args], capture_output=True, text=True,
                                  timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout if done.returncode == 0 else None

    def _cursor_row(self) -> tuple[str, int] | None:
        """(the cursor's row with its styles, the cursor's column), or None when the pane is
        gone, dead or in a mode (copy mode, a chooser)."""
        shown = self._run("display-message", "-p", "-t", self.pane.pane,
                          "#{pane_dead} #{pane_in_mode} #{cursor_x} #{cursor_y}")
        if shown is None:
            return None
        dead, mode, x, y = (shown.split() + ["", "", "", ""])[:4]
        if dead != "0" or mode != "0" or not x.isdigit() or not y.isdigit():
            return None
        row = self._run("capture-pane", "-p", "-e", "-t", self.pane.pane, "-S", y, "-E", y)
        return None if row is None else (row.rstrip("\n"), int(x))

    def ready(self) -> bool:
        """Is the pane waiting for its person, with nothing typed? (See the module's doc.) A
        no that may soon turn (a turn running, a line typed) sets ``waiting``; one that will
        not by itself (no mark, our own prompt unconfirmed, the harness gone) does not."""
        self.waiting = False
        mark = turns.state(self.folder, self.pane.key)
        if mark != turns.IDLE:
            self.typed_seen = None  # a turn started: what was typed went with it
            self.waiting = mark == turns.TURN
            return False
        if self.harness is not None and started_at(self.harness[0]) != self.harness[1]:
            return False  # the harness exited: its pane is someone's shell now
        found = self._cursor_row()
        if found is None:
            return False
        if not line_is_empty(*found):
            since_idle = turns.age(self.folder, self.pane.key)
            if since_idle is None or since_idle >= REDRAW_S:
                self.typed_seen = time.monotonic()
            self.waiting = True
            return False
        if self.typed_seen is not None and time.monotonic() - self.typed_seen < SUBMIT_GRACE_S:
            self.waiting = True  # just submitted, most likely: the harness's turn is starting
            return False
        self.typed_seen = None
        return True

    def signal(self, session: Session, deliveries: list[Pending]) -> bool | None:
        """Type the prompt and submit it. True once the harness's start-of-turn hook marked the
        pane (it took the prompt); None when it was typed but no turn was seen to start; False
        when it never showed."""
        turns.mark(self.folder, self.pane.key, turns.WOKEN)  # not idle: no second prompt on the next look
        text = self.prompt.replace("{session_id}", session.id)
        if self._run("send-keys", "-t", self.pane.pane, "-l", "--", text) is None:
            turns.mark(self.folder, self.pane.key, turns.IDLE)
            return False
        tail = text[-12:].strip()

        def shown() -> bool:
            found = self._cursor_row()
            return found is not None and _left(*found).endswith(tail)

        if not _wait(shown, SHOW_S):
            return False
        for _ in range(2):  # a second Enter where the first landed in a paste window (a newline)
            self._run("send-keys", "-t", self.pane.pane, "Enter")
            if _wait(lambda: turns.state(self.folder, self.pane.key) != turns.WOKEN, TAKE_S):
                return True
        return None


def _wait(test, within_s: float) -> bool:
    """Poll ``test`` until it holds (at most ``within_s``)."""
    deadline = time.monotonic() + within_s
    while True:
        if test():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def _left(row: str, cursor_x: int) -> str:
    """The text left of the cursor on its row, blanks at its end dropped."""
    return "".join(c.text for c in parse_row(row)[:cursor_x]).rstrip()
