"""Sandboxes for untrusted agent code. ``create_sandbox`` picks the backend named by ``sandbox.backend``:
``process`` (no root, no daemon), ``bwrap`` (bubblewrap namespaces) or ``auto`` (bwrap where it works)."""

from __future__ import annotations

import logging

from medagentgym.config import SandboxConfig
from medagentgym.errors import UserError
from medagentgym.sandbox.base import Sandbox, SandboxSpec

log = logging.getLogger(__name__)
BACKENDS = ("auto", "process", "bwrap")
_announced: set[str] = set()


def resolve_backend(name: str) -> str:
    from medagentgym.sandbox.bwrap import bwrap_problem

    if name not in BACKENDS:
        raise UserError(f"sandbox.backend={name!r} is not a sandbox backend; use one of {', '.join(BACKENDS)}.")
    if name == "process":
        return name
    problem = bwrap_problem()
    if name == "bwrap" and problem:
        raise UserError(
            f"sandbox.backend=bwrap is not usable here: {problem}. Install bubblewrap (Debian/Ubuntu: "
            "apt-get install bubblewrap) and allow unprivileged user namespaces, or use sandbox.backend=process."
        )
    if problem:
        if name not in _announced:
            _announced.add(name)
            log.warning("sandbox: isolating backend unavailable (%s); using backend=process", problem)
        return "process"
    return "bwrap"


def create_sandbox(cfg: SandboxConfig, spec: SandboxSpec) -> Sandbox:
    backend = resolve_backend(cfg.backend)
    if backend == "bwrap":
        from medagentgym.sandbox.bwrap import BwrapSandbox

        return BwrapSandbox(cfg, spec)
    from medagentgym.sandbox.process import ProcessSandbox

    return ProcessSandbox(cfg, spec)


__all__ = ["BACKENDS", "Sandbox", "SandboxSpec", "create_sandbox", "resolve_backend"]
