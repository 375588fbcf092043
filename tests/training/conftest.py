"""Session fixtures of the training tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from .support import HERE, run_in, venv_python


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """A randomly initialised tiny Qwen2 model whose tokenizer is a locally trained BPE with TRL's Qwen2.5 template."""
    python = venv_python("trl")
    out = tmp_path_factory.mktemp("tiny_qwen")
    res = run_in(python, [str(HERE / "tiny_qwen.py"), str(out)], timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return out
