"""``sim run --dashboard``: the run's store served live while the run goes, then stopped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from test_http import free_port

from sim.run.drivers import STORE_FACTORY_ENV

ROOT = Path(__file__).resolve().parents[3]
SMOKE = ROOT / "scenarios" / "smoke.toml"


@pytest.mark.slow
def test_the_dashboard_shows_the_run_while_it_goes_and_stops_with_it(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in (STORE_FACTORY_ENV, "AGENTS_ROOM_TOKEN")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "sim.cli", "run", str(SMOKE), "--out", str(tmp_path / "out"), "--no-live",
         "--no-plots", "--duration", "6", "--dashboard", f"127.0.0.1:{port}"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: dict = {}
    deadline = time.monotonic() + 180
    while proc.poll() is None and time.monotonic() < deadline and not seen.get("leases_or_messages"):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/snapshot.json", timeout=5) as response:
                snap = json.load(response)
            seen["members"] = max(seen.get("members", 0), len(snap["members"]))
            seen["leases_or_messages"] = bool(snap["messages"] or snap["spans"])
        except OSError:
            pass
        time.sleep(0.3)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    assert f"dashboard of the run at http://127.0.0.1:{port}/" in err
    assert seen == {"members": 3, "leases_or_messages": True}  # the smoke run's three agents at work
    with pytest.raises(OSError):  # stopped with the run
        urllib.request.urlopen(f"http://127.0.0.1:{port}/snapshot.json", timeout=2)


def test_a_bad_dashboard_address_is_one_line_before_anything_runs(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "sim.cli", "run", str(SMOKE), "--out", str(tmp_path / "out"),
                           "--dashboard", "0.0.0.0:8766"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != "AGENTS_ROOM_TOKEN"})
    assert done.returncode == 2 and "without a token" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()
