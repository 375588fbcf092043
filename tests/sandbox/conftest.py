"""Sandbox fixtures: one factory per backend; the isolating one is skipped where bwrap cannot run."""

from __future__ import annotations

from dataclasses import replace

import pytest

from medagentgym.config import SandboxConfig
from medagentgym.sandbox import SandboxSpec, create_sandbox
from medagentgym.sandbox.bwrap import bwrap_problem

BACKENDS = ["process", "bwrap"]


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    if request.param == "bwrap" and bwrap_problem():
        pytest.skip(f"isolating backend unavailable: {bwrap_problem()}")
    return request.param


@pytest.fixture
def make_sandbox(backend):
    """make_sandbox(spec=None, **SandboxConfig fields) -> an open sandbox of this test's backend."""
    opened = []

    def make(spec: SandboxSpec | None = None, **overrides):
        if backend == "bwrap":
            # Each isolated episode starts its own server: skip the preloads unless a test asks for them.
            overrides.setdefault("preload", [])
        cfg = replace(SandboxConfig(backend=backend, timeout=20.0), **overrides)
        sb = create_sandbox(cfg, spec or SandboxSpec())
        opened.append(sb)
        return sb

    yield make
    for sb in opened:
        sb.close()
