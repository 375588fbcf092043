"""Episode throughput against a local OpenAI-protocol server with a set latency.

Starts ``medagentgym.llm.scripted_server`` as its own process (so the server does not compete for our
GIL), measures one episode's latency alone, then runs N episodes with the joblib launcher and prints
episodes/s and the ratio to the ideal ``n_jobs / single-episode latency``.

    python bench/throughput.py --episodes 320 --n-jobs 32 --latency 0.1
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(url: str, out: Path, sample: Path, episodes: int, n_jobs: int, launcher: str) -> tuple[float, float]:
    """(seconds from the first episode's start to the last one's end, median episode wall time)."""
    # The test suite's arithmetic task: one LLM call and one sandbox run per episode.
    argv = [sys.executable, "-m", "medagentgym", "+model=openai_compatible", f"model.base_url={url}",
            "model.name=bench", "task=arith", "data=sample", f"run.end_idx={episodes}", f"launcher={launcher}",
            f"launcher.n_jobs={n_jobs}", "launcher.progress=false", f"hydra.run.dir={out}",
            # The isolating backend's per-episode server start would dominate one-call episodes.
            "sandbox.backend=process",
            f"hydra.searchpath=[file://{REPO / 'tests' / 'conf'}]"]
    env = dict(os.environ, PYTHONPATH=str(REPO), MEDAGENTGYM_SAMPLE_DATA=str(sample))
    subprocess.run(argv, env=env, check=True, capture_output=True)
    recs = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert all(r["outcome"]["status"] == "success" for r in recs), "the bench expects every episode to succeed"
    # Time from the first episode's start to the last one's end: excludes interpreter and task start-up.
    start = min(r["timings"]["started_at"] for r in recs)
    span = max(r["timings"]["started_at"] + r["timings"]["wall_s"] for r in recs) - start
    return span, statistics.median(r["timings"]["wall_s"] for r in recs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=320)
    ap.add_argument("--n-jobs", type=int, default=32)
    ap.add_argument("--latency", type=float, default=0.1)
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    from tests.support.arith_task import ArithTask

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "medagentgym.llm.scripted_server", "--port", str(port),
                               "--latency", str(args.latency)], stdout=subprocess.PIPE, text=True)
    try:
        server.stdout.readline()
        url = f"http://127.0.0.1:{port}/v1"
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            sample = tmp / "sample"
            # The sample task file holds 10 instances; the bench needs more, so write a bigger one.
            ArithTask.make_sample(sample / "arith")
            rows = (sample / "arith" / "test_tasks.jsonl").read_text().splitlines()
            (sample / "arith" / "test_tasks.jsonl").write_text(
                "\n".join(rows * (args.episodes // len(rows) + 1)) + "\n")
            from medagentgym.tasks.sample import STAMP, _fingerprint

            (sample / "arith" / STAMP).write_text(_fingerprint(ArithTask))
            # One episode alone (the median, so the sandbox server's start-up is not counted).
            _, single = run(url, tmp / "single", sample, 9, 1, "sequential")
            wall, _ = run(url, tmp / "many", sample, args.episodes, args.n_jobs, "joblib")
    finally:
        server.terminate()
        server.wait()
    eps = args.episodes / wall
    ideal = args.n_jobs / single
    print(f"episode_latency_s={single:.4f} episodes={args.episodes} n_jobs={args.n_jobs} "
          f"episodes_per_s={eps:.1f} ideal_per_s={ideal:.1f} ratio={eps / ideal:.3f}")


if __name__ == "__main__":
    main()
