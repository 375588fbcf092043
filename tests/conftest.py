"""Shared fixtures: the scripted OpenAI-protocol server, CLI runs in a subprocess, sample data dirs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from medagentgym.llm.scripted_server import Reply, ScriptedServer

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
TEST_CONF = REPO / "tests" / "conf"


@pytest.fixture
def scripted_server():
    """Factory: scripted_server(script, latency=0.0) -> a running ScriptedServer, stopped after the test."""
    servers: list[ScriptedServer] = []

    def start(script, latency: float = 0.0) -> ScriptedServer:
        srv = ScriptedServer(script, latency=latency).__enter__()
        servers.append(srv)
        return srv

    yield start
    for srv in servers:
        srv.__exit__(None, None, None)


@pytest.fixture(scope="session")
def sample_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("sample_data")


def cli_env(tmp_path: Path, sample_root: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEDAGENTGYM_")}
    env.update(
        MEDAGENTGYM_OUTPUTS=str(tmp_path / "outputs"),
        MEDAGENTGYM_SAMPLE_DATA=str(sample_root),
        PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]),
        HYDRA_FULL_ERROR="0",
    )
    env.update(extra)
    return env


def run_cli(args: list[str], tmp_path: Path, sample_root: Path, *, test_tasks: bool = True, timeout: float = 300,
            env_extra: dict[str, str] | None = None, **popen) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "medagentgym", *args]
    if test_tasks:
        argv.append(f"hydra.searchpath=[file://{TEST_CONF}]")
    return subprocess.run(argv, cwd=tmp_path, env=cli_env(tmp_path, sample_root, **(env_extra or {})),
                          capture_output=True, text=True, timeout=timeout, **popen)


def model_args(url: str, **overrides) -> list[str]:
    """CLI args for +model=openai_compatible against a scripted server, with fast retries."""
    args = ["+model=openai_compatible", f"model.base_url={url}", "model.name=scripted",
            "model.retry_delay=0.01", "model.max_retry_delay=0.05"]
    return args + [f"model.{k}={v}" for k, v in overrides.items()]


__all__ = ["Reply", "REPO", "SHARED", "TEST_CONF", "cli_env", "model_args", "run_cli"]
