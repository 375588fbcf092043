"""Sandbox latency benchmark: median wall time of one execution through the interface episodes use.

    python bench/sandbox_latency.py [--repeat N] [--backend auto|process|bwrap]

The last line is `trivial_median_ms=<x> pandas_median_ms=<y> fresh_interpreter_median_ms=<z>`: a trivial
snippet and a small pandas computation on the warm path, and the pandas snippet on the fresh-interpreter
path (sandbox.warm=false). Each path is warmed once before timing (the warm server's start is per
interpreter, or per episode for the isolating backend, not per execution).
"""

from __future__ import annotations

import argparse
import statistics
import time

from medagentgym.config import SandboxConfig
from medagentgym.sandbox import SandboxSpec, create_sandbox

TRIVIAL = "answer = 1 + 1"
PANDAS = "import pandas as pd\ndf = pd.DataFrame({'x': [1.0, 2.0, 3.0, 4.0]})\nanswer = df['x'].mean()"


def median_ms(cfg: SandboxConfig, code: str, repeat: int) -> float:
    times = []
    with create_sandbox(cfg, SandboxSpec()) as sb:
        warm = sb.run_python(code)
        if not warm.ok:
            raise SystemExit(f"benchmark snippet failed: {warm.status} {warm.note} {warm.stderr}")
        for _ in range(repeat):
            t0 = time.perf_counter()
            res = sb.run_python(code)
            times.append((time.perf_counter() - t0) * 1000)
            assert res.ok and res.answer is not None, res
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--fresh-repeat", type=int, default=10)
    ap.add_argument("--backend", default="auto")
    args = ap.parse_args()
    cfg = SandboxConfig(backend=args.backend, timeout=60)
    with create_sandbox(cfg, SandboxSpec()) as sb:
        print(sb.describe())
    trivial = median_ms(cfg, TRIVIAL, args.repeat)
    pandas = median_ms(cfg, PANDAS, args.repeat)
    fresh = median_ms(SandboxConfig(backend=args.backend, timeout=60, warm=False), PANDAS, args.fresh_repeat)
    print(f"trivial_median_ms={trivial:.1f} pandas_median_ms={pandas:.1f} fresh_interpreter_median_ms={fresh:.1f}")


if __name__ == "__main__":
    main()
