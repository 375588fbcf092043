"""Whole-list set comparison for query answers (EHRSQL-style gold lists).

Gold is the flattened list of result cells of the gold query, each a string (``["po", "po/ng"]``,
``["10386"]``, ``["None"]``). A submission passes only when its items, as a set, equal the gold set:
every gold item present and nothing extra. Items match when

- both are numbers (or numeric strings) of equal value: ``2 == "2.0"`` but ``2 != 12``;
- else both normalise to the same text: case-folded, runs of whitespace collapsed to one space;
- ``None`` (SQL NULL) is its own kind: it equals gold ``"None"``/``"null"``, never ``0`` or ``""``;
- booleans equal ``1``/``0`` only when the caller says the gold is boolean-valued (a yes/no query such
  as ``count(*) > 0``); otherwise ``True`` is not a number.

Rows are flattened one level, so ``cursor.fetchall()`` output (a list of tuples) is accepted as is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from medagentgym.grading.answers import NO_ANSWER, to_number

# Floats that differ only in the last printed digits (SQLite vs pandas arithmetic) still match.
REL_TOL = 1e-6
_NULL_TEXTS = {"none", "null"}


@dataclass(frozen=True)
class SetMatch:
    correct: bool
    reason: str


def _key(value: Any, boolean: bool) -> tuple:
    """A hashable canonical form of one answer item."""
    if value is None:
        return ("null",)
    if isinstance(value, bool):
        return ("num", 1.0 if value else 0.0) if boolean else ("bool", value)
    num = to_number(value)
    if num is not None:
        return ("num", num)
    text = " ".join(str(value).split()).casefold()
    if text in _NULL_TEXTS:
        return ("null",)
    if text in ("true", "false"):
        return ("num", float(text == "true")) if boolean else ("bool", text == "true")
    return ("text", text)


def _same(a: tuple, b: tuple) -> bool:
    if a[0] == b[0] == "num":
        return math.isclose(a[1], b[1], rel_tol=REL_TOL, abs_tol=1e-9)
    return a == b


def _unmatched(keys: set[tuple], others: set[tuple]) -> int:
    return sum(1 for k in keys if not any(_same(k, o) for o in others))


def flatten_items(submitted: Any) -> list[Any]:
    """The submission as a flat list of items: scalars become one item, rows are flattened one level."""
    if isinstance(submitted, (list, tuple, set, frozenset)):
        items: list[Any] = []
        for element in submitted:
            if isinstance(element, (list, tuple)):
                items.extend(element)
            else:
                items.append(element)
        return items
    return [submitted]


def compare_sets(gold: list[Any], submitted: Any, boolean: bool = False) -> SetMatch:
    """Whether ``submitted`` equals the gold list as a set (see the module docstring for the rules)."""
    if submitted is NO_ANSWER:
        return SetMatch(False, "no answer was submitted")
    gold_keys = {_key(g, boolean) for g in gold}
    sub_keys = {_key(s, boolean) for s in flatten_items(submitted)}
    # Pairwise rather than set difference so that numbers match within a tolerance; lists are small.
    missing = _unmatched(gold_keys, sub_keys)
    extra = _unmatched(sub_keys, gold_keys)
    if not missing and not extra:
        return SetMatch(True, f"all {len(gold_keys)} gold item(s) matched")
    parts = []
    if missing:
        parts.append(f"{missing} of {len(gold_keys)} gold item(s) missing")
    if extra:
        parts.append(f"{extra} extra item(s) not in the gold answer")
    return SetMatch(False, "; ".join(parts))
