"""A pids cgroup bounds process counts where RLIMIT_NPROC cannot: the kernel does not enforce that limit
for root, and it counts every process of a user rather than one execution's."""

from __future__ import annotations

import functools
import os
import time
import uuid
from pathlib import Path

from medagentgym.sandbox._server import remove_cgroup


@functools.cache
def pids_cgroup_root() -> str | None:
    """A writable cgroup directory with the pids controller (v1 pids hierarchy or v2 root), else None."""
    candidates = [Path("/sys/fs/cgroup/pids")]
    v2 = Path("/sys/fs/cgroup/cgroup.subtree_control")
    try:
        if "pids" in v2.read_text().split():
            candidates.append(v2.parent)
    except OSError:
        pass
    for root in candidates:
        probe = root / f"medagentgym-probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            probe.mkdir()
            ok = (probe / "pids.max").exists()
            probe.rmdir()
        except OSError:
            continue
        if ok:
            _remove_stale(root)
            return str(root)
    return None


def _remove_stale(root: Path) -> None:
    """Empty cgroups left by a harness that was killed (named after its pid, which is gone)."""
    for path in root.glob("medagentgym-*"):
        owner = path.name.split("-")[1]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            try:
                path.rmdir()  # fails, harmlessly, if anything still runs in it
            except OSError:
                pass


class EpisodeCgroup:
    """A pids cgroup that a whole sandbox (e.g. one bwrap instance) is started inside."""

    def __init__(self, root: str, max_pids: int):
        self.root = root
        self.path = Path(root) / f"medagentgym-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.path.mkdir()
        (self.path / "pids.max").write_text(str(max_pids))

    def wrap(self) -> list[str]:
        """argv prefix that moves the command into the cgroup before it execs, so no child escapes it."""
        return ["/bin/sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(self.path)]

    def remove(self) -> None:
        for _ in range(100):
            if remove_cgroup(str(self.path)):
                return
            time.sleep(0.02)
