"""Constrained decoding request fields, sent over HTTP by the real openai client to the scripted server."""

import pytest

from medagentgym.agent.actions import ACTIONS
from medagentgym.config import ModelConfig
from medagentgym.errors import UserError
from medagentgym.llm import OpenAIChatModel
from medagentgym.llm.constrained import (
    apply_constrained_decoding,
    grammar_for,
    schema_for,
    string_bound,
    unconstrained,
)
from medagentgym.llm.oracle import OracleModel
from medagentgym.llm.providers import make_client
from medagentgym.llm.scripted_server import Reply

ALL = list(ACTIONS)
MSGS = [{"role": "user", "content": "hi"}]


def constrained_model(url, mode, actions, max_new_tokens=512, extra_body=None):
    cfg = ModelConfig(provider="openai_compatible", name="m", base_url=url, constrained=mode,
                      max_new_tokens=max_new_tokens, extra_body=extra_body or {}, n_retry=0)
    model = OpenAIChatModel(cfg, make_client(cfg, None))
    apply_constrained_decoding(model, cfg, actions)
    return model


def sent_body(url, mode, actions, max_new_tokens=512, extra_body=None):
    """One request after apply_constrained_decoding; the tests read what the server received."""
    model = constrained_model(url, mode, actions, max_new_tokens, extra_body)
    model.complete(MSGS)
    model.close()


@pytest.fixture
def server(scripted_server):
    return scripted_server(lambda body: Reply('{"action": "terminal", "params": {"cmd": "ls"}}'))


def variants(schema):
    return schema.get("anyOf", [schema])


def test_grammar_mode_sends_a_grammar_and_keeps_config_extra_body(server):
    sent_body(server.url, "grammar", ["validate_code", "terminal"], extra_body={"top_k": 1})
    body = server.requests[-1]
    assert body["top_k"] == 1
    assert "response_format" not in body
    grammar = body["grammar"]
    assert grammar.startswith("root ::= act-validate-code | act-terminal\n")
    assert "debug" not in grammar and "request_info" not in grammar


@pytest.mark.parametrize("mode,where", [("json_object", "response_format"), ("json_schema", "response_format"),
                                         ("guided_json", "guided_json")])
def test_schema_modes_carry_exactly_the_permitted_actions(server, mode, where):
    sent_body(server.url, mode, ["debug", "terminal"])
    body = server.requests[-1]
    if mode == "json_object":
        assert body["response_format"]["type"] == "json_object"
        schema = body["response_format"]["schema"]
    elif mode == "json_schema":
        assert body["response_format"]["type"] == "json_schema"
        schema = body["response_format"]["json_schema"]["schema"]
    else:
        assert "response_format" not in body
        schema = body[where]
    names = [v["properties"]["action"]["enum"] for v in variants(schema)]
    assert names == [["debug"], ["terminal"]]
    for v in variants(schema):
        params = v["properties"]["params"]
        assert sorted(params["required"]) == sorted(ACTIONS[v["properties"]["action"]["enum"][0]].params)
        assert params["additionalProperties"] is False


def test_none_sends_nothing_extra(server):
    sent_body(server.url, "none", ALL)
    body = server.requests[-1]
    assert not {"grammar", "response_format", "guided_json"} & set(body)


@pytest.mark.parametrize("max_new_tokens", [200, 1024, 8192])
def test_string_bounds_fit_every_action_in_the_token_budget(max_new_tokens):
    schema = schema_for(ALL, max_new_tokens)
    for v in variants(schema):
        lengths = [p["maxLength"] for p in v["properties"]["params"]["properties"].values()]
        assert sum(lengths) < max_new_tokens
        assert min(lengths) >= string_bound(max_new_tokens, len(lengths))
    grammar = grammar_for(ALL, max_new_tokens)
    for n_params in {len(s.params) for s in ACTIONS.values()}:
        assert f"char{{0,{string_bound(max_new_tokens, n_params)}}}" in grammar


def test_grammar_string_rule_admits_no_raw_control_characters():
    # The rule llama-cpp-python gets wrong: a raw newline inside a string makes json.loads fail.
    char_rule = next(line for line in grammar_for(ALL, 512).splitlines() if line.startswith("char ::="))
    assert char_rule.startswith(r'char ::= [^"\\\x00-\x1F\x7F] | "\\" ')


def test_unknown_mode_and_unknown_action_are_user_errors():
    cfg = ModelConfig(provider="local", name="m", constrained="regex")
    with pytest.raises(UserError, match="model.constrained='regex' is unknown"):
        apply_constrained_decoding(OracleModel(None), cfg, ALL)
    cfg = ModelConfig(provider="local", name="m", constrained="grammar")
    with pytest.raises(UserError, match="task.actions"):
        apply_constrained_decoding(OracleModel(None), cfg, ["validate_code", "rm_rf"])


def test_models_without_a_server_are_left_alone():
    oracle = OracleModel(None)
    apply_constrained_decoding(oracle, ModelConfig(provider="oracle", name="o", constrained="grammar"), ALL)
    assert not hasattr(oracle, "extra_body")


def test_unconstrained_view_shares_the_connection_without_the_constraint(server):
    model = constrained_model(server.url, "grammar", ALL, extra_body={"top_k": 1})
    view = unconstrained(model)
    view.complete(MSGS)
    assert "grammar" not in server.requests[-1] and server.requests[-1]["top_k"] == 1
    view.close()
    model.complete(MSGS)  # the model (and its server) stay open after the view is closed
    assert "grammar" in server.requests[-1]
    model.close()
    oracle = OracleModel(None)
    assert unconstrained(oracle) is oracle
