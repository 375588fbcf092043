"""Model reply -> Action. Tolerant of how models actually write JSON, strict about what it means.

Accepted: a JSON object ``{"action": NAME, "params": {...}}`` bare or in a ``` fence, possibly after a
thinking block or prose, with raw newlines/tabs inside strings (models paste code that way). Enforced:
the action is one the task permits and the params have exactly that action's keys, all strings.
Anything else raises ParseError whose message tells the model precisely what to fix.
"""

from __future__ import annotations

import json
import re

from medagentgym.agent.actions import ACTIONS
from medagentgym.types import Action

_THINK = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


class ParseError(ValueError):
    """The reply is not a usable action; str(self) is shown to the model."""


def _escape_raw_controls(text: str) -> str:
    """Escape raw newlines, CRs and tabs that appear inside JSON string literals."""
    out, in_str, escaped = [], False, False
    for ch in text:
        if in_str:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_str = False
            elif ch == "\n":
                ch = "\\n"
            elif ch == "\r":
                ch = "\\r"
            elif ch == "\t":
                ch = "\\t"
        elif ch == '"':
            in_str = True
        out.append(ch)
    return "".join(out)


_DECODER = json.JSONDecoder()


def _decode_at(text: str, i: int) -> object:
    """The JSON value starting at text[i]; raw control characters inside its strings are tolerated."""
    try:
        return _DECODER.raw_decode(text, i)[0]
    except json.JSONDecodeError:
        return _DECODER.raw_decode(_escape_raw_controls(text[i:]))[0]


def _candidates(text: str):
    """Where a JSON object may start: fenced blocks first, then every '{' of the reply."""
    for block in _FENCE.findall(text):
        block = block.strip()
        if block.startswith("{"):
            yield block, 0
    i = text.find("{")
    while i != -1:
        yield text, i
        i = text.find("{", i + 1)


def parse_action(reply: str, permitted: list[str]) -> Action:
    text = _THINK.sub("", reply or "").strip()
    if not text:
        raise ParseError("Your reply was empty. Reply with one JSON object: " + _format_hint(permitted))
    obj, last_error = None, None
    for source, start in _candidates(text):
        try:
            loaded = _decode_at(source, start)
        except json.JSONDecodeError as exc:
            last_error = exc
            continue
        if isinstance(loaded, dict) and "action" in loaded:
            obj = loaded
            break
    if obj is None:
        detail = f" (JSON error: {last_error.msg} at position {last_error.pos})" if last_error else ""
        raise ParseError(
            f"Could not find a JSON object with an \"action\" key in your reply{detail}. "
            "Reply with exactly one JSON object: " + _format_hint(permitted)
        )
    name = obj.get("action")
    if not isinstance(name, str) or name not in permitted:
        raise ParseError(f"Unknown action {name!r}. Permitted actions: {', '.join(permitted)}.")
    params = obj.get("params")
    if not isinstance(params, dict):
        raise ParseError(f'"params" must be a JSON object for {name}: ' + _format_hint([name]))
    expected = set(ACTIONS[name].params)
    missing, extra = sorted(expected - params.keys()), sorted(params.keys() - expected)
    if missing or extra:
        parts = [f"missing {missing}" if missing else "", f"unexpected {extra}" if extra else ""]
        raise ParseError(
            f"Wrong params for {name}: {'; '.join(p for p in parts if p)}. " + _format_hint([name])
        )
    bad = sorted(k for k, v in params.items() if not isinstance(v, str))
    if bad:
        raise ParseError(f"Params {bad} of {name} must be strings.")
    return Action(name=name, params=params)


def _format_hint(names: list[str]) -> str:
    return " or ".join(
        json.dumps({"action": n, "params": {k: "..." for k in ACTIONS[n].params}}) for n in names
    )
