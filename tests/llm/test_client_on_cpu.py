"""The chat client against a real HTTP server: retries, Retry-After, usage, cost, request parameters."""

import itertools
import time

import pytest

from medagentgym.config import ModelConfig
from medagentgym.errors import CredentialsError
from medagentgym.llm import LLMError, OpenAIChatModel
from medagentgym.llm.providers import make_client
from medagentgym.llm.scripted_server import Reply

MSGS = [{"role": "user", "content": "hi"}]


def sequence(*replies):
    it = itertools.chain(replies, itertools.repeat(Reply("final")))
    return lambda body: next(it)


def client_for(url, sleeps=None, **kw):
    cfg = ModelConfig(provider="openai_compatible", name="m", base_url=url, retry_delay=0.001,
                      max_retry_delay=30.0, request_timeout=5.0, **kw)
    sleep = sleeps.append if sleeps is not None else (lambda s: None)
    return OpenAIChatModel(cfg, make_client(cfg, None), sleep=sleep)


def test_retries_429_500_garbage_and_drop_then_succeeds(scripted_server):
    srv = scripted_server(sequence(Reply(status=429, headers={"retry-after": "2"}), Reply(status=500),
                                   Reply(raw_body=b"<html>bad gateway</html>"), Reply(drop=True)))
    sleeps = []
    out = client_for(srv.url, sleeps, n_retry=4).complete(MSGS)
    assert out.text == "final" and out.retries == 4
    assert len(srv.requests) == 5
    assert sleeps[0] >= 2.0  # Retry-After honoured over a tiny backoff


def test_gives_up_after_n_retry(scripted_server):
    srv = scripted_server(lambda body: Reply(status=503))
    with pytest.raises(LLMError, match="after 2 retries"):
        client_for(srv.url, n_retry=2).complete(MSGS)
    assert len(srv.requests) == 3


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_no_retry_on_other_4xx(scripted_server, status):
    srv = scripted_server(lambda body: Reply(status=status))
    with pytest.raises(LLMError, match="not retryable"):
        client_for(srv.url, n_retry=3).complete(MSGS)
    assert len(srv.requests) == 1


def test_per_call_timeout_is_retried(scripted_server):
    srv = scripted_server(sequence(Reply("slow", delay=2.0)))
    cfg_client = client_for(srv.url, n_retry=1)
    cfg_client.client = cfg_client.client.with_options(timeout=0.3)
    t0 = time.monotonic()
    assert cfg_client.complete(MSGS).text == "final"
    assert time.monotonic() - t0 < 1.9


def test_usage_and_cost_recorded(scripted_server):
    srv = scripted_server(lambda body: Reply("ok", usage=(1000, 500)))
    out = client_for(srv.url, price_prompt_per_mtok=2.0, price_completion_per_mtok=8.0).complete(MSGS)
    assert (out.usage.prompt_tokens, out.usage.completion_tokens) == (1000, 500)
    assert out.usage.cost == pytest.approx(1000 * 2e-6 + 500 * 8e-6)


def test_reasoning_model_params_come_from_config(scripted_server):
    srv = scripted_server(lambda body: Reply("ok"))
    client_for(srv.url, temperature=None, max_tokens_param="max_completion_tokens", max_new_tokens=77,
               reasoning_effort="low").complete(MSGS, temperature=0.6)
    body = srv.requests[0]
    assert "temperature" not in body and "max_tokens" not in body
    assert body["max_completion_tokens"] == 77 and body["reasoning_effort"] == "low"


def test_rollout_temperature_overrides_config(scripted_server):
    srv = scripted_server(lambda body: Reply("ok"))
    c = client_for(srv.url, temperature=0.0)
    c.complete(MSGS)
    c.complete(MSGS, temperature=0.6)
    assert [r["temperature"] for r in srv.requests] == [0.0, 0.6]


def test_missing_key_names_the_variable(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(CredentialsError, match="OPENAI_API_KEY"):
        make_client(ModelConfig(provider="openai", name="gpt-4o", api_key_env="OPENAI_API_KEY"), None)


def test_credentials_file(tmp_path, monkeypatch, scripted_server):
    monkeypatch.delenv("MY_TEST_KEY", raising=False)
    creds = tmp_path / "creds.toml"
    creds.write_text('MY_TEST_KEY = "sk-test-0123456789"\n')
    srv = scripted_server(lambda body: Reply("ok"))
    cfg = ModelConfig(provider="openai_compatible", name="m", base_url=srv.url, api_key_env="MY_TEST_KEY")
    assert make_client(cfg, str(creds)).api_key == "sk-test-0123456789"


@pytest.mark.parametrize("content, fragment", [("KEY = unquoted value", "not valid TOML"),
                                               ("KEY = 5", "quoted strings")])
def test_bad_credentials_file(tmp_path, content, fragment):
    creds = tmp_path / "creds.toml"
    creds.write_text(content)
    cfg = ModelConfig(provider="openai_compatible", name="m", base_url="http://127.0.0.1:1/v1", api_key_env="KEY")
    with pytest.raises(CredentialsError, match=fragment):
        make_client(cfg, str(creds))


def test_azure_provider_talks_to_the_deployment(scripted_server, monkeypatch):
    srv = scripted_server(lambda body: Reply("ok"))
    monkeypatch.setenv("AZ_KEY", "az-secret-key-123")
    cfg = ModelConfig(provider="azure", name="my-deploy", azure_endpoint=srv.url.removesuffix("/v1"),
                      api_key_env="AZ_KEY", api_version="2024-10-21")
    client = make_client(cfg, None)
    assert OpenAIChatModel(cfg, client).complete(MSGS).text == "ok"
    assert srv.paths[0].startswith("/openai/deployments/my-deploy/chat/completions")
