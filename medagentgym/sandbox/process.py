"""Default backend: needs no root and no daemon. Executions are forks of one warm server per interpreter,
each in its own session with resource limits, an allow-listed environment and a fresh workspace. It does
not isolate the filesystem or the network: describe() says so."""

from __future__ import annotations

import os

from medagentgym.config import SandboxConfig
from medagentgym.sandbox.base import SandboxSpec
from medagentgym.sandbox.cgroups import pids_cgroup_root
from medagentgym.sandbox.core import ForkSandbox, server_env
from medagentgym.sandbox.server import WarmServer, shared_server


class ProcessSandbox(ForkSandbox):
    backend = "process"

    def __init__(self, cfg: SandboxConfig, spec: SandboxSpec):
        super().__init__(cfg, spec)
        self._cgroup_root = pids_cgroup_root() if os.geteuid() == 0 else None

    def _server(self) -> WarmServer:
        if self.cfg.warm:
            return shared_server(self.python, self.cfg.preload, server_env(self.cfg, self.python))
        # A fresh interpreter per execution, for code where forking a warm process is unsafe.
        return WarmServer(self.python, [], server_env(self.cfg, self.python), once=True)

    def _request_extra(self) -> dict:
        hidden = [str(p) for p in self.spec.hidden_paths]
        return {"cgroup_root": self._cgroup_root, "audit_hidden": hidden}

    def describe(self) -> str:
        procs = "pids cgroup" if self._cgroup_root else "RLIMIT_NPROC"
        return (
            f"sandbox backend=process python={self.python} warm={self.cfg.warm} | active: fresh workspace as cwd "
            f"and HOME, allow-listed environment, own session with leftover processes killed, limits "
            f"({self.limits_text()}; processes via {procs}) | NOT active: filesystem isolation (agent code "
            "can read and write what this user can; hidden task files are only blocked for Python open(), "
            "not for shell commands), network isolation, pid namespace"
        )
