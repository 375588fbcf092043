"""Model clients: ``build_model`` turns a model config into a ChatModel.

Providers: openai, azure, openai_compatible (vLLM, SGLang, llama.cpp, Ollama), local (a llama.cpp server
the harness starts), oracle (answers from the task's gold). All but the oracle go through
``OpenAIChatModel``, i.e. the official ``openai`` client over HTTP.
"""

from __future__ import annotations

from typing import Any

from medagentgym.config import ModelConfig
from medagentgym.llm.client import ChatModel, LLMError, OpenAIChatModel
from medagentgym.llm.providers import make_client


def build_model(cfg: ModelConfig, credentials_path: str | None = None, task: Any = None) -> ChatModel:
    if cfg.provider == "oracle":
        from medagentgym.llm.oracle import OracleModel

        return OracleModel(task)
    if cfg.provider == "local":
        from medagentgym.llm.local import build_local_model

        return build_local_model(cfg)
    return OpenAIChatModel(cfg, make_client(cfg, credentials_path))


__all__ = ["ChatModel", "LLMError", "OpenAIChatModel", "build_model"]
