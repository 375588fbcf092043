"""Finding the processes an attack started, by a name that survives pid namespaces."""

from __future__ import annotations

import os
import time
from pathlib import Path


def processes_named(comm: str) -> list[int]:
    """Host pids whose kernel task name is `comm` (names survive namespaces, unlike pids)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if Path(f"/proc/{name}/comm").read_text().strip() == comm:
                    stat = Path(f"/proc/{name}/stat").read_text()
                    if stat.rsplit(")", 1)[1].split()[0] != "Z":
                        found.append(int(name))
            except OSError:
                pass
    return found


def wait_gone(comm: str, within: float = 3.0) -> list[int]:
    """Poll until no live process is named `comm`; returns the survivors (empty when all are gone)."""
    end = time.monotonic() + within
    while True:
        left = processes_named(comm)
        if not left or time.monotonic() > end:
            return left
        time.sleep(0.05)


# Agent-side snippet: rename this process (and so every child it forks) so the host can find them.
RENAME = "import ctypes\nctypes.CDLL(None).prctl(15, b'{name}', 0, 0, 0)\n"
