"""Running many episodes: sequential, joblib (threads by default) or Ray (local or a cluster).

All three share one contract: ``run_jobs(jobs, ...)`` calls ``on_result`` in the driver for every
finished episode as it finishes (so results are written as they come), shows a progress bar with ETA
and the running success rate, and on Ctrl-C stops handing out new episodes, keeps every finished one and
returns ``interrupted=True``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from tqdm import tqdm

from medagentgym.config import LauncherConfig
from medagentgym.types import EXCLUDED_STATUSES, SUCCESS

log = logging.getLogger(__name__)

Job = tuple[int, int]  # (instance index, rollout)


class _Progress:
    def __init__(self, total: int, enabled: bool):
        self.bar = tqdm(total=total, disable=not enabled, unit="ep", dynamic_ncols=True, leave=True)
        self.graded = self.success = self.excluded = 0

    def update(self, record: Any) -> None:
        if record.status in EXCLUDED_STATUSES:
            self.excluded += 1
        else:
            self.graded += 1
            self.success += record.status == SUCCESS
        rate = self.success / self.graded if self.graded else 0.0
        self.bar.set_postfix_str(f"success={rate:.3f} infra={self.excluded}", refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


def run_jobs(
    jobs: Sequence[Job],
    run_one: Callable[[Job], Any],
    on_result: Callable[[Any], None],
    cfg: LauncherConfig,
    ray_payload: dict[str, Any] | None = None,
) -> bool:
    """Run every job; return True when interrupted by Ctrl-C."""
    progress = _Progress(len(jobs), cfg.progress)
    stop = threading.Event()

    def guarded(job: Job) -> Any:
        return None if stop.is_set() else run_one(job)

    def deliver(result: Any) -> None:
        if result is not None:
            on_result(result)
            progress.update(result)

    try:
        if cfg.name == "sequential" or (cfg.name == "joblib" and cfg.n_jobs == 1):
            for job in jobs:
                deliver(run_one(job))
        elif cfg.name == "joblib":
            _run_joblib(jobs, guarded, deliver, cfg)
        elif cfg.name == "ray":
            _run_ray(jobs, deliver, cfg, ray_payload or {}, stop)
        else:
            raise ValueError(f"launcher.name={cfg.name!r} is unknown; use sequential, joblib or ray.")
        return False
    except KeyboardInterrupt:
        stop.set()
        log.warning("Interrupted: finished episodes are saved; rerun the same command to resume.")
        return True
    finally:
        progress.close()


def _run_joblib(jobs: Sequence[Job], guarded: Callable[[Job], Any], deliver: Callable[[Any], None],
                cfg: LauncherConfig) -> None:
    from joblib import Parallel, delayed

    # One episode per dispatch: joblib's auto-batching groups short tasks, which idles workers at the tail.
    parallel = Parallel(n_jobs=cfg.n_jobs, prefer=cfg.prefer, return_as="generator_unordered", batch_size=1)
    for result in parallel(delayed(guarded)(job) for job in jobs):
        deliver(result)


def _run_ray(jobs: Sequence[Job], deliver: Callable[[Any], None], cfg: LauncherConfig,
             payload: dict[str, Any], stop: threading.Event) -> None:
    import ray

    from medagentgym.runner.evaluate import ray_episode

    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=cfg.address or None, include_dashboard=False, log_to_driver=False,
                 configure_logging=False, ignore_reinit_error=True)
    # Episodes wait on the LLM, not the CPU: the in-flight window, not Ray's CPU count, bounds parallelism.
    remote = ray.remote(num_cpus=0, max_retries=0)(ray_episode)
    payload_ref = ray.put(payload)
    pending: list[Any] = []
    queue = list(jobs)
    try:
        while queue or pending:
            while queue and len(pending) < cfg.n_jobs and not stop.is_set():
                pending.append(remote.remote(payload_ref, *queue.pop(0)))
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                deliver(ray.get(ref))
    except KeyboardInterrupt:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise
    finally:
        if started_here:
            ray.shutdown()
