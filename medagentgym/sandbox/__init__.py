"""Sandboxes for untrusted agent code. ``create_sandbox`` picks the backend named by ``sandbox.backend``."""

from __future__ import annotations

from medagentgym.config import SandboxConfig
from medagentgym.sandbox.base import Sandbox, SandboxSpec


def create_sandbox(cfg: SandboxConfig, spec: SandboxSpec) -> Sandbox:
    from medagentgym.sandbox.process import ProcessSandbox

    return ProcessSandbox(cfg, spec)


__all__ = ["Sandbox", "SandboxSpec", "create_sandbox"]
