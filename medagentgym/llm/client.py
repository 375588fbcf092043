"""One chat client over the official ``openai`` package, with our own bounded retry loop.

The SDK's built-in retries are switched off so that every provider gets the same policy: exponential
backoff with jitter on 429, 5xx, timeouts and dropped connections, honouring Retry-After; no retry on
any other 4xx. Request parameters come from the model config, never from the model's name.
"""

from __future__ import annotations

import email.utils
import logging
import random
import time
from collections.abc import Callable
from typing import Any, Protocol

import openai

from medagentgym.config import ModelConfig
from medagentgym.types import Completion, Usage

log = logging.getLogger(__name__)


class LLMError(Exception):
    """The model endpoint failed (after retries, or with a non-retryable error). Infrastructure."""


class ChatModel(Protocol):
    def complete(
        self, messages: list[dict[str, str]], *, temperature: float | None = None, context: Any = None
    ) -> Completion: ...

    def close(self) -> None: ...


def retry_after_seconds(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


def is_retryable(exc: Exception) -> bool:
    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    # A 200 whose body is not a chat completion (a proxy's HTML page, a truncated body).
    return isinstance(exc, (openai.APIResponseValidationError, ValueError))


class OpenAIChatModel:
    """Chat completions through an ``openai.OpenAI`` (or ``AzureOpenAI``) client."""

    def __init__(self, cfg: ModelConfig, client: openai.OpenAI, sleep: Callable[[float], None] = time.sleep):
        self.cfg = cfg
        self.client = client
        self._sleep = sleep
        self.response_format: dict[str, Any] | None = None
        self.extra_body: dict[str, Any] = dict(cfg.extra_body or {})

    def request_kwargs(self, temperature: float | None) -> dict[str, Any]:
        cfg = self.cfg
        kwargs: dict[str, Any] = {"model": cfg.name, cfg.max_tokens_param: cfg.max_new_tokens}
        if cfg.temperature is not None:
            kwargs["temperature"] = cfg.temperature if temperature is None else temperature
        if cfg.log_probs:
            kwargs["logprobs"] = True
        if cfg.reasoning_effort:
            kwargs["reasoning_effort"] = cfg.reasoning_effort
        if self.response_format:
            kwargs["response_format"] = self.response_format
        if self.extra_body:
            kwargs["extra_body"] = self.extra_body
        return kwargs

    def complete(
        self, messages: list[dict[str, str]], *, temperature: float | None = None, context: Any = None
    ) -> Completion:
        kwargs = self.request_kwargs(temperature)
        attempt = 0
        t0 = time.monotonic()
        while True:
            try:
                resp = self.client.chat.completions.create(messages=messages, **kwargs)
                if not getattr(resp, "choices", None):
                    raise ValueError("the response has no choices")
                break
            except Exception as exc:  # classified below; anything unknown is not retried
                retryable = is_retryable(exc)
                if not retryable or attempt >= self.cfg.n_retry:
                    kind = f"after {attempt} retries" if retryable else "(not retryable)"
                    raise LLMError(f"{type(exc).__name__} {kind}: {_short(exc)}") from exc
                delay = min(self.cfg.max_retry_delay, self.cfg.retry_delay * (2**attempt))
                delay *= random.uniform(0.5, 1.0)
                hinted = retry_after_seconds(exc)
                if hinted is not None:
                    delay = min(self.cfg.max_retry_delay, max(delay, hinted))
                log.warning("LLM call failed (%s: %s); retry %d in %.2fs", type(exc).__name__, _short(exc),
                            attempt + 1, delay)
                self._sleep(delay)
                attempt += 1
        choice = resp.choices[0]
        usage = Usage()
        if resp.usage is not None:
            usage.prompt_tokens = resp.usage.prompt_tokens or 0
            usage.completion_tokens = resp.usage.completion_tokens or 0
        usage.cost = self.cost(usage)
        return Completion(
            text=choice.message.content or "",
            usage=usage,
            latency_s=time.monotonic() - t0,
            finish_reason=choice.finish_reason,
            retries=attempt,
        )

    def cost(self, usage: Usage) -> float:
        cost = 0.0
        if self.cfg.price_prompt_per_mtok:
            cost += usage.prompt_tokens * self.cfg.price_prompt_per_mtok / 1e6
        if self.cfg.price_completion_per_mtok:
            cost += usage.completion_tokens * self.cfg.price_completion_per_mtok / 1e6
        return cost

    def close(self) -> None:
        self.client.close()


def _short(exc: Exception) -> str:
    text = str(exc).replace("\n", " ")
    return text[:300]
