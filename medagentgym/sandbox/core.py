"""What every fork-server backend shares: workspace, environment allow-list, limits, result classification."""

from __future__ import annotations

import atexit
import errno
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
import weakref
from abc import abstractmethod
from pathlib import Path
from typing import ClassVar

from medagentgym.config import SandboxConfig
from medagentgym.errors import UserError
from medagentgym.sandbox.base import Sandbox, SandboxSpec
from medagentgym.sandbox.server import Collected, ServerFailure, WarmServer, collect
from medagentgym.types import ExecResult

log = logging.getLogger(__name__)

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
               "VECLIB_MAXIMUM_THREADS")
# The harness's own deadline is this much later than the server's; past it the server is stuck.
BACKSTOP_S = 10.0


def resolve_python(python: str | None) -> str:
    if not python:
        return sys.executable
    found = shutil.which(python)
    if not found:
        raise UserError(
            f"sandbox.python={python!r} is not an executable or a command on PATH. Give the full path of the "
            "interpreter that has the task's packages (e.g. sandbox.python=/opt/envs/biocoder/bin/python), "
            "or leave it unset to use the harness's own interpreter."
        )
    return os.path.abspath(found)


def check_limits(cfg: SandboxConfig) -> None:
    bad = [name for name in ("timeout", "memory_mb", "max_processes", "max_file_mb", "max_open_files",
                             "max_output_bytes", "threads") if not getattr(cfg, name) > 0]
    if cfg.cpu_time is not None and not cfg.cpu_time > 0:
        bad.append("cpu_time")
    if bad:
        raise UserError(
            f"sandbox.{bad[0]}={getattr(cfg, bad[0])} must be a positive number"
            + (f" (so must {', '.join('sandbox.' + b for b in bad[1:])})" if bad[1:] else "")
            + "; fix it on the command line or in the config, e.g. sandbox.timeout=120."
        )


def server_env(cfg: SandboxConfig, python: str) -> dict[str, str]:
    """The allow-listed environment: nothing from the harness but PATH, so no credential reaches agent code."""
    path = [os.path.dirname(python)] + [p for p in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep) if p]
    env = {
        "PATH": os.pathsep.join(dict.fromkeys(path)),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONHASHSEED": "0",  # fixed at interpreter start, so forked executions inherit it
        "MPLBACKEND": "Agg",
    }
    env.update({var: str(cfg.threads) for var in THREAD_VARS})
    return env


_swept: set[tuple[int, str]] = set()


def _remove_stale_workspaces(root: str) -> None:
    """Workspaces of a harness that died without closing them (kill -9): their owner pid is gone."""
    if (os.getpid(), root) in _swept:
        return
    _swept.add((os.getpid(), root))
    for path in Path(root).glob("mag-ws-*-*"):
        owner = path.name.split("-")[2]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            shutil.rmtree(path, ignore_errors=True)


# Sandboxes not closed by their episode (a crash, a forgotten close) are closed at interpreter exit, so
# no workspace, cgroup or per-episode server is left behind.
_open: weakref.WeakSet[ForkSandbox] = weakref.WeakSet()


@atexit.register
def _close_open_sandboxes() -> None:
    for sb in list(_open):
        sb.close()


class ForkSandbox(Sandbox):
    """A sandbox whose executions are forks of a warm server; subclasses say which server and how isolated."""

    backend: ClassVar[str]

    def __init__(self, cfg: SandboxConfig, spec: SandboxSpec):
        check_limits(cfg)
        self.cfg, self.spec = cfg, spec
        self.python = resolve_python(spec.python or cfg.python)
        root = cfg.workspace_root or tempfile.gettempdir()
        Path(root).mkdir(parents=True, exist_ok=True)
        _remove_stale_workspaces(root)
        # Named after our pid so that a later run can remove them if we die before close(); kept ones are not.
        prefix = "mag-ws-keep-" if cfg.keep_workspace else f"mag-ws-{os.getpid()}-"
        self.workspace = Path(tempfile.mkdtemp(prefix=prefix, dir=root)).resolve()
        self.packages = self.workspace / ".packages"  # `pip install` lands here, on this episode's PYTHONPATH
        (self.workspace / ".tmp").mkdir()
        self._closed = False
        _open.add(self)

    # ---- subclass hooks --------------------------------------------------------------------------
    @abstractmethod
    def _server(self) -> WarmServer: ...

    def _request_extra(self) -> dict:
        return {}

    def _release(self) -> None:
        """Backend resources to free at close."""

    # ---- environment -------------------------------------------------------------------------------
    def agent_env(self) -> dict[str, str]:
        env = server_env(self.cfg, self.python)
        env.update({
            "HOME": str(self.workspace),
            "TMPDIR": str(self.workspace / ".tmp"),
            "PYTHONPATH": str(self.packages),
            "PIP_TARGET": str(self.packages),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INPUT": "1",
        })
        env.update(self.spec.env)
        return env

    def limits_text(self) -> str:
        c = self.cfg
        return (f"timeout={c.timeout:g}s cpu={self._cpu_time(c.timeout):g}s memory={c.memory_mb}MB "
                f"processes={c.max_processes} file={c.max_file_mb}MB open_files={c.max_open_files} "
                f"output={c.max_output_bytes}B")

    def _cpu_time(self, timeout: float) -> float:
        return self.cfg.cpu_time if self.cfg.cpu_time is not None else timeout + 5

    # ---- execution ---------------------------------------------------------------------------------
    def run_python(self, code: str, timeout: float | None = None) -> ExecResult:
        return self._execute("python", code, timeout)

    def run_shell(self, command: str, timeout: float | None = None) -> ExecResult:
        return self._execute("shell", command, timeout)

    def _execute(self, kind: str, code: str, timeout: float | None) -> ExecResult:
        if self._closed:
            return ExecResult("sandbox_error", note="the sandbox was already closed")
        timeout = float(timeout if timeout is not None else self.cfg.timeout)
        cfg = self.cfg
        request = {
            "kind": kind, "code": code, "cwd": str(self.workspace), "env": self.agent_env(), "timeout": timeout,
            "cpu_time": self._cpu_time(timeout), "memory_mb": cfg.memory_mb, "max_processes": cfg.max_processes,
            "max_file_mb": cfg.max_file_mb, "max_open_files": cfg.max_open_files,
            "max_answer_chars": cfg.max_output_bytes, **self._request_extra(),
        }
        t0 = time.monotonic()
        try:
            server = self._server()
            fds = server.submit(json.dumps(request).encode())
        except ServerFailure as exc:
            log.warning("sandbox failure: %s", exc)
            return ExecResult("sandbox_error", duration_s=time.monotonic() - t0, note=f"sandbox failure: {exc}")
        got = collect(fds, cfg.max_output_bytes, t0 + timeout + BACKSTOP_S)
        if got.expired:
            server.kill()  # it missed a deadline it enforces itself, so it is stuck; the next call starts anew
        if server.once:
            server.close()
        return classify(kind, got, timeout, cfg, time.monotonic() - t0)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._release()
        if self.cfg.keep_workspace:
            log.info("sandbox workspace kept at %s", self.workspace)
        else:
            shutil.rmtree(self.workspace, ignore_errors=True)


def _signame(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _limit_note(st: dict, timeout: float, cfg: SandboxConfig) -> str | None:
    error = st.get("error") or {}
    err_no, err_type, sig = error.get("errno"), error.get("type"), st.get("signal")
    if sig == signal.SIGXCPU:
        return f"CPU time limit of {cfg.cpu_time if cfg.cpu_time is not None else timeout + 5:g} s reached"
    if sig == signal.SIGXFSZ or err_no == errno.EFBIG:
        return f"file size limit of {cfg.max_file_mb} MB reached"
    if err_type == "MemoryError":
        return f"memory limit of {cfg.memory_mb} MB reached (MemoryError)"
    if err_no == errno.EAGAIN and err_type == "BlockingIOError":
        return f"could not start a process or thread: the limit of {cfg.max_processes} processes was reached"
    if err_no == errno.EMFILE:
        return f"open-file limit of {cfg.max_open_files} reached"
    return None


def classify(kind: str, got: Collected, timeout: float, cfg: SandboxConfig, duration: float) -> ExecResult:
    """Turn the server's report into an ExecResult whose note says in words what happened."""
    st = got.status
    notes: list[str] = []
    status = "ok"
    if got.expired or "sandbox_error" in st or ("exit_code" not in st and "signal" not in st):
        status = "sandbox_error"
        reason = str(st.get("sandbox_error") or "the sandbox server sent no report").strip().splitlines()[-1]
        notes.append(f"sandbox failure: {'it stopped answering and was killed' if got.expired else reason}")
    elif st.get("timed_out"):
        status = "timeout"
        notes.append(f"timeout after {timeout:g} s: the process and everything it started were killed")
    else:
        limit = _limit_note(st, timeout, cfg)
        if limit:
            status = "limit"
            notes.append(limit)
        elif st.get("signal") is not None:
            status = "error"
            notes.append(f"killed by {_signame(st['signal'])}")
        elif st.get("exit_code"):
            status = "error"
            if kind == "shell" or not st.get("error"):
                notes.append(f"exit code {st['exit_code']}")
    if st.get("leftover"):
        notes.append(f"killed {st['leftover']} process(es) still running when the code finished")
    for name, cap in (("stdout", got.stdout), ("stderr", got.stderr)):
        if cap.dropped:
            notes.append(f"{name} cut: {cap.dropped} bytes beyond the {cap.limit}-byte limit were dropped")
    answer = st.get("answer") if kind == "python" else None
    if st.get("answer_truncated"):
        notes.append(f"repr(answer) cut to {cfg.max_output_bytes} characters")
    if st.get("answer_error"):
        notes.append(f"repr(answer) failed: {st['answer_error']}")
    return ExecResult(
        status=status, stdout=got.stdout.text(), stderr=got.stderr.text(), exit_code=st.get("exit_code"),
        answer=answer, duration_s=duration, note="; ".join(notes),
    )
