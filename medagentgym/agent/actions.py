"""The actions an agent may take: names, exact parameter keys, descriptions and a JSON schema.

A task permits a subset (``task.actions``). The system prompt, the reply parser and constrained
decoding all read this one table.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ActionSpec:
    name: str
    description: str
    params: dict[str, str]  # key -> description; every key is a required string
    example: dict[str, str]


ACTIONS: dict[str, ActionSpec] = {
    spec.name: spec
    for spec in (
        ActionSpec(
            "validate_code",
            "Run Python code in your sandbox and submit it as your solution. Put your final result in a "
            "variable named `answer`; the run's output and the verdict on `answer` come back to you.",
            {"code": "complete Python source to run"},
            {"code": "answer = 1 + 1"},
        ),
        ActionSpec(
            "debug",
            "Ask a debugging assistant to explain an error in your code and suggest a fix.",
            {"code": "the code that failed", "error_msg": "the error it produced"},
            {"code": "x = [1][2]", "error_msg": "IndexError: list index out of range"},
        ),
        ActionSpec(
            "terminal",
            "Run one shell command in your sandbox workspace (e.g. `ls`, `pip install pkg`).",
            {"cmd": "the shell command"},
            {"cmd": "ls -la"},
        ),
        ActionSpec(
            "request_info",
            "Look up the task's data: info_type `column_names` (keyterm = a table name), `column_values` "
            "(keyterm = table.column) or `term` (keyterm = a word to find in any table).",
            {"info_type": "column_names | column_values | term", "keyterm": "what to look up"},
            {"info_type": "term", "keyterm": "aspirin"},
        ),
    )
}


def describe_actions(names: list[str]) -> str:
    """Prompt text: each permitted action with its exact JSON format."""
    parts = []
    for name in names:
        spec = ACTIONS[name]
        example = json.dumps({"action": name, "params": spec.example})
        keys = ", ".join(f'"{k}" ({v})' for k, v in spec.params.items())
        parts.append(f"- {name}: {spec.description}\n  params: {keys}\n  format: {example}")
    return "\n".join(parts)


def action_schema(names: list[str], max_string_length: int | None = None) -> dict[str, Any]:
    """A JSON schema accepting exactly one permitted action with its exact param keys."""

    def string() -> dict[str, Any]:
        s: dict[str, Any] = {"type": "string"}
        if max_string_length:
            s["maxLength"] = max_string_length
        return s

    variants = []
    for name in names:
        spec = ACTIONS[name]
        variants.append(
            {
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": [name]},
                    "params": {
                        "type": "object",
                        "properties": {k: string() for k in spec.params},
                        "required": list(spec.params),
                        "additionalProperties": False,
                    },
                },
                "required": ["action", "params"],
                "additionalProperties": False,
            }
        )
    return variants[0] if len(variants) == 1 else {"anyOf": variants}
