"""Isolating backend: each episode's warm fork server runs inside its own bubblewrap sandbox.

Only system directories, the interpreter, the task's read-only data and the workspace are mounted;
gold files are not mounted (or are covered where they sit under a mounted directory); everything but the
workspace is read-only; pid, ipc, uts, user and network namespaces are new, capabilities are dropped.
The per-episode server costs one interpreter start (with the preloads) on the episode's first execution;
every execution after that is a fork, as with the process backend.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from pathlib import Path

from medagentgym.config import SandboxConfig
from medagentgym.errors import UserError
from medagentgym.sandbox.base import SandboxSpec
from medagentgym.sandbox.cgroups import EpisodeCgroup, pids_cgroup_root
from medagentgym.sandbox.core import ForkSandbox, server_env
from medagentgym.sandbox.relay import HostRelay, parse_host
from medagentgym.sandbox.server import SERVER_SCRIPT, WarmServer

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")
# bwrap (outside and as init), the server, its spare and the network relay also live in the episode's cgroup.
_OWN_PROCESSES = 5


@functools.cache
def bwrap_problem() -> str | None:
    """Why the isolating backend cannot run here, or None when it can."""
    exe = shutil.which("bwrap")
    if not exe:
        return "bubblewrap (bwrap) is not installed"
    try:
        probe = subprocess.run(
            # The same kinds of options the sandbox uses, so an old bwrap lacking one is caught here.
            [exe, "--unshare-all", "--cap-drop", "ALL", "--new-session", "--ro-bind", "/", "/", "--dev", "/dev",
             "--proc", "/proc", "--size", str(1 << 20), "--tmpfs", "/tmp", "--remount-ro", "/tmp", "--", "/bin/true"],
            capture_output=True, timeout=30, check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap failed to run ({exc})"
    if probe.returncode != 0:
        return f"bwrap cannot create namespaces here ({probe.stderr.decode(errors='replace').strip()[-300:]})"
    return None


@functools.cache
def interpreter_paths(python: str) -> tuple[str, ...]:
    """The directories an interpreter loads code from: its prefixes and package dirs, not source trees that
    editable installs add to sys.path (those may hold task data)."""
    code = ("import json, sys; print(json.dumps([sys.prefix, sys.base_prefix, sys.exec_prefix, "
            "sys.base_exec_prefix, *sys.path]))")
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120,
                             env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, check=True)
        entries = json.loads(out.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        raise UserError(
            f"The sandbox interpreter {python} does not run ({exc}). Point sandbox.python (or the task's "
            "python option) at a working Python interpreter."
        ) from None
    prefixes = [os.path.realpath(p) for p in entries[:4]]
    keep = set(prefixes) | {os.path.dirname(os.path.dirname(os.path.realpath(python)))}
    for p in entries[4:]:
        real = os.path.realpath(p) if p else ""
        if real and ("site-packages" in real or "dist-packages" in real) and not _under(real, keep):
            keep.add(real)
    return tuple(sorted(p for p in keep if os.path.isdir(p)))


def _under(path: str, roots) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


class BwrapSandbox(ForkSandbox):
    backend = "bwrap"

    def __init__(self, cfg: SandboxConfig, spec: SandboxSpec):
        if not cfg.network:
            for entry in spec.allow_hosts:
                parse_host(entry)  # a bad entry fails before anything is created
        super().__init__(cfg, spec)
        interpreter_paths(self.python)  # a broken interpreter fails here, as a UserError, not mid-episode
        self._cgroup: EpisodeCgroup | None = None
        self._srv: WarmServer | None = None
        self._relay = HostRelay(spec.allow_hosts, self.workspace) if spec.allow_hosts and not cfg.network else None

    def _mounts(self) -> list[str]:
        # Order matters: bwrap applies these in turn, so /tmp's tmpfs comes before anything bound below it.
        args = ["--dev", "/dev", "--proc", "/proc", "--size", str(64 << 20), "--tmpfs", "/dev/shm", "--tmpfs", "/tmp"]
        bound: list[str] = []
        for d in SYSTEM_DIRS:
            if os.path.islink(d):
                args += ["--symlink", os.readlink(d), d]
            elif os.path.isdir(d):
                args += ["--ro-bind", d, d]
                bound.append(d)
        extra = [*interpreter_paths(self.python), self.python, *self.cfg.bind_readonly,
                 *(str(Path(p).absolute()) for p in self.spec.readonly_paths)]
        for p in extra:
            # Compare the path as named (prompts and argv use it), not its target: a symlink outside the
            # mounted dirs must be mounted itself.
            if os.path.exists(p) and not _under(os.path.abspath(p), bound):
                args += ["--ro-bind", p, p]
                bound += [os.path.abspath(p), os.path.realpath(p)]
        args += ["--ro-bind", SERVER_SCRIPT, SERVER_SCRIPT]
        for h in self.spec.hidden_paths:
            # Covered under every name by which a mount exposes it (the path as named and its target).
            for target in dict.fromkeys([os.path.abspath(h), os.path.realpath(h)]):
                if not (os.path.exists(target) and _under(target, bound)):
                    continue
                if os.path.isdir(target):
                    args += ["--tmpfs", target, "--remount-ro", target]
                else:
                    args += ["--ro-bind", "/dev/null", target]  # opening it fails: devices are not allowed
        ws = str(self.workspace)
        return args + ["--bind", ws, ws, "--remount-ro", "/tmp", "--remount-ro", "/", "--chdir", ws]

    def _argv(self) -> list[str]:
        net = ["--share-net"] if self.cfg.network else []
        argv = ["bwrap", "--unshare-all", *net, "--cap-drop", "ALL", "--new-session", *self._mounts()]
        if self._cgroup:
            argv = self._cgroup.wrap() + argv
        return argv

    def _server(self) -> WarmServer:
        if self._cgroup is None and os.geteuid() == 0 and pids_cgroup_root():
            self._cgroup = EpisodeCgroup(pids_cgroup_root(), self.cfg.max_processes + _OWN_PROCESSES)
        if self._srv is not None:
            return self._srv
        args = self._relay.server_args() if self._relay else None
        env = server_env(self.cfg, self.python)
        if not self.cfg.warm:  # a fresh sandboxed interpreter per execution
            return WarmServer(self.python, [], env, wrap=self._argv(), once=True, server_args=args)
        self._srv = WarmServer(self.python, self.cfg.preload, env, wrap=self._argv(), server_args=args)
        return self._srv

    def _request_extra(self) -> dict:
        # RLIMIT_NPROC counts this user namespace only, where bwrap's init, the server, the next spare and
        # the relay live too.
        return {"own_user_namespace": True, "nproc_slack": 3 + (self._relay is not None)}

    def _release(self) -> None:
        if self._srv is not None:
            self._srv.close()
        if self._relay is not None:
            self._relay.close()
        if self._cgroup is not None:
            self._cgroup.remove()

    def describe(self) -> str:
        if self.cfg.network:
            net = "network=on (host network shared)"
        elif self.spec.allow_hosts:
            net = f"network=off except {', '.join(self.spec.allow_hosts)} (relayed)"
        else:
            net = "network=off (empty network namespace)"
        procs = "pids cgroup" if os.geteuid() == 0 and pids_cgroup_root() else "RLIMIT_NPROC in a user namespace"
        return (
            f"sandbox backend=bwrap python={self.python} warm={self.cfg.warm} | active: read-only filesystem "
            "with only system dirs, the interpreter and the task's read-only data mounted, workspace the only "
            f"writable path (cwd and HOME), hidden task files not mounted, new pid/ipc/uts/user namespaces, "
            f"no capabilities, {net}, allow-listed environment, leftover processes killed, limits "
            f"({self.limits_text()}; processes via {procs})"
        )
