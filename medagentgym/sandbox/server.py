"""Harness side of the fork server: start it, hand it executions, read what comes back.

One warm server per (interpreter, preload, threads) is shared by every thread of this interpreter for the
process backend; the isolating backend starts one per episode inside its namespaces. Either way the
server is a child that exits when we close its control socket, so neither a normal exit, a crash nor a
kill -9 of the harness leaves it behind.
"""

from __future__ import annotations

import array
import atexit
import json
import os
import selectors
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

SERVER_SCRIPT = str(Path(__file__).with_name("_server.py"))


class ServerFailure(RuntimeError):
    """The fork server could not be started or reached: an infrastructure failure."""


@dataclass
class Capped:
    """One output stream: the first `limit` bytes, and how many were dropped after them."""

    limit: int
    data: bytearray = field(default_factory=bytearray)
    dropped: int = 0

    def add(self, chunk: bytes) -> None:
        room = self.limit - len(self.data)
        if room > 0:
            self.data += chunk[:room]
        self.dropped += max(0, len(chunk) - max(room, 0))

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


@dataclass
class Collected:
    stdout: Capped
    stderr: Capped
    status: dict
    expired: bool


class WarmServer:
    """A fork server process. Thread-safe; restarted on the next submit if it died."""

    def __init__(self, python: str, preload: list[str], env: dict[str, str], wrap: list[str] | None = None,
                 once: bool = False, ready_timeout: float = 120.0, server_args: list[str] | None = None):
        self.python, self.preload, self.env = python, list(preload), dict(env)
        self.server_args = list(server_args or [])
        self.wrap, self.once, self.ready_timeout = list(wrap or []), once, ready_timeout
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None

    def _start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        argv = [*self.wrap, self.python, SERVER_SCRIPT, str(theirs.fileno()), ",".join(self.preload)]
        argv += self.server_args
        if self.once:
            argv.append("--once")
        log = tempfile.TemporaryFile()
        try:
            self._proc = subprocess.Popen(
                argv, env={**self.env, "HOME": "/nonexistent"}, pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                stdout=log, stderr=log, start_new_session=True, close_fds=True,
            )
        except OSError as exc:
            ours.close()
            raise ServerFailure(f"cannot start the sandbox server {argv[0]}: {exc}") from None
        finally:
            theirs.close()
        ours.settimeout(self.ready_timeout)
        try:
            ready = ours.recv(16)
        except OSError:
            ready = b""
        if ready != b"ready":
            self._proc.kill()
            self._proc.wait()
            log.seek(0)
            tail = log.read()[-2000:].decode(errors="replace").strip()
            ours.close()
            self._proc = None
            raise ServerFailure(f"the sandbox server did not start ({' '.join(argv[:3])} ...): {tail or 'no output'}")
        log.close()
        ours.settimeout(None)
        self._sock = ours

    def submit(self, request: bytes) -> tuple[int, int, int]:
        """Send one execution; returns the read ends of (stdout, stderr, status)."""
        req = os.memfd_create("request", os.MFD_CLOEXEC)
        pipes = [os.pipe() for _ in range(3)]
        try:
            view = memoryview(request)
            while view:
                view = view[os.write(req, view):]
            fds = array.array("i", [req, *(w for _, w in pipes)])
            with self._lock:
                for attempt in (1, 2):
                    if self._proc is None or self._proc.poll() is not None:
                        self._close_locked()
                        self._start()
                    try:
                        self._sock.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
                        break
                    except OSError:
                        self._close_locked()  # the server died: nothing ran, so starting afresh is safe
                        if attempt == 2:
                            raise ServerFailure("the sandbox server is not accepting work") from None
        except BaseException:
            for r, _ in pipes:
                os.close(r)
            raise
        finally:
            os.close(req)
            for _, w in pipes:
                os.close(w)
        return pipes[0][0], pipes[1][0], pipes[2][0]

    def _close_locked(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._proc is not None:
            try:
                self._proc.wait(timeout=2)  # it exits on EOF
            except subprocess.TimeoutExpired:
                os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait()
            self._proc = None

    def close(self) -> None:
        with self._lock:
            self._close_locked()

    def kill(self) -> None:
        """Hard stop (a wedged execution): the next submit starts a fresh server."""
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                os.killpg(self._proc.pid, signal.SIGKILL)
            self._close_locked()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None


def collect(fds: tuple[int, int, int], limit: int, deadline: float) -> Collected:
    """Read stdout/stderr/status while the execution runs (no pipe deadlock), until all three close or
    the deadline passes. Closes the fds."""
    out, err, status_buf = Capped(limit), Capped(limit), bytearray()
    sinks = {fds[0]: out.add, fds[1]: err.add, fds[2]: status_buf.extend}
    sel = selectors.DefaultSelector()
    for fd in fds:
        sel.register(fd, selectors.EVENT_READ)
    expired = False
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                expired = True
                break
            for key, _ in sel.select(left):
                chunk = os.read(key.fd, 1 << 16)
                if chunk:
                    sinks[key.fd](chunk)
                else:
                    sel.unregister(key.fd)
    finally:
        sel.close()
        for fd in fds:
            os.close(fd)
    status: dict = {}
    for line in status_buf.decode(errors="replace").splitlines():
        try:
            status.update(json.loads(line))
        except ValueError:
            pass
    return Collected(out, err, status, expired)


# ---- one shared warm server per interpreter (process backend) ---------------------------------------
_shared: dict[tuple, WarmServer] = {}
_shared_lock = threading.Lock()
_shared_pid = os.getpid()


def shared_server(python: str, preload: list[str], env: dict[str, str]) -> WarmServer:
    global _shared_pid
    key = (python, tuple(preload), tuple(sorted(env.items())))
    with _shared_lock:
        if os.getpid() != _shared_pid:  # a forked copy of the harness: the parent's servers are not ours
            _shared.clear()
            _shared_pid = os.getpid()
        if key not in _shared:
            _shared[key] = WarmServer(python, preload, env)
        return _shared[key]


@atexit.register
def close_shared_servers() -> None:
    with _shared_lock:
        servers = list(_shared.values()) if os.getpid() == _shared_pid else []
        _shared.clear()
    for srv in servers:
        srv.close()
