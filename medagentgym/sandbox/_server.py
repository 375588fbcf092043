"""Warm fork server for sandboxed executions. Standard library only: it also runs under other interpreters
(``sandbox.python``) where medagentgym is not installed, started as ``python _server.py FD PRELOAD``.

The harness sends one datagram per execution on the control socket FD: a memfd holding the JSON request
plus the write ends of the stdout, stderr and status pipes (SCM_RIGHTS). The server forks once per
execution (forking a process that imported pandas is the expensive step, so only once); the child applies
the limits to itself and runs the code, so the warm imports are shared copy-on-write and every execution
starts from the same clean state. The server is the child subreaper of everything it starts: it enforces
each execution's wall-clock timeout, kills every orphan reparented to it (so no background process, new
session or double fork outlives its execution) and writes one JSON status line per execution. It exits,
killing what still runs, when the harness closes the socket or dies.
"""

from __future__ import annotations

import array
import ctypes
import gc
import importlib
import json
import os
import re
import resource
import select
import signal
import socket
import sys
import time
import traceback
from dataclasses import dataclass, field

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_MAX_FDS = 4  # request memfd, stdout, stderr, status
_PROC_ENVIRON = re.compile(r"^/proc/(?!self/)[^/]+/(task/[^/]+/)?environ$")


def _prctl(option: int, value: int) -> None:
    ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


# ---- answer capture -------------------------------------------------------------------------------
def plain(value, depth: int = 0):
    """numpy/pandas values -> plain Python so that repr() is a literal graders can parse."""
    if depth > 20:
        return value
    mod = type(value).__module__ or ""
    if mod.startswith(("numpy", "pandas")):
        if hasattr(value, "columns") and hasattr(value, "values"):  # DataFrame
            return plain(value.values.tolist(), depth + 1)
        for conv in ("tolist", "item"):
            if callable(getattr(value, conv, None)):
                try:
                    return plain(getattr(value, conv)(), depth + 1)
                except Exception:
                    pass
        return value
    if isinstance(value, (list, tuple, set, frozenset)):
        return type(value)(plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return {plain(k, depth + 1): plain(v, depth + 1) for k, v in value.items()}
    return value


# ---- the agent process ----------------------------------------------------------------------------
def _deny_hidden(hidden: list[str]):
    """A Python-level deterrent for backends that cannot hide files (not a security boundary: a shell
    command bypasses it). Audit hooks cannot be removed by the code they watch."""
    roots = tuple(os.path.realpath(h) for h in hidden)

    def hook(event, args):
        if event != "open" or not isinstance(args[0], (str, bytes)):
            return
        path = os.path.realpath(os.fsdecode(args[0]))
        if _PROC_ENVIRON.match(path) or any(path == r or path.startswith(r + "/") for r in roots):
            raise PermissionError(13, "Permission denied (hidden by the sandbox)", path)

    sys.addaudithook(hook)


def _apply_limits(req: dict) -> None:
    def setl(which, soft, hard=None):
        try:
            resource.setrlimit(which, (int(soft), int(hard if hard is not None else soft)))
        except (ValueError, OSError):
            pass

    setl(resource.RLIMIT_CORE, 0)
    setl(resource.RLIMIT_CPU, req["cpu_time"], req["cpu_time"] + 1)
    setl(resource.RLIMIT_AS, req["memory_mb"] * 2**20)
    setl(resource.RLIMIT_FSIZE, req["max_file_mb"] * 2**20)
    setl(resource.RLIMIT_NOFILE, req["max_open_files"])
    nproc = req["max_processes"] + req.get("nproc_slack", 0)
    if not req.get("own_user_namespace"):
        # RLIMIT_NPROC counts every process of this user, not only ours: the system-wide task count
        # bounds those from above, so the agent gets at least max_processes more. (In a user namespace
        # of its own the count covers that namespace only.)
        with open("/proc/loadavg") as fh:
            nproc += int(fh.read().split()[3].split("/")[1])
    setl(resource.RLIMIT_NPROC, nproc)


def _agent(req: dict, answer_fd: int) -> None:
    """Runs in the forked agent process; never returns."""
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    for sig in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM, signal.SIGALRM):
        signal.signal(sig, signal.SIG_DFL)
    _apply_limits(req)
    if req["kind"] == "shell":
        for sig in (signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)
        try:
            os.execve("/bin/sh", ["/bin/sh", "-c", req["code"]], req["env"])
        except OSError as exc:
            os.write(2, f"sandbox: cannot run /bin/sh: {exc}\n".encode())
            os._exit(127)
    import linecache
    import random

    os.set_inheritable(answer_fd, False)  # agent subprocesses must not reach the answer channel

    pythonpath = [p for p in req["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:1] = ["", *pythonpath]
    sys.argv = ["<agent>"]
    sys.stdout.reconfigure(line_buffering=True)  # what was printed before a timeout kill still shows
    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    if req.get("audit_hidden") is not None:
        _deny_hidden(req["audit_hidden"])
    src = req["code"]
    linecache.cache["<agent>"] = (len(src), None, src.splitlines(True), "<agent>")
    ns = {"__name__": "__main__", "__builtins__": __builtins__}
    me = os.getpid()
    rc, error = 0, None
    try:
        exec(compile(src, "<agent>", "exec"), ns)
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except BaseException as exc:  # the agent's own failure: show its traceback, minus our frame
        rc, error = 1, {"type": type(exc).__name__, "errno": getattr(exc, "errno", None)}
        traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next if exc.__traceback__ else None)
    if os.getpid() != me:  # a child the agent code forked ran off the end: it has nothing to report
        os._exit(rc)
    report = {"error": error, "answer": None}
    if "answer" in ns:
        try:
            text = repr(plain(ns["answer"]))
            report["answer_truncated"] = len(text) > req["max_answer_chars"]
            report["answer"] = text[: req["max_answer_chars"]]
        except Exception as exc:
            report["answer_error"] = f"{type(exc).__name__}: {exc}"
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    try:
        os.write(answer_fd, json.dumps(report).encode())
    except Exception:
        pass
    os._exit(rc)


# ---- process bookkeeping ----------------------------------------------------------------------------
def _children() -> list[int]:
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children") as fh:
            return [int(p) for p in fh.read().split()]
    except OSError:  # kernels without CONFIG_PROC_CHILDREN: scan /proc
        kids = []
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    with open(f"/proc/{name}/stat") as fh:
                        if int(fh.read().rsplit(")", 1)[1].split()[1]) == me:
                            kids.append(int(name))
                except (OSError, ValueError, IndexError):
                    pass
        return kids


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _kill(pid: int, group: bool = False) -> None:
    try:
        (os.killpg if group else os.kill)(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def make_cgroup(root: str, max_processes: int) -> str | None:
    """A pids cgroup bounds a fork bomb where RLIMIT_NPROC does not apply (root)."""
    path = os.path.join(root, f"medagentgym-{os.getpid()}-{time.monotonic_ns()}")
    try:
        os.mkdir(path)
        with open(os.path.join(path, "pids.max"), "w") as fh:
            fh.write(str(max_processes))
        return path
    except OSError:
        remove_cgroup(path)
        return None


def remove_cgroup(path: str) -> bool:
    """Kill what is left in the cgroup and remove it; False while it still has members."""
    try:
        with open(os.path.join(path, "cgroup.procs")) as fh:
            for pid in fh.read().split():
                _kill(int(pid))
        os.rmdir(path)
        return True
    except FileNotFoundError:
        return True
    except OSError:
        return False


def _fds(anc) -> list[int]:
    fds = array.array("i")
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    return list(fds)


def _detach(server_pid: int, cgroup: str | None) -> None:
    """First steps of a forked execution process, before it knows its request."""
    signal.set_wakeup_fd(-1)
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # if the server dies, nobody would enforce our timeout
    if os.getppid() != server_pid:
        os._exit(71)  # it already did
    os.setsid()
    if cgroup:
        with open(os.path.join(cgroup, "cgroup.procs"), "w") as fh:
            fh.write(str(os.getpid()))


def _run(req: dict, out_fd: int, err_fd: int, answer_fd: int) -> None:
    devnull = os.open(os.devnull, os.O_RDONLY)
    for src, dst in ((devnull, 0), (out_fd, 1), (err_fd, 2), (answer_fd, 3)):
        os.dup2(src, dst)
    os.closerange(4, 1 << 16)  # the control socket above all: agent code must not reach the server
    _agent(req, 3)


@dataclass
class _Exec:
    """One running execution, keyed by its process id in Server.running."""

    req: dict
    status_fd: int
    answer_fd: int
    cgroup: str | None
    t0: float = field(default_factory=time.monotonic)
    timed_out: bool = False

    @property
    def deadline(self) -> float:
        return self.t0 + float(self.req["timeout"])


class Server:
    """The select loop: requests in, forks out, timeouts, reaping and orphan killing."""

    def __init__(self, sock: socket.socket, once: bool, relay_pid: int | None):
        self.sock, self.once, self.relay_pid = sock, once, relay_pid
        self.running: dict[int, _Exec] = {}
        self.cgroups: list[str] = []  # to remove once empty
        self.accepting = True
        self.spare: tuple[int, socket.socket, str | None] | None = None  # (pid, channel, cgroup)
        self.cgroup_root: str | None = None  # as in the last request, for the next spare

    def run(self) -> None:
        _prctl(_PR_SET_CHILD_SUBREAPER, 1)
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake select through wake_w
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        self.wake_fds = (wake_r, wake_w)
        self.sock.send(b"ready")
        while self.accepting or self.running:
            now = time.monotonic()
            wait = min((e.deadline for e in self.running.values()), default=now + 3600) - now
            watch = [wake_r] + ([self.sock] if self.accepting else [])
            ready, _, _ = select.select(watch, [], [], max(0.0, min(wait, 1.0)))
            if wake_r in ready:
                os.read(wake_r, 4096)
            if self.sock in ready:
                self._accept()
            self._expire()
            self._reap()
            if self.spare is None and self.accepting and not self.once:
                self._make_spare()
        self._shutdown()

    def _accept(self) -> None:
        try:
            msg, anc, _, _ = self.sock.recvmsg(16, socket.CMSG_SPACE(_MAX_FDS * 4))
        except OSError:
            msg, anc = b"", []
        if not msg and not anc:  # EOF: the harness closed the socket or is gone
            self.accepting = False
            for pid in self.running:
                _kill(pid, group=True)
            return
        fds = _fds(anc)
        if len(fds) != _MAX_FDS:
            for fd in fds:
                os.close(fd)
            return
        req_fd, out_fd, err_fd, status_fd = fds
        try:
            os.lseek(req_fd, 0, os.SEEK_SET)
            with os.fdopen(os.dup(req_fd), "rb") as fh:
                req = json.loads(fh.read())
        except (OSError, ValueError) as exc:
            self._report(status_fd, {"sandbox_error": f"bad request: {exc}"})
            for fd in (req_fd, out_fd, err_fd):
                os.close(fd)
            return
        answer_fd = os.memfd_create("answer", 0)
        pid, cgroup = self._dispatch(req, req_fd, out_fd, err_fd, answer_fd)
        for fd in (req_fd, out_fd, err_fd):
            os.close(fd)
        self.running[pid] = _Exec(req, status_fd, answer_fd, cgroup)
        if self.once:
            self.accepting = False

    def _dispatch(self, req: dict, req_fd: int, out_fd: int, err_fd: int, answer_fd: int) -> tuple[int, str | None]:
        """Hand the execution to the spare process if it fits, else fork now. Returns (pid, cgroup)."""
        root = req.get("cgroup_root")
        self.cgroup_root = root
        spare, self.spare = self.spare, None
        if spare is not None:
            pid, chan, cgroup = spare
            try:
                if cgroup:
                    if os.path.dirname(cgroup) != root:
                        raise OSError("the spare sits in another cgroup hierarchy")
                    with open(os.path.join(cgroup, "pids.max"), "w") as fh:
                        fh.write(str(req["max_processes"]))
                elif root:
                    raise OSError("the spare has no cgroup")
                chan.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                       array.array("i", [req_fd, out_fd, err_fd, answer_fd]))])
                return pid, cgroup
            except OSError:
                _kill(pid)
                if cgroup:
                    self.cgroups.append(cgroup)
            finally:
                chan.close()
        cgroup = make_cgroup(root, req["max_processes"]) if root else None
        server_pid = os.getpid()
        pid = os.fork()
        if pid == 0:
            try:
                _detach(server_pid, cgroup)
                _run(req, out_fd, err_fd, answer_fd)
            finally:
                os._exit(70)
        return pid, cgroup

    def _make_spare(self) -> None:
        """Fork the next execution's process ahead of time: the fork (and joining a cgroup) is the
        expensive part of an execution, so it happens while nobody waits."""
        cgroup = make_cgroup(self.cgroup_root, 1) if self.cgroup_root else None
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        server_pid = os.getpid()
        pid = os.fork()
        if pid == 0:
            try:
                # While it waits, hold nothing of other executions (their pipes would never see EOF).
                ours.detach()
                os.dup2(theirs.detach(), 3)
                os.closerange(4, 1 << 16)
                chan = socket.socket(fileno=3)
                _detach(server_pid, cgroup)
                msg, anc, _, _ = chan.recvmsg(16, socket.CMSG_SPACE(_MAX_FDS * 4))
                fds = _fds(anc)
                if len(fds) != _MAX_FDS:
                    os._exit(0)
                req_fd, out_fd, err_fd, answer_fd = fds
                os.lseek(req_fd, 0, os.SEEK_SET)
                with os.fdopen(req_fd, "rb") as fh:
                    req = json.loads(fh.read())
                _run(req, out_fd, err_fd, answer_fd)
            finally:
                os._exit(70)
        theirs.close()
        self.spare = (pid, ours, cgroup)


    def _expire(self) -> None:
        now = time.monotonic()
        for pid, ex in self.running.items():
            if not ex.timed_out and now >= ex.deadline:
                ex.timed_out = True
                _kill(pid, group=True)

    def _ours(self, pid: int) -> bool:
        """A process the server itself runs: an execution, the relay or the spare."""
        return pid in self.running or pid == self.relay_pid or (self.spare is not None and pid == self.spare[0])

    def _orphans(self) -> list[int]:
        return [pid for pid in _children() if not self._ours(pid) and _alive(pid)]

    def _reap(self) -> None:
        while True:
            try:
                pid, wstatus = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid in self.running:
                self._finish(pid, wstatus)
            elif self.spare is not None and pid == self.spare[0]:
                _, chan, cgroup = self.spare  # it died waiting (killed from outside): make another
                chan.close()
                if cgroup:
                    self.cgroups.append(cgroup)
                self.spare = None
        # Anything else among our children is an orphan (its execution's process exited): kill it.
        for pid in self._orphans():
            _kill(pid)
        self.cgroups = [c for c in self.cgroups if not remove_cgroup(c)]

    def _finish(self, pid: int, wstatus: int) -> None:
        ex = self.running.pop(pid)
        leftover = len(self._orphans())
        _kill(pid, group=True)  # its process group: children still running in the background
        if ex.cgroup:
            self.cgroups.append(ex.cgroup)
        os.lseek(ex.answer_fd, 0, os.SEEK_SET)
        raw = os.read(ex.answer_fd, ex.req["max_answer_chars"] * 4 + 4096)
        os.close(ex.answer_fd)
        try:
            report = json.loads(raw) if raw else {}
        except ValueError:
            report = {}
        self._report(ex.status_fd, {
            "exit_code": os.WEXITSTATUS(wstatus) if os.WIFEXITED(wstatus) else None,
            "signal": os.WTERMSIG(wstatus) if os.WIFSIGNALED(wstatus) else None,
            "timed_out": ex.timed_out,
            "duration_s": time.monotonic() - ex.t0,
            "leftover": leftover,
            "cgroup": ex.cgroup is not None,
            **report,
        })

    @staticmethod
    def _report(status_fd: int, status: dict) -> None:
        try:
            os.write(status_fd, (json.dumps(status) + "\n").encode())
        except OSError:
            pass  # the harness gave up on this execution
        os.close(status_fd)

    def _shutdown(self) -> None:
        """Leave nothing behind: kill and reap every remaining descendant (the relay included)."""
        for _ in range(200):
            kids = _children()
            if not kids:
                break
            for pid in kids:
                _kill(pid)
            for pid in kids:
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass
        if self.spare is not None:
            self.spare[1].close()
            if self.spare[2]:
                self.cgroups.append(self.spare[2])
        for cg in self.cgroups:
            remove_cgroup(cg)


# ---- network relay (isolating backend with allow_hosts) ----------------------------------------------
def pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy bytes one way until EOF, then pass the EOF on."""
    try:
        while True:
            data = src.recv(1 << 16)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def splice(a: socket.socket, b: socket.socket) -> None:
    """Relay both ways between two connected sockets on two daemon threads; closes both when done."""
    import threading

    def run():
        t = threading.Thread(target=pump, args=(b, a), daemon=True)
        t.start()
        pump(a, b)
        t.join()
        a.close()
        b.close()

    threading.Thread(target=run, daemon=True).start()


def _relay_forever(listeners: list[tuple[socket.socket, str]]) -> None:
    import threading

    def serve_port(lsock: socket.socket, path: str) -> None:
        while True:
            conn, _ = lsock.accept()
            up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                up.connect(path)
            except OSError:
                conn.close()
                up.close()
                continue
            splice(conn, up)

    for lsock, path in listeners:
        threading.Thread(target=serve_port, args=(lsock, path), daemon=True).start()
    threading.Event().wait()


def _start_relay(routes: list[tuple[int, str]]) -> int | None:
    """Inside the empty network namespace: listen on 127.0.0.1:PORT and forward each connection to the
    harness's unix socket for that port (in the workspace). The ports are bound before the server says
    it is ready; the relaying runs in a separate process because the server must stay single-threaded
    for its forks to be safe."""
    if not routes:
        return None
    listeners = []
    for port, path in routes:
        lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lsock.bind(("127.0.0.1", port))
        lsock.listen(64)
        listeners.append((lsock, path))
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        _relay_forever(listeners)
        os._exit(0)
    for lsock, _ in listeners:
        lsock.close()
    return pid


# ---- the server loop ----------------------------------------------------------------------------------
def _preload(modules: list[str]) -> None:
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:
            continue  # another interpreter may lack it; agent code then imports what it needs
    if "pandas" in sys.modules:
        # pandas imports much lazily on first use; touch it once so each fork starts warm.
        sys.modules["pandas"].DataFrame({"a": [1.0, 2.0]}).describe()
    # Every later fork shares these objects copy-on-write; moving them out of the collector's reach keeps a
    # child's garbage collection from touching (and so copying) every page the imports filled.
    gc.collect()
    gc.freeze()


def main(argv: list[str]) -> None:
    """argv: FD PRELOAD[,MODULE...] [--once] [--relay=PORT:UNIX_SOCKET_PATH ...]"""
    if sys.path and os.path.realpath(sys.path[0] or ".") == os.path.dirname(os.path.realpath(__file__)):
        del sys.path[0]  # our own directory holds harness modules that must not shadow anything
    fd = int(argv[1])
    preload = [m for m in argv[2].split(",") if m] if len(argv) > 2 else []
    routes = []
    for arg in argv[3:]:
        if arg.startswith("--relay="):
            port, path = arg[len("--relay="):].split(":", 1)
            routes.append((int(port), path))
    sock = socket.socket(fileno=fd)
    relay_pid = _start_relay(routes)
    _preload(preload)
    Server(sock, once="--once" in argv, relay_pid=relay_pid).run()
    os._exit(0)  # skip interpreter teardown: tearing down pandas & co. only delays the harness


if __name__ == "__main__":
    main(sys.argv)
