import json

import pytest

from medagentgym.agent.parser import ParseError, parse_action

ALL = ["validate_code", "debug", "terminal", "request_info"]


def test_bare_json():
    a = parse_action('{"action": "validate_code", "params": {"code": "answer = 1"}}', ALL)
    assert (a.name, a.params) == ("validate_code", {"code": "answer = 1"})


def test_fenced_after_thinking_and_prose():
    reply = (
        "<think>I should use {braces} and \"quotes\" here</think>\nLet me run it:\n"
        '```json\n{"action": "terminal", "params": {"cmd": "ls"}}\n```'
    )
    assert parse_action(reply, ALL).params == {"cmd": "ls"}


def test_raw_newlines_and_tabs_inside_code_string():
    reply = (
        '{"action": "validate_code", "params": {"code": '
        '"import os\nfor x in range(3):\n\tprint({x: \\"}\\"})\nanswer = 2"}}'
    )
    a = parse_action(reply, ALL)
    assert a.params["code"] == 'import os\nfor x in range(3):\n\tprint({x: "}"})\nanswer = 2'


def test_picks_the_object_with_an_action_key():
    reply = 'Schema: {"a": 1}. Now: {"action": "validate_code", "params": {"code": "d = {1: {2: 3}}"}}'
    assert parse_action(reply, ALL).params["code"] == "d = {1: {2: 3}}"


@pytest.mark.parametrize(
    "reply, fragment",
    [
        ("", "empty"),
        ("I will now compute the answer.", 'with an "action" key'),
        ('{"action": "rm_rf", "params": {}}', "Unknown action 'rm_rf'"),
        ('{"action": "validate_code"}', '"params" must be a JSON object'),
        ('{"action": "validate_code", "params": {"source": "x"}}', "missing ['code']; unexpected ['source']"),
        ('{"action": "validate_code", "params": {"code": 5}}', "must be strings"),
        ('{"action": "validate_code", "params": {"code": "x"', 'with an "action" key'),
    ],
)
def test_bad_replies_explain_what_is_wrong(reply, fragment):
    with pytest.raises(ParseError) as err:
        parse_action(reply, ALL)
    assert fragment in str(err.value)


def test_action_not_permitted_by_task():
    with pytest.raises(ParseError, match="Permitted actions: validate_code"):
        parse_action(json.dumps({"action": "terminal", "params": {"cmd": "ls"}}), ["validate_code"])


def test_stray_quote_and_braces_in_prose_before_the_action():
    reply = 'He said "hi and set {x} then: {"action": "terminal", "params": {"cmd": "echo \\"{}\\""}}'
    assert parse_action(reply, ALL).params == {"cmd": 'echo "{}"'}
