"""Host side of the allow_hosts relay for sandboxes without a network.

A new network namespace cannot reach the host's 127.0.0.1, so for each allowed ``host:port`` we listen on
a unix socket inside the workspace (the one writable mount both sides see) and connect each arriving
stream to the real address; inside the sandbox the fork server's relay process listens on
127.0.0.1:PORT and forwards to that socket. Nothing else is reachable.
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path

from medagentgym.errors import UserError
from medagentgym.sandbox._server import splice

LOOPBACK = {"127.0.0.1", "localhost"}


def parse_host(entry: str) -> tuple[str, int]:
    host, _, port = entry.rpartition(":")
    if host not in LOOPBACK or not port.isdigit():
        raise UserError(
            f"allow_hosts entry {entry!r} is not supported: without a network the sandbox can only relay "
            "loopback services given as 127.0.0.1:PORT or localhost:PORT. Run the service on the host's "
            "loopback, or use sandbox.network=true."
        )
    return host, int(port)


class HostRelay:
    def __init__(self, allow_hosts: list[str], workspace: Path):
        self.routes = [parse_host(h) for h in allow_hosts]
        self._dir = workspace / ".relay"
        self._dir.mkdir(exist_ok=True)
        self._listeners: list[tuple[int, str, socket.socket]] = []
        for host, port in self.routes:
            path = str(self._dir / f"{port}.sock")
            lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            lsock.bind(path)
            lsock.listen(64)
            self._listeners.append((port, path, lsock))
            threading.Thread(target=self._accept, args=(lsock, host, port), daemon=True).start()

    @staticmethod
    def _accept(lsock: socket.socket, host: str, port: int) -> None:
        while True:
            try:
                conn, _ = lsock.accept()
            except OSError:
                return  # closed
            try:
                up = socket.create_connection((host, port), timeout=10)
                up.settimeout(None)
            except OSError:
                conn.close()
                continue
            splice(conn, up)

    def server_args(self) -> list[str]:
        return [f"--relay={port}:{path}" for port, path, _ in self._listeners]

    def close(self) -> None:
        for _, _, lsock in self._listeners:
            try:
                lsock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            lsock.close()
