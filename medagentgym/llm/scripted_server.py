"""A small OpenAI-protocol HTTP server with scripted replies, for tests, benchmarks and dry runs.

It speaks ``POST /v1/chat/completions`` well enough for the official ``openai`` client, and can also
misbehave on purpose: an HTTP error with headers (429 + Retry-After, 500), a garbage body, a dropped
connection, a slow reply. A script is a function from the request body to a ``Reply``.

    python -m medagentgym.llm.scripted_server --port 8765 --latency 0.1 --policy answer_from_goal
"""

from __future__ import annotations

import argparse
import json
import random
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    content: str | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    raw_body: bytes | None = None  # sent as is (garbage replies)
    delay: float = 0.0
    drop: bool = False  # close the connection without answering
    usage: tuple[int, int] | None = None


Script = Callable[[dict[str, Any]], Reply]


def completion_body(content: str, model: str, usage: tuple[int, int] | None) -> dict[str, Any]:
    prompt, completion = usage or (max(1, len(json.dumps(content)) // 4), max(1, len(content) // 4))
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }


class ScriptedServer:
    """Runs in a daemon thread; ``url`` is the base URL for ``openai.OpenAI(base_url=...)``."""

    def __init__(self, script: Script, host: str = "127.0.0.1", port: int = 0, latency: float = 0.0):
        self.script = script
        self.latency = latency
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                # Headers and body go out in two writes; without this, Nagle's algorithm and the client's
                # delayed ACK add ~40 ms to every reply.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append(body)
                    server.paths.append(self.path)
                reply = server.script(body)
                if server.latency or reply.delay:
                    time.sleep(server.latency + reply.delay)
                if reply.drop:
                    self.close_connection = True
                    self.connection.close()
                    return
                if reply.raw_body is not None:
                    data = reply.raw_body
                elif reply.status == 200:
                    data = json.dumps(completion_body(reply.content or "", body.get("model", ""), reply.usage)).encode()
                else:
                    data = json.dumps({"error": {"message": f"scripted {reply.status}", "type": "scripted"}}).encode()
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://{host}:{self.port}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


_ARITH = re.compile(r"Compute\s+(-?\d+)\s*\+\s*(-?\d+)")


def answer_from_goal(body: dict[str, Any]) -> Reply:
    """Solves the test suite's arithmetic task ("Compute A + B") with one validate_code action."""
    goal = next((m["content"] for m in body["messages"] if m["role"] == "user"), "")
    m = _ARITH.search(goal)
    code = f"answer = {m.group(1)} + {m.group(2)}" if m else "answer = None"
    return Reply(json.dumps({"action": "validate_code", "params": {"code": code}}))


def flaky(script: Script, rate: float, seed: int = 0) -> Script:
    """Fails about `rate` of calls, cycling through 429 (Retry-After), 500, a garbage body and a drop."""
    rng = random.Random(seed)
    lock = threading.Lock()
    failures = [
        Reply(status=429, headers={"retry-after": "0"}),
        Reply(status=500),
        Reply(raw_body=b"<html>upstream proxy error</html>"),
        Reply(drop=True),
    ]

    def wrapped(body: dict[str, Any]) -> Reply:
        with lock:
            fail = rng.random() < rate
            kind = rng.randrange(len(failures))
        return failures[kind] if fail else script(body)

    return wrapped


POLICIES: dict[str, Script] = {"answer_from_goal": answer_from_goal}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--latency", type=float, default=0.0, help="seconds added to every reply")
    ap.add_argument("--policy", choices=sorted(POLICIES), default="answer_from_goal")
    ap.add_argument("--fail-rate", type=float, default=0.0)
    args = ap.parse_args(argv)
    script = POLICIES[args.policy]
    if args.fail_rate:
        script = flaky(script, args.fail_rate)
    with ScriptedServer(script, args.host, args.port, args.latency) as srv:
        print(f"listening on {srv.url}", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
