"""Constrained decoding: make the server only able to emit one of the task's permitted actions as JSON.

Modes (``model.constrained``), each for the servers that understand it:
- ``grammar``: a GBNF grammar in the request's ``grammar`` field (llama.cpp: llama-cpp-python's server and
  llama-server). Our own grammar, because llama-cpp-python's JSON-schema converter lets raw control
  characters into strings, so its output can fail ``json.loads``; ours only admits escaped ones.
- ``json_object``: ``response_format={"type": "json_object", "schema": ...}`` (llama-cpp-python's server;
  it rejects the ``json_schema`` type). Subject to the raw-newline problem above.
- ``json_schema``: ``response_format={"type": "json_schema", ...}`` (vLLM, SGLang, llama-server).
- ``guided_json``: the schema in ``extra_body["guided_json"]`` (vLLM's guided decoding).

Every string is bounded so that the longest permitted action still fits in ``model.max_new_tokens``
(assuming at least one character per token): a small model cannot ramble past the token cap and leave a
truncated, unparseable reply.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from medagentgym.agent.actions import ACTIONS, action_schema
from medagentgym.config import ModelConfig
from medagentgym.errors import UserError
from medagentgym.llm.client import ChatModel, OpenAIChatModel
from medagentgym.types import Completion

MODES = ("none", "grammar", "json_object", "json_schema", "guided_json")
# Tokens reserved for the JSON around the strings ({"action": ..., "params": {...}}).
_FRAME_TOKENS = 48
_MIN_STRING = 16

# A JSON string character: anything but a quote, a backslash or a control character, or an escape.
_CHAR_RULE = r'char ::= [^"\\\x00-\x1F\x7F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})'


def string_bound(max_new_tokens: int, n_params: int) -> int:
    """The longest string each of an action's ``n_params`` params may hold within ``max_new_tokens``."""
    return max(_MIN_STRING, (max_new_tokens - _FRAME_TOKENS) // max(1, n_params))


def _check(actions: list[str]) -> None:
    unknown = [a for a in actions if a not in ACTIONS]
    if not actions or unknown:
        raise UserError(
            f"Constrained decoding needs the task's permitted actions, got {actions!r}; each must be one of "
            f"{', '.join(ACTIONS)}. Fix task.actions."
        )


def schema_for(actions: list[str], max_new_tokens: int) -> dict[str, Any]:
    """JSON schema accepting one permitted action, each string bounded per ``string_bound``."""
    _check(actions)
    variants = [action_schema([a], string_bound(max_new_tokens, len(ACTIONS[a].params))) for a in actions]
    return variants[0] if len(variants) == 1 else {"anyOf": variants}


def _literal(text: str) -> str:
    """A GBNF literal matching ``text`` exactly."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def grammar_for(actions: list[str], max_new_tokens: int) -> str:
    """GBNF accepting exactly ``{"action": NAME, "params": {KEY: STRING, ...}}`` for a permitted action."""
    _check(actions)
    rules, alternatives, bounds = [], [], set()
    for name in actions:
        keys = list(ACTIONS[name].params)
        bound = string_bound(max_new_tokens, len(keys))
        bounds.add(bound)
        parts = [_literal('{"action": ' + json.dumps(name) + ', "params": {')]
        for i, key in enumerate(keys):
            parts += [_literal((", " if i else "") + json.dumps(key) + ": "), f"str{bound}"]
        parts.append(_literal("}}"))
        rule = "act-" + name.replace("_", "-")
        rules.append(f"{rule} ::= " + " ".join(parts))
        alternatives.append(rule)
    strings = [f'str{b} ::= "\\"" char{{0,{b}}} "\\""' for b in sorted(bounds)]
    return "\n".join(["root ::= " + " | ".join(alternatives), *rules, *strings, _CHAR_RULE]) + "\n"


def constrained_request(cfg: ModelConfig, actions: list[str]) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """(response_format, extra_body additions) for ``cfg.constrained``."""
    mode = cfg.constrained
    if mode not in MODES:
        raise UserError(
            f"model.constrained={mode!r} is unknown; use one of {', '.join(MODES)} (grammar for llama.cpp "
            "servers, json_schema or guided_json for vLLM, none to switch it off)."
        )
    if mode == "none":
        return None, {}
    if mode == "grammar":
        return None, {"grammar": grammar_for(actions, cfg.max_new_tokens)}
    schema = schema_for(actions, cfg.max_new_tokens)
    if mode == "json_object":
        return {"type": "json_object", "schema": schema}, {}
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": "agent_action", "schema": schema}}, {}
    return None, {"guided_json": schema}


def apply_constrained_decoding(model: ChatModel, cfg: ModelConfig, actions: list[str]) -> None:
    """Set ``model``'s request fields so every reply is one of ``actions`` as JSON. Call once per run.

    Models that do not talk to a server (the oracle) are left alone: they already answer in action JSON.
    """
    response_format, extra = constrained_request(cfg, actions)
    if not isinstance(model, OpenAIChatModel):
        return
    model.response_format = response_format
    model.extra_body = {**model.extra_body, **extra}


class UnconstrainedView:
    """The same model and connection without constrained decoding, e.g. for the ``debug`` action's
    free-text answers when the debugger is the agent's own model. Closing it leaves the model open: one
    local server serves both, and its owner closes it.
    """

    def __init__(self, model: OpenAIChatModel):
        self._model = copy.copy(model)
        self._model.response_format = None
        self._model.extra_body = dict(model.cfg.extra_body or {})

    def complete(self, messages: list[dict[str, str]], *, temperature: float | None = None,
                 context: Any = None) -> Completion:
        return self._model.complete(messages, temperature=temperature, context=context)

    def close(self) -> None:
        pass


def unconstrained(model: ChatModel) -> ChatModel:
    """``model`` without constrained decoding; models that do not talk to a server are returned as they are."""
    return UnconstrainedView(model) if isinstance(model, OpenAIChatModel) else model
