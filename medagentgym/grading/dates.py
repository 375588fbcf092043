"""Calendar answers: dates written as MM/DD/YYYY (or ISO), and durations written as (weeks, days).

Parsers accept the whole value or nothing: a sentence or a list that merely contains a date is not a date.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

_US = re.compile(r"(\d{1,2})/(\d{1,2})/(\d{4})")
_ISO = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})")
# repr() of a date or datetime, which is what the sandbox captures when `answer` holds one.
_REPR = re.compile(r"datetime\.(?:date|datetime)\((\d{4}),\s*(\d{1,2}),\s*(\d{1,2})(?:,[\d,\s]*)?\)")
_WEEKS = re.compile(r"(\d+)\s*(?:weeks?|wks?|w)?", re.I)
_DAYS = re.compile(r"(\d+)\s*(?:days?|d)?", re.I)
_WEEKS_DAYS_TEXT = re.compile(r"\(?\s*'?(\d+)\s*(?:weeks?|wks?|w)?'?\s*,\s*'?(\d+)\s*(?:days?|d)?'?\s*\)?", re.I)


def parse_date(value: Any) -> dt.date | None:
    """A date from "MM/DD/YYYY", "M/D/YYYY", "YYYY-MM-DD", a date's repr, or a date object; else None."""
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if not isinstance(value, str):
        return None
    text = value.strip()
    for pattern, order in ((_US, (2, 0, 1)), (_ISO, (0, 1, 2)), (_REPR, (0, 1, 2))):
        m = pattern.fullmatch(text)
        if m:
            parts = [int(g) for g in m.groups()]
            try:
                return dt.date(parts[order[0]], parts[order[1]], parts[order[2]])
            except ValueError:
                return None
    return None


def parse_weeks_days(value: Any) -> int | None:
    """Total days of a (weeks, days) answer: ('4 weeks', '3 days'), (4, 3), "(4 weeks, 3 days)"; else None."""
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            return None
        weeks, days = (_count(v, pat) for v, pat in zip(value, (_WEEKS, _DAYS), strict=True))
    elif isinstance(value, str):
        m = _WEEKS_DAYS_TEXT.fullmatch(value.strip())
        if not m:
            return None
        weeks, days = int(m.group(1)), int(m.group(2))
    else:
        return None
    if weeks is None or days is None:
        return None
    return 7 * weeks + days


def _count(value: Any, pattern: re.Pattern) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float):
        return int(value) if value.is_integer() and value >= 0 else None
    if isinstance(value, str):
        m = pattern.fullmatch(value.strip())
        return int(m.group(1)) if m else None
    return None


def format_us_date(day: dt.date) -> str:
    return day.strftime("%m/%d/%Y")
