"""The harness driver's figures, per harness (``report.json`` ``harnesses``, report.md's
"Real harnesses" section): how soon a message reached the model of each agent it was delivered
to, how many hook runs and store calls the harness's hooks made per model tool call, and what
each CLI cost in CPU and memory.

Mail-to-model latency: from the ``msg_send`` answer (the message's ``created_at`` in the store,
wall clock) to the first model request of a recipient that held the message's subject (the driver's
``<agent>.seen.jsonl``: when, and whether in a tool's answer or in text a hook added). Every
agent of the driver runs one long headless turn, so each delivery reaches an agent mid-turn;
an idle agent (between turns) is not part of a run.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np


def compute(out: Path, records: list[dict[str, Any]], db_file: Path | None) -> dict[str, Any] | None:
    """The figures from the run's folder ``out`` and its merged history; None when no agent ran
    a harness."""
    folder = out / "harness"
    agents = [json.loads(p.read_text()) for p in sorted(folder.glob("a*.json"))] if folder.is_dir() else []
    if not agents:
        return None
    harness_of = {a["agent"]: a["harness"] for a in agents}
    agent_of = {r["session"]: r["agent"] for r in records if r.get("session")}
    seen = {a["agent"]: _seen(folder / f"{a['agent']}.seen.jsonl") for a in agents}
    news, sent_at = _hook_news(db_file, agent_of), _sent_at(db_file)
    delays: dict[str, list[tuple[float, str]]] = defaultdict(list)
    missed: dict[str, int] = defaultdict(int)
    for r in records:
        if r["f"] != "msg_send" or r["type"] != "ok" or not isinstance(r.get("value"), dict):
            continue
        tag = r["value"].get("op")
        sent = sent_at.get(r["value"].get("message_id"), r["wall"])  # the store's commit, else the answer's record
        for sid in r["value"].get("recipients") or []:
            name = agent_of.get(sid)
            if name not in harness_of:
                continue
            got = seen[name].get(tag)
            if got is None:
                missed[harness_of[name]] += 1
            else:
                delays[harness_of[name]].append((max(0.0, got["wall"] - sent) * 1000, got["via"]))
    rows = []
    for harness in sorted(set(harness_of.values())):
        mine = [a for a in agents if a["harness"] == harness]
        calls = sum(a["tool_calls"] for a in mine)
        hooks = [_hook_runs(folder / f"{a['agent']}.hooks") for a in mine]
        ms = np.asarray([d for d, _ in delays[harness]])
        rows.append({
            "harness": harness, "agents": len(mine), "tool_calls": calls,
            "model_requests": sum(a["model_requests"] for a in mine),
            "hook_runs": sum(h[0] for h in hooks), "wait_hooks": sum(h[1] for h in hooks),
            "hook_runs_per_call": sum(h[0] for h in hooks) / calls if calls else None,
            "hook_news": sum(news.get(a["agent"], 0) for a in mine) if news is not None else None,
            "hook_news_per_call": (sum(news.get(a["agent"], 0) for a in mine) / calls
                                   if news is not None and calls else None),
            "mail": len(ms), "mail_missed": missed[harness],
            "mail_via_hook": sum(1 for _, via in delays[harness] if via == "hook"),
            "mail_p50_ms": float(np.percentile(ms, 50)) if ms.size else None,
            "mail_p99_ms": float(np.percentile(ms, 99)) if ms.size else None,
            "mail_max_ms": float(ms.max()) if ms.size else None,
            "mail_hook_p50_ms": _pct([d for d, via in delays[harness] if via == "hook"], 50),
            "mail_hook_p99_ms": _pct([d for d, via in delays[harness] if via == "hook"], 99),
            "cpu_s_per_agent": sum(a["cli_cpu_s"] for a in mine) / len(mine),
            "cpu_share_per_agent": sum(a["cli_cpu_s"] / max(a["wall_s"], 1e-9) for a in mine) / len(mine),
            "rss_mib_per_agent": max(a["cli_rss_max_kib"] for a in mine) / 1024,
            "errors": [e for a in mine for e in a["errors"]],
        })
    return {"harnesses": rows}


def _pct(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def _seen(path: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                out.setdefault(row["tag"], row)
    return out


def _hook_runs(path: Path) -> tuple[int, int]:
    """(hook runs, of which ``--wait`` waiters) from the counting wrapper's lines."""
    if not path.exists():
        return 0, 0
    lines = [x for x in path.read_text().splitlines() if x.strip()]
    waits = sum(1 for x in lines if " --wait" in x)
    return len(lines) - waits, waits


def _sent_at(db_file: Path | None) -> dict[Any, float]:
    """Each message's ``created_at`` (the store's clock: this machine's, as the model's
    ``Request.at``): when ``msg_send`` answered, before the sender's harness passed it on."""
    if db_file is None or not db_file.exists():
        return {}
    with sqlite3.connect(f"file:{db_file}?mode=ro", uri=True) as db:
        return dict(db.execute("SELECT id, created_at FROM messages").fetchall())


def _hook_news(db_file: Path | None, agent_of: dict[str, str]) -> dict[str, int] | None:
    """The hook's news-path store calls by agent (the store counts them as ``hook_news``);
    None on PostgreSQL (not read here)."""
    if db_file is None or not db_file.exists():
        return None
    with sqlite3.connect(f"file:{db_file}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT session_id, sum(n) FROM call_counts WHERE tool = 'hook_news' "
                          "GROUP BY session_id").fetchall()
    out: dict[str, int] = defaultdict(int)
    for sid, n in rows:
        if sid in agent_of:
            out[agent_of[sid]] += int(n)
    return out


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f}"


def _per(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def markdown(h: dict[str, Any]) -> list[str]:
    """report.md's section."""
    lines = ["## Real harnesses", "",
             "Each agent is a real CLI in one long headless turn whose model is the scripted model "
             "playing the workload; the history is the model's (invoke when it made the call, the "
             "completion when the answer came back in the harness's next request).", "",
             "Mail to the model, mid-turn: from `msg_send`'s answer to the first model request of a recipient "
             "that held the message (in a tool's answer or in hook text); no agent of a run is idle between turns.",
             "", "| harness | agents | tool calls | deliveries | via hook | not seen | p50 ms | p99 ms | max ms | "
             "via hook: p50 ms | p99 ms |", "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in h["harnesses"]:
        lines.append(f"| {r['harness']} | {r['agents']} | {r['tool_calls']:,} | {r['mail']:,} | {r['mail_via_hook']:,} | "
                     f"{r['mail_missed']:,} | {_ms(r['mail_p50_ms'])} | {_ms(r['mail_p99_ms'])} | {_ms(r['mail_max_ms'])} | "
                     f"{_ms(r['mail_hook_p50_ms'])} | {_ms(r['mail_hook_p99_ms'])} |")
    lines += ["", "What the hooks cost: each hook run makes one store read (the quiet probe); a run that finds "
              "news makes the store's news calls too (`hook_news`, counted by the store). Waiters are the "
              "asyncRewake hooks started at each Stop.", "",
              "| harness | hook runs | per tool call | news calls | per tool call | waiters | CPU s / agent | "
              "CPU share / agent | RSS MiB / agent |", "|---|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in h["harnesses"]:
        news = "-" if r["hook_news"] is None else f"{r['hook_news']:,}"
        lines.append(f"| {r['harness']} | {r['hook_runs']:,} | {_per(r['hook_runs_per_call'])} | {news} | "
                     f"{_per(r['hook_news_per_call'])} | {r['wait_hooks']:,} | {r['cpu_s_per_agent']:.1f} | "
                     f"{r['cpu_share_per_agent']:.2f} | {r['rss_mib_per_agent']:.0f} |")
    errors = [f"{r['harness']}: {e}" for r in h["harnesses"] for e in r["errors"]]
    if errors:
        lines += ["", "Harness errors: " + "; ".join(errors[:5])]
    return [*lines, ""]


def print_table(h: dict[str, Any] | None, console: Any) -> None:
    """The terminal's table: one row per harness."""
    if not h:
        return
    from rich.table import Table

    t = Table(title="real harnesses (mail to the model, mid-turn; hooks per model tool call)", title_justify="left")
    for col in ("harness", "agents", "tool calls", "mail", "via hook", "p50 ms", "p99 ms", "max ms", "hook runs/call",
                "news/call", "CPU s/agent", "RSS MiB"):
        t.add_column(col, justify="left" if col == "harness" else "right")
    for r in h["harnesses"]:
        t.add_row(r["harness"], str(r["agents"]), f"{r['tool_calls']:,}", f"{r['mail']:,}", f"{r['mail_via_hook']:,}",
                  _ms(r["mail_p50_ms"]), _ms(r["mail_p99_ms"]), _ms(r["mail_max_ms"]), _per(r["hook_runs_per_call"]),
                  _per(r["hook_news_per_call"]), f"{r['cpu_s_per_agent']:.1f}", f"{r['rss_mib_per_agent']:.0f}")
    console.print(t)
