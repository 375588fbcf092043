"""Building an ``openai`` client per provider. Secrets are resolved here and nowhere else."""

from __future__ import annotations

import openai

from medagentgym.config import ModelConfig
from medagentgym.errors import UserError
from medagentgym.secrets import get_secret

# A placeholder for servers that take no key (vLLM, llama.cpp): the SDK insists on some value.
NO_KEY = "not-needed"


def make_client(cfg: ModelConfig, credentials_path: str | None) -> openai.OpenAI:
    timeout = cfg.request_timeout
    if cfg.provider == "openai":
        key = get_secret(cfg.api_key_env or "OPENAI_API_KEY", credentials_path)
        return openai.OpenAI(api_key=key, base_url=cfg.base_url, timeout=timeout, max_retries=0)
    if cfg.provider == "azure":
        endpoint = cfg.azure_endpoint
        if not endpoint:
            endpoint = get_secret(cfg.azure_endpoint_env or "AZURE_OPENAI_ENDPOINT", credentials_path,
                                  what="Azure OpenAI endpoint")
        key = get_secret(cfg.api_key_env or "AZURE_OPENAI_API_KEY", credentials_path)
        return openai.AzureOpenAI(
            api_key=key, azure_endpoint=endpoint, api_version=cfg.api_version, azure_deployment=cfg.name,
            timeout=timeout, max_retries=0,
        )
    if cfg.provider in ("openai_compatible", "local"):
        if not cfg.base_url:
            raise UserError("model.base_url is not set: pass model.base_url=http://HOST:PORT/v1 for your server.")
        key = get_secret(cfg.api_key_env, credentials_path) if cfg.api_key_env else NO_KEY
        return openai.OpenAI(api_key=key, base_url=cfg.base_url, timeout=timeout, max_retries=0)
    raise UserError(
        f"model.provider={cfg.provider!r} is unknown; use openai, azure, openai_compatible, local or oracle."
    )
