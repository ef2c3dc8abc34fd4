"""Bad input to every command and option of ``sim`` (missing, empty, wrong type, out of range,
a folder, a FIFO, an unreadable file, a regular file where a folder goes, a read-only folder)
ends in one clear line on stderr naming the option, and a non-zero exit: never a traceback,
never a hang, nothing made. Real subprocesses; "unreadable" and "read-only" run without the
root capabilities that ignore file modes (``setpriv``), as tests/test_cli_bad_input.py does
for ``agents-room``."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli_bad_input import NO_DAC, fill  # tests/ is on the path

from sim import cli

ROOT = Path(__file__).resolve().parents[2]
SMOKE = str(ROOT / "scenarios" / "smoke.toml")

# Each case: the option it is about ("run --out"; "run scenario" for the positional; "sim
# COMMAND" for the command itself), the command line (placeholders for the places the
# fixture makes), whether to run without file-mode-ignoring capabilities, and a word the line
# must hold besides the option.
Case = tuple[str, list[str], bool, str]
RUN: list[Case] = [
    ("run scenario", ["run"], False, "scenario"),
    ("run scenario", ["run", "{dir}/missing.toml"], False, "cannot read"),
    ("run scenario", ["run", "{dir}"], False, "is a folder"),
    ("run scenario", ["run", "{fifo}"], False, "not a regular file"),
    ("run scenario", ["run", "{unreadable}"], True, "permission denied"),
    ("run scenario", ["run", "{text}"], False, "invalid scenario"),
    ("run --out", ["run", SMOKE, "--out"], False, "expected one argument"),
    ("run --out", ["run", SMOKE, "--out", ""], False, "empty"),
    ("run --out", ["run", SMOKE, "--out", "{dir}"], False, "already exists"),
    ("run --out", ["run", SMOKE, "--out", "{text}/x"], False, "is not a folder"),
    ("run --out", ["run", SMOKE, "--out", "{fifo}/x/y"], False, "is not a folder"),
    ("run --out", ["run", SMOKE, "--out", "{readonly}/x"], True, "not writable"),
    ("run --duration", ["run", SMOKE, "--duration", "abc"], False, "number"),
    ("run --duration", ["run", SMOKE, "--duration", "-1"], False, "0.5..86400"),
    ("run --duration", ["run", SMOKE, "--duration", "nan"], False, "0.5..86400"),
    ("run --duration", ["run", SMOKE, "--duration", "inf"], False, "0.5..86400"),
    ("run --agents", ["run", SMOKE, "--agents", "1.5"], False, "whole number"),
    ("run --agents", ["run", SMOKE, "--agents", "0"], False, "1..512"),
    ("run --agents", ["run", SMOKE, "--agents", "513"], False, "1..512"),
    ("run --seed", ["run", SMOKE, "--seed", "x"], False, "whole number"),
    ("run --seed", ["run", SMOKE, "--seed", "-1"], False, "0.."),
    ("run --scale", ["run", SMOKE, "--scale", "0"], False, "1..100"),
    ("run --scale", ["run", SMOKE, "--scale", "1.5"], False, "whole number"),
    ("run --scale", ["run", SMOKE, "--scale", "2", "--sweep", "agents=2,3"], False, "single runs"),
    ("run --driver", ["run", SMOKE, "--driver", "http"], False, "invalid choice"),
    ("run --driver", ["run", SMOKE, "--driver"], False, "expected one argument"),
    ("run --edits", ["run", SMOKE, "--edits", "never"], False, "invalid choice"),
    ("run --edits", ["run", SMOKE, "--edits"], False, "expected one argument"),
    ("run --no-live", ["run", SMOKE, "--no-live=yes"], False, "ignored explicit argument"),
    ("run --no-plots", ["run", SMOKE, "--no-plots=yes"], False, "ignored explicit argument"),
    ("run --no-plots", ["run", SMOKE, "--no-plots", "--sweep", "agents=2,3"], False, "single runs"),
    ("run --sweep", ["run", SMOKE, "--sweep", ""], False, "empty"),
    ("run --sweep", ["run", SMOKE, "--sweep", "agents"], False, "KEY=V1,V2"),
    ("run --sweep", ["run", SMOKE, "--sweep", "agents=4,2"], False, "increasing"),
    ("run --sweep", ["run", SMOKE, "--sweep", "agents=2,x"], False, "numbers"),
    ("run --store", ["run", SMOKE, "--store", ""], False, "empty"),
    ("run --store", ["run", SMOKE, "--store", "mysql://h/db"], False, "mysql://"),
    ("run --store", ["run", SMOKE, "--store", "{dir}"], False, "not a regular file"),
    ("run --store", ["run", SMOKE, "--store", "{fifo}"], False, "not a regular file"),
    ("run --store", ["run", SMOKE, "--store", "{text}"], False, "not a SQLite database"),
    ("run --store", ["run", SMOKE, "--store", "{text}/room.db"], False, "{text}/room.db"),
    ("run --store", ["run", SMOKE, "--store", "{unreadable}"], True, "permission denied"),
    ("run --dashboard", ["run", SMOKE, "--dashboard", "nope"], False, "HOST:PORT"),
    ("run --dashboard", ["run", SMOKE, "--dashboard", "127.0.0.1:99999"], False, "HOST:PORT"),
    ("run --dashboard", ["run", SMOKE, "--dashboard", "0.0.0.0:8766"], False, "AGENTS_ROOM_TOKEN"),
]
BENCH: list[Case] = [
    ("bench --out", ["bench", "--out", ""], False, "empty"),
    ("bench --out", ["bench", "--out", "{dir}"], False, "already exists"),
    ("bench --out", ["bench", "--out", "{text}/x"], False, "is not a folder"),
    ("bench --out", ["bench", "--out", "{readonly}/x"], True, "not writable"),
    ("bench --procs", ["bench", "--procs", "0,4"], False, "1..512"),
    ("bench --procs", ["bench", "--procs", "x"], False, "whole numbers"),
    ("bench --mcp-procs", ["bench", "--mcp-procs", "513"], False, "1..512"),
    ("bench --seconds", ["bench", "--seconds", "abc"], False, "number of seconds"),
    ("bench --seconds", ["bench", "--seconds", "0.1"], False, "0.2..3600"),
    ("bench --rounds", ["bench", "--rounds", "0"], False, "1..100"),
    ("bench --rounds", ["bench", "--rounds", "two"], False, "whole number"),
    ("bench --warmup", ["bench", "--warmup", "-1"], False, "0..3600"),
    ("bench --ops", ["bench", "--ops", "lease_clam"], False, "unknown operation"),
    ("bench --ops", ["bench", "--ops", ","], False, "unknown operation"),
    ("bench --hook-runs", ["bench", "--hook-runs", "-1"], False, "0..10000"),
    ("bench --hook-runs", ["bench", "--hook-runs", "x"], False, "whole number"),
    ("bench --store", ["bench", "--store", ""], False, "empty"),
    ("bench --store", ["bench", "--store", "rel.db"], False, "relative path"),
    ("bench --store", ["bench", "--store", "{text}"], False, "postgresql://"),
]
FIT: list[Case] = [
    ("fit store", ["fit", "{dir}/missing.db", "--out", "{root}/fitted.toml"], False, "no store"),
    ("fit store", ["fit", "{dir}", "--out", "{root}/fitted.toml"], False, "not a regular file"),
    ("fit store", ["fit", "{fifo}", "--out", "{root}/fitted.toml"], False, "not a regular file"),
    ("fit store", ["fit", "{text}", "--out", "{root}/fitted.toml"], False, "not a SQLite database"),
    ("fit store", ["fit", "rel.db", "--out", "{root}/fitted.toml"], False, "relative path"),
    ("fit store", ["fit", "mysql://h/db", "--out", "{root}/fitted.toml"], False, "mysql://"),
    ("fit --out", ["fit", "{text}", "--out"], False, "expected one argument"),
    ("fit --out", ["fit", "{text}", "--out", ""], False, "empty"),
    ("fit --out", ["fit", "{text}", "--out", "{text}"], False, "already exists"),
    ("fit --out", ["fit", "{text}", "--out", "{text}/x"], False, "is not a folder"),
    ("fit --out", ["fit", "{text}", "--out", "{readonly}/x.toml"], True, "not writable"),
    ("fit --since", ["fit", "{text}", "--since", "yesterday", "--out", "{root}/fitted.toml"], False, "ISO 8601"),
    ("fit --until", ["fit", "{text}", "--until", "soon", "--out", "{root}/fitted.toml"], False, "ISO 8601"),
    ("fit --until", ["fit", "{text}", "--since", "200", "--until", "100", "--out", "{root}/fitted.toml"], False,
     "not after"),
]
CASES: list[Case] = [
    ("sim COMMAND", [], False, "COMMAND"),
    ("sim COMMAND", ["nope"], False, "invalid choice"),
    ("sim COMMAND", ["run", SMOKE, "extra"], False, "unrecognized arguments"),
    *RUN, *BENCH, *FIT,
]


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = Path(tmp_path_factory.mktemp("sim-bad-input"))
    (root / "dir").mkdir()
    os.mkfifo(root / "fifo")
    (root / "text").write_text("notes, not a scenario [\n" * 50)
    (root / "unreadable").write_bytes((root / "text").read_bytes())
    (root / "unreadable").chmod(0)
    (root / "readonly").mkdir()
    (root / "readonly").chmod(0o555)
    return {name: str(root / name) for name in ("dir", "fifo", "text", "unreadable", "readonly")} | {"root": str(root)}


def option_of(case: Case) -> tuple[str, ...]:
    command, _, option = case[0].partition(" ")
    return (option,) if command == "sim" else (command, option)


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv (util-linux)")
@pytest.mark.parametrize("case", CASES, ids=[" ".join(c[1]).replace(SMOKE, "smoke.toml") or "(nothing)" for c in CASES])
def test_bad_input_is_one_clear_line_naming_the_option(places: dict[str, str], case: Case) -> None:
    _, argv, unprivileged, word = case
    argv = [fill(a, places) for a in argv]
    before = sorted(os.listdir(places["root"])) + sorted(os.listdir(places["readonly"]))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTS_ROOM_")}
    done = subprocess.run([*(NO_DAC if unprivileged else []), sys.executable, "-m", "sim.cli", *argv],
                          capture_output=True, text=True, timeout=60, cwd=places["dir"], stdin=subprocess.DEVNULL,
                          env={**env, "PYTHONPATH": str(ROOT)})
    assert done.returncode != 0, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    option = option_of(case)[-1]
    assert lines[0].startswith("sim"), lines[0]
    assert option in lines[0] or option == "COMMAND" and word in lines[0], (option, lines[0])
    assert fill(word, places) in lines[0], lines[0]
    assert sorted(os.listdir(places["root"])) + sorted(os.listdir(places["readonly"])) == before  # nothing made
    assert not os.listdir(places["dir"])


def options(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Every (command, option) of sim's command line; positional arguments by their dest, the
    choice of command as COMMAND."""
    out: set[tuple[str, ...]] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            out.add((*prefix, "COMMAND"))
            for name, sub in action.choices.items():
                out |= options(sub, (name,))
        elif not isinstance(action, argparse._HelpAction):
            out.add((*prefix, action.option_strings[0] if action.option_strings else action.dest))
    return out


def test_the_sweep_walks_every_command_and_option() -> None:
    """A new option of sim without a bad-input case fails here; a case must use its option."""
    for case in CASES:
        option = option_of(case)[-1]
        if option.startswith("--"):
            assert any(a.split("=")[0] == option for a in case[1]), case
    missing = options(cli._parser()) - {option_of(c) for c in CASES}
    assert not missing, f"no bad-input case for {sorted(missing)}"
