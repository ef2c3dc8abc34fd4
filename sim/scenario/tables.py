"""Strict reading of TOML tables: every key taken is checked for type and range, and a key
nobody took is an error naming it and its table."""

from __future__ import annotations

import math
import re
from typing import Any


class ScenarioError(ValueError):
    """A scenario that cannot run; the text names the table and key."""


class Table:
    """One TOML table being read: every key taken is checked, the rest are unknown."""

    def __init__(self, data: Any, where: str) -> None:
        if not isinstance(data, dict):
            raise ScenarioError(f"[{where}] must be a table, got {kind_of(data)}")
        self.data = dict(data)
        self.where = where

    def take(self, key: str, default: Any = ..., *, kinds: tuple[type, ...]) -> Any:
        if key not in self.data:
            if default is ...:
                raise ScenarioError(f"[{self.where}] {key}: required")
            return default
        value = self.data.pop(key)
        if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
            names = " or ".join(TYPE_NAMES[k] for k in kinds)
            raise ScenarioError(f"[{self.where}] {key}: must be {names}, got {kind_of(value)} {value!r}")
        return value

    def number(self, key: str, default: Any, lo: float, hi: float) -> float:
        value = self.take(key, default, kinds=(int, float))
        return value if value is None else number(f"[{self.where}] {key}", value, lo, hi)

    def integer(self, key: str, default: Any, lo: int, hi: int) -> int:
        value = self.take(key, default, kinds=(int,))
        return value if value is None else integer(f"[{self.where}] {key}", value, lo, hi)

    def choice(self, key: str, default: str, options: tuple[str, ...]) -> Any:
        return choice(f"[{self.where}] {key}", self.take(key, default, kinds=(str,)), options)

    def names(self, key: str, pattern: re.Pattern[str], what: str) -> tuple[str, ...]:
        values = self.take(key, [], kinds=(list,))
        for v in values:
            if not isinstance(v, str) or not pattern.fullmatch(v):
                raise ScenarioError(f"[{self.where}] {key}: {v!r} is not a valid {what} ({pattern.pattern})")
        if len(set(values)) != len(values):
            raise ScenarioError(f"[{self.where}] {key}: duplicates in {values}")
        return tuple(values)

    def sub(self, key: str) -> Table:
        return Table(self.take(key, {}, kinds=(dict,)), f"{self.where}.{key}" if self.where else key)

    def done(self) -> None:
        if self.data:
            key = sorted(self.data)[0]
            raise ScenarioError(f"[{self.where}] unknown key {key!r}" if self.where else f"unknown table or key {key!r}")


TYPE_NAMES = {int: "an integer", float: "a number", str: "a string", list: "a list", dict: "a table",
              bool: "true or false"}


def kind_of(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "list", dict: "table"}.get(
        type(value), type(value).__name__
    )


def number(name: str, value: Any, lo: float, hi: float) -> float:
    value = float(value)
    if not math.isfinite(value) or not lo <= value <= hi:
        raise ScenarioError(f"{name}: must be from {lo:g} to {hi:g}, got {value:g}")
    return value


def integer(name: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ScenarioError(f"{name}: must be an integer from {lo} to {hi}, got {value!r}")
    return value


def choice(name: str, value: Any, options: tuple[str, ...]) -> Any:
    if value not in options:
        raise ScenarioError(f"{name}: must be one of {', '.join(options)}, got {value!r}")
    return value
