"""Numeric answer checks: closed intervals, integer counts, relative tolerance.

All of them take the submitted value as parsed by ``answers.submitted_answer`` and reject anything that is
not a single number (booleans, lists, text with several numbers), so a dump of candidates never passes.
"""

from __future__ import annotations

import math
from typing import Any

from medagentgym.grading.answers import to_number

# Absorbs float noise such as 2.9999999999999996 for a gold of 3; far below any task's own tolerance.
_EPS = 1e-9


def within_interval(value: Any, lower: Any, upper: Any) -> bool:
    """True when value is a number inside [lower, upper] (bounds in either order, inclusive)."""
    x, lo, hi = to_number(value), to_number(lower), to_number(upper)
    if x is None or lo is None or hi is None:
        return False
    lo, hi = min(lo, hi), max(lo, hi)
    slack = _EPS * max(1.0, abs(lo), abs(hi))
    return lo - slack <= x <= hi + slack


def as_integer(value: Any) -> int | None:
    """The integer a number denotes (42, 42.0, "42", "42.0"), or None when it is not integral."""
    x = to_number(value)
    if x is None or abs(x - round(x)) > _EPS * max(1.0, abs(x)):
        return None
    return int(round(x))


def within_relative(value: Any, gold: Any, rel: float) -> bool:
    """True when value is a number within ``rel`` of gold, relative to |gold| (inclusive)."""
    x, g = to_number(value), to_number(gold)
    if x is None or g is None:
        return False
    return math.isclose(x, g, rel_tol=0.0, abs_tol=rel * abs(g) + _EPS * max(1.0, abs(g)))
