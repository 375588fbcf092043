"""The agent/environment loop against the scripted server through the real openai client."""

import itertools
import json

import pytest

from medagentgym.config import EnvConfig, ModelConfig, SandboxConfig, TaskConfig
from medagentgym.llm import OpenAIChatModel
from medagentgym.llm.providers import make_client
from medagentgym.llm.scripted_server import Reply
from medagentgym.runner.episode import EpisodeSettings, fit_context, run_episode
from medagentgym.tasks.sample import ensure_sample
from tests.support.arith_task import ArithTask


def act(code):
    return Reply(json.dumps({"action": "validate_code", "params": {"code": code}}))


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    d = ensure_sample(ArithTask, tmp_path_factory.mktemp("data") / "arith")
    return ArithTask(TaskConfig(name="arith", impl="x", actions=["validate_code", "terminal"]), d)


def episode(task, url, num_steps=4, reveal=True, **model_kw):
    cfg = ModelConfig(provider="openai_compatible", name="m", base_url=url, retry_delay=0.001, n_retry=1,
                      **model_kw)
    model = OpenAIChatModel(cfg, make_client(cfg, None))
    settings = EpisodeSettings(env=EnvConfig(num_steps=num_steps, reveal_verdict=reveal),
                               sandbox=SandboxConfig(timeout=20), model_name="m", max_input_tokens=8192,
                               base_temperature=0.0, rollout_temperature=0.6, config_hash="h", run_name="r")
    inst = task.load("test")[0]
    return inst, run_episode(task, inst, 0, model, None, settings)


def scripted(*replies):
    it = itertools.chain(replies, itertools.repeat(replies[-1]))
    return lambda body: next(it)


def test_wrong_then_right_with_verdict_revealed(task, scripted_server):
    inst = task.load("test")[0]
    srv = scripted_server(scripted(act("answer = 123456"), act(f"answer = {inst.record['answer']}")))
    _, r = episode(task, srv.url)
    assert r.status == "success" and len(r.steps) == 2
    second_request = srv.requests[1]["messages"]
    assert "Verdict: your answer is not correct" in second_request[-1]["content"]
    assert "123456" not in second_request[-1]["content"].split("Verdict")[1]  # the reason is never shown
    assert r.messages[-1]["role"] == "assistant" and r.usage["llm_calls"] == 2


def test_grader_feedback_is_shown_but_never_the_reason(task, scripted_server):
    inst = task.load("test")[0]
    srv = scripted_server(scripted(act("answer = 'abc'"), act("answer = 999999"),
                                   act(f"answer = {inst.record['answer']}")))
    _, r = episode(task, srv.url)
    assert r.status == "success"
    assert "The answer must be a number." in srv.requests[1]["messages"][-1]["content"]
    assert f"expected {inst.record['answer']}" in r.steps[1]["verdict"]["reason"]
    assert "expected" not in srv.requests[2]["messages"][-1]["content"]


def test_verdict_hidden_when_configured(task, scripted_server):
    srv = scripted_server(scripted(act("answer = 123456")))
    _, r = episode(task, srv.url, num_steps=2, reveal=False)
    assert r.status == "wrong_answer"
    assert all("Verdict" not in m["content"] for m in srv.requests[1]["messages"])


def test_traceback_never_passes(task, scripted_server):
    inst = task.load("test")[0]
    code = f"print({inst.record['answer']})\nraise RuntimeError('boom')"
    srv = scripted_server(scripted(act(code)))
    _, r = episode(task, srv.url, num_steps=2)
    assert r.status == "wrong_answer" and r.steps[0]["exec_status"] == "error"


def test_unparseable_replies_are_observations_then_parse_failure(task, scripted_server):
    srv = scripted_server(scripted(Reply("I think the answer is 4.")))
    _, r = episode(task, srv.url, num_steps=3)
    assert r.status == "parse_failure" and len(r.steps) == 3
    assert 'with an "action" key' in srv.requests[1]["messages"][-1]["content"]
    assert r.loop  # the same reply three times


def test_step_budget_without_an_answer(task, scripted_server):
    srv = scripted_server(scripted(Reply(json.dumps({"action": "terminal", "params": {"cmd": "echo hi"}}))))
    _, r = episode(task, srv.url, num_steps=2)
    assert r.status == "step_budget" and "hi" in r.steps[0]["observation"]


def test_persistent_server_error_is_llm_error_not_wrong(task, scripted_server):
    srv = scripted_server(lambda body: Reply(status=500))
    _, r = episode(task, srv.url)
    assert r.status == "llm_error" and r.outcome["score"] == 0.0


def test_secret_echoed_by_the_model_is_redacted(task, scripted_server, monkeypatch):
    from medagentgym.secrets import get_secret

    monkeypatch.setenv("SECRET_FOR_TEST", "sk-very-secret-value-42")
    get_secret("SECRET_FOR_TEST")
    srv = scripted_server(scripted(act("print('sk-very-secret-value-42')\nanswer = 0")))
    _, r = episode(task, srv.url, num_steps=1)
    assert "sk-very-secret-value-42" not in r.to_json()


def test_agent_code_does_not_see_api_keys(task, scripted_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-never-leak-1234")
    srv = scripted_server(scripted(act("import os\nprint(sorted(os.environ.items()))\nanswer = 0")))
    _, r = episode(task, srv.url, num_steps=1)
    assert "sk-should-never-leak" not in r.to_json()
    assert "OPENAI_API_KEY" not in r.steps[0]["observation"]


def test_fit_context_keeps_system_and_goal():
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "goal"}]
    for i in range(20):
        msgs += [{"role": "assistant", "content": "a" * 400}, {"role": "user", "content": f"obs {i}"}]
    out = fit_context(msgs, 500)
    assert out[0] == msgs[0] and out[1]["content"].startswith("goal") and "omitted" in out[1]["content"]
    assert out[-1] == msgs[-1] and len(out) < len(msgs)
    roles = [m["role"] for m in out[1:]]
    assert all(a != b for a, b in zip(roles, roles[1:]))


def test_validate_code_runs_the_tasks_program_around_the_submission(task):
    from medagentgym.env.actions import Environment
    from medagentgym.sandbox import create_sandbox
    from medagentgym.types import Action

    class WithSetup(ArithTask):
        def program(self, inst, code):
            return f"base = {inst.record['answer'] - 1}\n{code}"

    t = WithSetup(task.cfg, task.data_dir)
    inst = t.load("test")[0]
    with create_sandbox(SandboxConfig(timeout=20), t.sandbox_spec(inst)) as sb:
        obs = Environment(t, inst, sb, None, 4000).step(Action("validate_code", {"code": "answer = base + 1"}))
    assert obs.exec.status == "ok" and obs.verdict.correct


def test_episode_wall_clock_limit_bounds_a_long_execution(task, scripted_server):
    import time

    from medagentgym.config import ModelConfig as MC

    srv = scripted_server(scripted(act("import time\ntime.sleep(30)\nanswer = 0")))
    cfg = MC(provider="openai_compatible", name="m", base_url=srv.url, n_retry=0)
    settings = EpisodeSettings(env=EnvConfig(num_steps=5, max_episode_seconds=2.0),
                               sandbox=SandboxConfig(timeout=60), model_name="m", max_input_tokens=8192,
                               base_temperature=0.0, rollout_temperature=0.6, config_hash="h", run_name="r")
    t0 = time.monotonic()
    r = run_episode(task, task.load("test")[0], 0, OpenAIChatModel(cfg, make_client(cfg, None)), None, settings)
    assert time.monotonic() - t0 < 10
    assert r.status == "timeout" and r.steps[0]["exec_status"] == "timeout"
