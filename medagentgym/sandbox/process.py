"""Plain-subprocess backend (provisional: the isolating and warm-worker backends replace it)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from medagentgym.config import SandboxConfig
from medagentgym.sandbox.base import Sandbox, SandboxSpec
from medagentgym.types import ExecResult

_RUNNER = r'''
import sys
_ns = {"__name__": "__main__"}
_src = open(sys.argv[1]).read()
exec(compile(_src, "<agent>", "exec"), _ns)
if "answer" in _ns:
    _a = _ns["answer"]
    for _m in ("item", "tolist"):
        if hasattr(_a, "tolist") and _m == "tolist":
            try:
                _a = _a.tolist()
            except Exception:
                pass
    with open(sys.argv[2], "w") as _f:
        _f.write(repr(_a))
'''


class ProcessSandbox(Sandbox):
    def __init__(self, cfg: SandboxConfig, spec: SandboxSpec):
        self.cfg, self.spec = cfg, spec
        self.workspace = Path(tempfile.mkdtemp(prefix="mag-ws-"))
        self._ctl = Path(tempfile.mkdtemp(prefix="mag-ctl-"))

    def describe(self) -> str:
        return "backend=process protections=[workspace, env allow-list, timeout]"

    def _env(self) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "HOME": str(self.workspace),
            "PYTHONHASHSEED": "0",
            "OMP_NUM_THREADS": str(self.cfg.threads),
        }
        env.update(self.spec.env)
        return env

    def _run(self, argv: list[str], timeout: float | None) -> subprocess.CompletedProcess | None:
        proc = subprocess.Popen(
            argv, cwd=self.workspace, env=self._env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=timeout or self.cfg.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return None
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)

    def run_python(self, code: str, timeout: float | None = None) -> ExecResult:
        src, ans = self._ctl / "code.py", self._ctl / "answer.txt"
        src.write_text(code)
        ans.unlink(missing_ok=True)
        t0 = time.monotonic()
        cp = self._run([self.cfg.python or sys.executable, "-c", _RUNNER, str(src), str(ans)], timeout)
        dt = time.monotonic() - t0
        if cp is None:
            return ExecResult("timeout", duration_s=dt, note=f"killed after {timeout or self.cfg.timeout}s")
        return ExecResult(
            "ok" if cp.returncode == 0 else "error",
            stdout=cp.stdout.decode(errors="replace"),
            stderr=cp.stderr.decode(errors="replace"),
            exit_code=cp.returncode,
            answer=ans.read_text() if ans.exists() and cp.returncode == 0 else None,
            duration_s=dt,
        )

    def run_shell(self, command: str, timeout: float | None = None) -> ExecResult:
        t0 = time.monotonic()
        cp = self._run(["/bin/sh", "-c", command], timeout)
        dt = time.monotonic() - t0
        if cp is None:
            return ExecResult("timeout", duration_s=dt)
        return ExecResult(
            "ok" if cp.returncode == 0 else "error",
            stdout=cp.stdout.decode(errors="replace"),
            stderr=cp.stderr.decode(errors="replace"),
            exit_code=cp.returncode,
            duration_s=dt,
        )

    def close(self) -> None:
        if not self.cfg.keep_workspace:
            shutil.rmtree(self.workspace, ignore_errors=True)
        shutil.rmtree(self._ctl, ignore_errors=True)
