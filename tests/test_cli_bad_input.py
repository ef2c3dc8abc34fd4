"""Issue 17: bad input to every command and option of ``agents-room`` (missing, empty, wrong
type, out of range, a folder, a FIFO, an unreadable file, a read-only folder, a setting in the
environment) ends in one clear line on stderr and a non-zero exit, never a traceback, never a
hang. Real subprocesses; "unreadable" and "read-only" run the command without the root
capabilities that ignore file modes (``setpriv``), so they hold when the tests run as root."""

from __future__ import annotations

import argparse
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from agents_room import cli
from agents_room.store import Store

EXE = str(Path(sys.executable).with_name("agents-room"))
NO_DAC = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--inh-caps", "-dac_override,-dac_read_search"]

# Each case: the command line (with placeholders for the places the fixture makes), the
# environment to add, whether to run without file-mode-ignoring capabilities, and a word the
# line must hold (the field, or what was wrong).
STORE_COMMANDS = [["who"], ["prune", "--quiet-s", "1"], ["doctor"], ["serve"]]
CASES: list[tuple[list[str], dict[str, str], bool, str]] = [
    ([], {}, False, "COMMAND"),
    (["nope"], {}, False, "nope"),
    (["--db"], {}, False, "--db"),
    (["--db", "", "who"], {}, False, "--db"),
    (["--db", "rel.db", "who"], {}, False, "relative path"),
    (["--db", "mysql://h/db", "who"], {}, False, "mysql://"),
    *[(["--db", "{dir}", *c], {}, False, "{dir}") for c in STORE_COMMANDS],
    *[(["--db", "{fifo}", *c], {}, False, "{fifo}") for c in STORE_COMMANDS],
    *[(["--db", "{text}", *c], {}, False, "not a SQLite database") for c in STORE_COMMANDS],
    *[(["--db", "{text}/room.db", *c], {}, False, "{text}/room.db") for c in STORE_COMMANDS],
    *[(["--db", "{unreadable}", *c], {}, True, "{unreadable} cannot be read by this user (permission denied)")
      for c in STORE_COMMANDS],
    (["--db", "{readonly}/room.db", "serve"], {}, True, "{readonly}/room.db"),
    (["--db", "{readonly}/sub/room.db", "serve"], {}, True, "{readonly}/sub/room.db"),
    (["who"], {"AGENTS_ROOM_DB": "room.db"}, False, "relative path"),
    (["who"], {"AGENTS_ROOM_BUSY_TIMEOUT_S": "abc"}, False, "AGENTS_ROOM_BUSY_TIMEOUT_S"),
    (["serve"], {"AGENTS_ROOM_BUSY_TIMEOUT_S": "-1"}, False, "AGENTS_ROOM_BUSY_TIMEOUT_S"),
    (["serve", "--http"], {}, False, "--http"),
    (["serve", "--http", "nope"], {}, False, "--http"),
    (["serve", "--http", ""], {}, False, "--http"),
    (["serve", "--http", "127.0.0.1:99999"], {}, False, "--http"),
    (["serve", "--http", "0.0.0.0:8765"], {}, False, "AGENTS_ROOM_TOKEN"),
    (["serve", "--stdio"], {}, False, "--stdio"),
    (["dashboard", "--http"], {}, False, "--http"),
    (["dashboard", "--http", "nope"], {}, False, "--http"),
    (["dashboard", "--http", "127.0.0.1:99999"], {}, False, "--http"),
    (["dashboard", "--http", "0.0.0.0:8766"], {}, False, "AGENTS_ROOM_TOKEN"),
    (["--db", "{dir}/none/room.db", "dashboard"], {}, False, "there is no store"),
    (["who", "--room"], {}, False, "--room"),
    (["who", "--room", ""], {}, False, "--room"),
    (["who", "--room", "Not A Room"], {}, False, "room"),
    (["who", "--json", "extra"], {}, False, "extra"),
    (["prune"], {}, False, "--quiet-s"),
    (["prune", "--quiet-s"], {}, False, "--quiet-s"),
    (["prune", "--quiet-s", "abc"], {}, False, "--quiet-s"),
    (["prune", "--quiet-s", "-1"], {}, False, "--quiet-s"),
    (["prune", "--quiet-s", "nan"], {}, False, "--quiet-s"),
    (["prune", "--quiet-s", "inf"], {}, False, "--quiet-s"),
    (["prune", "--quiet-s", "1", "--dry-run", "x"], {}, False, "x"),
    (["doctor", "--json", "x"], {}, False, "x"),
    (["copy"], {}, False, "--to"),
    (["copy", "--to"], {}, False, "--to"),
    (["copy", "--to", ""], {}, False, "--to"),
    (["copy", "--to", "rel.db"], {}, False, "relative path"),
    (["copy", "--to", "mysql://h/db"], {}, False, "mysql://"),
    (["hook", "--event"], {}, False, "--event"),
    (["hook", "--format", "yaml"], {}, False, "--format"),
    (["hook", "--timeout", "abc"], {}, False, "--timeout"),
    (["hook", "--timeout", "nan"], {}, False, "--timeout"),
    (["hook", "--wait", "--poll", "-1"], {}, False, "--poll"),
    (["hook", "--wait", "--poll", "0"], {}, False, "--poll"),
    (["hook", "--wait", "x"], {}, False, "x"),
    (["install"], {}, False, "harness"),
    (["install", "vim"], {}, False, "harness"),
    (["install", "claude-code", "--scope", "team"], {}, False, "--scope"),
    (["install", "claude-code", "--dir"], {}, False, "--dir"),
    (["install", "claude-code", "--dir", "{dir}/missing"], {}, False, "does not exist"),
    (["install", "claude-code", "--dir", "{text}"], {}, False, "not a folder"),
    (["install", "claude-code", "--dir", "{fifo}"], {}, False, "not a folder"),
    (["install", "claude-code", "--dir", "{readonly}"], {}, True, "{readonly}/.mcp.json"),
    (["install", "claude-code", "--command", ""], {}, False, "--command"),
    (["install", "claude-code", "--edits", "maybe"], {}, False, "--edits"),
    (["edit-guard"], {}, False, "--harness"),
    (["edit-guard", "--harness", "vim"], {}, False, "--harness"),
    (["edit-guard", "--harness", "codex", "--edits", "off"], {}, False, "--edits"),
    (["install", "claude-code", "--dry-run", "--channel", "x"], {}, False, "x"),
    (["install", "codex", "--scope", "project"], {}, False, "--scope user"),
    (["install", "cursor", "--channel"], {}, False, "--channel"),
    (["install", "claude-code"], {"AGENTS_ROOM_DB": "room.db"}, False, "relative path"),
    (["install", "cursor"], {"AGENTS_ROOM_DB": "/srv/room.db"}, False, "--scope user"),
    (["install", "claude-code", "--dir", "{bad_json}"], {}, False, "not valid JSON"),
    (["send"], {}, False, "TO"),
    (["send", "*"], {}, False, "SUBJECT"),
    (["send", "", "s"], {}, False, "to"),
    (["send", "0123456789abcdef", "s"], {}, False, "0123456789abcdef"),
    (["send", "*", "x" * 201], {}, False, "subject"),
    (["send", "*", "s", "x" * 70000], {}, False, "body"),
    (["send", "*", "s", "b", "extra"], {}, False, "extra"),
    (["send", "*", "s", "--room"], {}, False, "--room"),
    (["send", "*", "s", "--room", "Not A Room"], {}, False, "room"),
    (["send", "*", "s", "--label"], {}, False, "--label"),
    (["send", "*", "s", "--label", ""], {}, False, "--label"),
    (["send", "*", "s", "--label", "x" * 65], {}, False, "label"),
    (["send", "*", "s", "--ttl-s", "abc"], {}, False, "--ttl-s"),
    (["send", "*", "s", "--ttl-s", "0"], {}, False, "ttl_s"),
    (["send", "*", "s", "--reply-to", "x"], {}, False, "--reply-to"),
    (["send", "*", "s", "--reply-to", "999"], {}, False, "reply_to"),
    (["--db", "{text}/room.db", "send", "*", "s"], {}, False, "{text} is a file, not a folder"),
    (["inbox", "--limit"], {}, False, "--limit"),
    (["inbox", "--limit", "abc"], {}, False, "--limit"),
    (["inbox", "--limit", "0"], {}, False, "limit"),
    (["inbox", "--json", "x"], {}, False, "x"),
    (["--db", "{text}/room.db", "inbox"], {}, False, "{text} is a file, not a folder"),
    (["guard"], {}, False, "action"),
    (["guard", "nope"], {}, False, "nope"),
    (["guard", "install", "--repo"], {}, False, "--repo"),
    (["guard", "install", "--repo", ""], {}, False, "--repo"),
    (["guard", "install", "--repo", "{dir}/missing"], {}, False, "not a folder"),
    (["guard", "install", "--repo", "{text}"], {}, False, "not a folder"),
    (["guard", "install", "--repo", "{dir}"], {}, False, "not in a git work tree"),
    (["guard", "uninstall", "--repo", "{dir}"], {}, False, "not in a git work tree"),
    (["guard", "install", "--repo", "{git}"], {}, True, "{git}/.git/hooks"),
    (["guard", "install", "--repo", "{git}"], {"AGENTS_ROOM_DB": "room.db"}, False, "relative path"),
]


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The places the bad values name. The runs without root's DAC capabilities keep the same
    user, the owner of all of them, so the modes below are what decides."""
    root = Path(tmp_path_factory.mktemp("bad-input"))
    (root / "dir").mkdir()
    os.mkfifo(root / "fifo")
    (root / "text").write_text("notes, not a database\n" * 50)
    (root / "unreadable").write_bytes((root / "text").read_bytes())
    (root / "unreadable").chmod(0)
    (root / "readonly").mkdir()
    (root / "readonly").chmod(0o555)
    (root / "bad_json").mkdir()
    (root / "bad_json" / ".mcp.json").write_text("{not json")
    (root / "home").mkdir()
    subprocess.run(["git", "init", "-q", str(root / "git")], check=True)  # its hooks folder read-only
    (root / "git" / ".git" / "hooks").chmod(0o555)
    Store.open(root / "store.db").close()
    return {name: str(root / name) for name in ("dir", "fifo", "text", "unreadable", "readonly", "bad_json",
                                                 "home", "git")} | {"store": str(root / "store.db"), "root": str(root)}


def fill(text: str, places: dict[str, str]) -> str:
    for name, path in places.items():
        text = text.replace("{" + name + "}", path)
    return text


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv (util-linux)")
@pytest.mark.parametrize(("argv", "env", "unprivileged", "word"), CASES, ids=[" ".join(c[0]) + (
    " " + " ".join(f"{k}={v}" for k, v in c[1].items()) if c[1] else "") for c in CASES])
def test_bad_input_is_one_clear_line(places: dict[str, str], argv: list[str], env: dict[str, str],
                                     unprivileged: bool, word: str) -> None:
    argv = [fill(a, places) for a in argv]
    before = sorted(os.listdir(places["root"])) + sorted(os.listdir(places["readonly"])) + hooks(places)
    base = {k: v for k, v in os.environ.items() if not k.startswith("AGENTS_ROOM_")}
    full = {**base, "HOME": places["home"], "AGENTS_ROOM_DB": places["store"], **env}
    done = subprocess.run([*(NO_DAC if unprivileged else []), EXE, *argv], capture_output=True, text=True, timeout=60,
                          cwd=places["dir"], env=full, stdin=subprocess.DEVNULL)
    assert done.returncode != 0, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("agents-room"), lines[0]
    assert fill(word, places) in lines[0], lines[0]
    assert sorted(os.listdir(places["root"])) + sorted(os.listdir(places["readonly"])) + hooks(places) == before  # nothing made
    assert not stat.S_ISREG(os.stat(places["fifo"]).st_mode) and not os.listdir(places["dir"])


def hooks(places: dict[str, str]) -> list[str]:
    return sorted(os.listdir(os.path.join(places["git"], ".git", "hooks")))


def options(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Every (subcommand, option) of the command line, positional arguments by their dest."""
    out: set[tuple[str, ...]] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out |= options(sub, (name,))
        elif not isinstance(action, argparse._HelpAction | argparse._VersionAction):
            out.add((*prefix, action.option_strings[0] if action.option_strings else action.dest))
    return out


def test_the_sweep_walks_every_command_and_option() -> None:
    """A new option without a bad-input case fails here."""
    covered = set()
    for argv, env, _, _ in CASES:
        command = next((a for a in argv if not a.startswith("-") and a in {"serve", "dashboard", "who", "prune", "doctor",
                                                                            "hook", "install", "copy", "send", "inbox",
                                                                            "guard", "edit-guard"}), None)
        for a in argv:
            covered.add((command, a) if command and a.startswith("--") else ("--db",) if a == "--db" else ())
        if command == "install":
            covered.add(("install", "harness"))
        rest = argv[argv.index(command) + 1:] if command else []
        if command == "guard" and (not rest or rest[0].startswith("-") or rest[0] not in {"install", "uninstall"}):
            covered.add(("guard", "action"))  # a missing or unknown action
        if command == "send" and not any(a.startswith("-") for a in rest):  # the positional the case gets wrong
            if len(rest) < 2:
                covered.add(("send", ["to", "subject"][len(rest)]))  # the first one missing
            covered |= {("send", name) for name, a in zip(["to", "subject", "body"], rest, strict=False)
                        if a == "" or len(a) > 200}
    covered |= {("--db",)}
    flags_without_values = {("who", "--json"), ("prune", "--dry-run"), ("doctor", "--json"), ("hook", "--wait"),
                            ("install", "--dry-run"), ("install", "--channel"), ("install", "--follow-links"),
                            ("edit-guard", "--read"),
                            ("send", "--json"), ("inbox", "--json")}
    missing = options(cli.parser()) - covered - flags_without_values
    assert not missing, f"no bad-input case for {sorted(missing)}"
