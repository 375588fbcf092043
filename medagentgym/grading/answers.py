"""Turning an execution into a submitted answer, and comparing scalar values.

The submitted answer is the value of ``answer`` captured by the sandbox (a repr of plain Python), else
the last non-empty stdout line. A failed execution has no answer: a traceback never passes.
"""

from __future__ import annotations

import ast
import math
from typing import Any

from medagentgym.types import ExecResult

NO_ANSWER = object()


def submitted_answer(result: ExecResult) -> Any:
    """The value the agent submitted, or NO_ANSWER. Python values come back parsed when they are literals."""
    if not result.ok:
        return NO_ANSWER
    if result.answer is not None:
        return parse_literal(result.answer)
    lines = [ln.strip() for ln in result.stdout.splitlines() if ln.strip()]
    if not lines:
        return NO_ANSWER
    return parse_literal(lines[-1])


def parse_literal(text: str) -> Any:
    """ast.literal_eval when the text is a Python literal, else the stripped text itself."""
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text.strip()


def to_number(value: Any) -> float | None:
    """A finite float for numbers and numeric strings ("2", "2.0", "1,234", " 3e2 "); None otherwise.

    Booleans are not numbers here: True must not pass for 1.
    """
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        x = float(value)
    elif isinstance(value, str):
        s = value.strip().replace(",", "")
        if not s or s.lower() in {"nan", "inf", "-inf", "infinity", "-infinity"}:
            return None
        try:
            x = float(s)
        except ValueError:
            return None
    else:
        return None
    return x if math.isfinite(x) else None


def numbers_equal(a: Any, b: Any, rel_tol: float = 1e-9, abs_tol: float = 1e-9) -> bool:
    x, y = to_number(a), to_number(b)
    return x is not None and y is not None and math.isclose(x, y, rel_tol=rel_tol, abs_tol=abs_tol)
