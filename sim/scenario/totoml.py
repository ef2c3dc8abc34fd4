"""A scenario written back as TOML that ``scenario.parse`` reads to an equal scenario (the
scenario as run, a sweep's point, a fitted scenario)."""

from __future__ import annotations

from typing import Any

from agents_room.harnesses.toml_lines import toml_value

from .fitted import fitted_to_toml


def _toml_table(header: str, values: dict[str, Any]) -> list[str]:
    lines = [header] if header else []
    lines += [f"{k} = {toml_value(v)}" for k, v in values.items() if v is not None and not isinstance(v, dict)]
    return lines


def to_toml(s: Any) -> str:
    """The scenario as run, as TOML that :func:`parse` reads back to an equal scenario."""
    d = s.to_dict()
    lines = [f"# {s.name}: the scenario as run", *_toml_table("", {"name": s.name, "description": s.description})]
    lines += ["", *_toml_table("[run]", d["run"])]
    for repo in d["repos"]:
        lines += ["", *_toml_table("[[repos]]", repo)]
    workload = d["workload"]
    lines += ["", *_toml_table("[workload]", workload)]
    lines += ["", *_toml_table("[workload.think]", {k: v for k, v in workload["think"].items()
                                                      if v or k != "quantiles_ms"})]
    lines += ["", *_toml_table("[workload.mix]", workload["mix"])]
    lines += ["", *_toml_table("[open_loop]", d["open_loop"])]
    lines += ["", *_toml_table("[expect]", d["expect"])]
    if d["expect"]["p99_ms"]:
        lines += ["", *_toml_table("[expect.p99_ms]", d["expect"]["p99_ms"])]
    if d["hosts"]:
        lines += ["", *_toml_table("[hosts]", d["hosts"])]
    if s.fitted is not None:
        lines += ["", *fitted_to_toml(s.fitted, _toml_table)]
    if d["faults"]:
        lines += ["", *_toml_table("[faults]", d["faults"])]
        for kind, values in d["faults"].items():
            if isinstance(values, dict):
                lines += ["", *_toml_table(f"[faults.{kind}]", values)]
    return "\n".join(lines) + "\n"
