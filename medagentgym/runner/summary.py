"""summary.json: outcome counts, success rate with a 95% interval, pass@k, tokens, cost, wall time.

Episodes with an infrastructure status (or an invalid task) are counted but excluded from every rate's
denominator: a run whose server failed must not look like a run whose agent failed.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from medagentgym.runner.records import EpisodeRecord
from medagentgym.types import EXCLUDED_STATUSES, STATUSES, SUCCESS

SUMMARY_FILE = "summary.json"


def wilson_interval(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    if n == 0:
        return (0.0, 0.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimator 1 - C(n-c, k) / C(n, k) for one instance with n samples, c correct."""
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def summarize(records: Iterable[EpisodeRecord], num_rollouts: int = 1, wall_s: float | None = None) -> dict[str, Any]:
    recs = list(records)
    outcomes = Counter(r.status for r in recs)
    graded = [r for r in recs if r.status not in EXCLUDED_STATUSES]
    n_success = sum(r.status == SUCCESS for r in graded)
    lo, hi = wilson_interval(n_success, len(graded))
    summary: dict[str, Any] = {
        "n_episodes": len(recs),
        "n_graded": len(graded),
        "n_excluded": len(recs) - len(graded),
        "outcomes": {s: outcomes.get(s, 0) for s in STATUSES},
        "success_rate": n_success / len(graded) if graded else None,
        "success_rate_ci95": [lo, hi] if graded else None,
        "mean_score": sum(r.outcome.get("score", 0.0) for r in graded) / len(graded) if graded else None,
        "loops": sum(r.loop for r in recs),
        "prompt_tokens": sum(r.usage.get("prompt_tokens", 0) for r in recs),
        "completion_tokens": sum(r.usage.get("completion_tokens", 0) for r in recs),
        "cost": round(sum(r.usage.get("cost", 0.0) for r in recs), 6),
        "episode_wall_s": round(sum(r.timings.get("wall_s", 0.0) for r in recs), 3),
    }
    if wall_s is not None:
        summary["wall_s"] = round(wall_s, 3)
    if num_rollouts > 1:
        by_instance: dict[int, list[EpisodeRecord]] = defaultdict(list)
        for r in graded:
            by_instance[r.index].append(r)
        summary["pass_at_k"] = {}
        for k in range(1, num_rollouts + 1):
            vals = [pass_at_k(len(v), sum(x.status == SUCCESS for x in v), k) for v in by_instance.values()
                    if len(v) >= k]
            summary["pass_at_k"][str(k)] = sum(vals) / len(vals) if vals else None
    return summary


def write_summary(run_dir: Path, summary: dict[str, Any]) -> Path:
    path = Path(run_dir) / SUMMARY_FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(summary, indent=2))
    tmp.replace(path)
    return path


def format_table(summary: dict[str, Any], title: str = "") -> str:
    rate = summary["success_rate"]
    ci = summary["success_rate_ci95"]
    rows = [
        ("episodes", str(summary["n_episodes"])),
        ("graded (rate denominator)", str(summary["n_graded"])),
        ("success rate", f"{rate:.3f} [{ci[0]:.3f}, {ci[1]:.3f}] 95% CI" if rate is not None else "n/a"),
        ("mean score", f"{summary['mean_score']:.3f}" if summary["mean_score"] is not None else "n/a"),
    ]
    rows += [(f"  {s}", str(c)) for s, c in summary["outcomes"].items() if c]
    for k, v in (summary.get("pass_at_k") or {}).items():
        rows.append((f"pass@{k}", f"{v:.3f}" if v is not None else "n/a"))
    rows += [
        ("loops flagged", str(summary["loops"])),
        ("tokens (prompt/completion)", f"{summary['prompt_tokens']}/{summary['completion_tokens']}"),
        ("cost (USD)", f"{summary['cost']:.4f}"),
    ]
    if "wall_s" in summary:
        rows.append(("wall time (s)", f"{summary['wall_s']:.1f}"))
    width = max(len(r[0]) for r in rows)
    lines = [title] if title else []
    lines += [f"{a.ljust(width)}  {b}" for a, b in rows]
    return "\n".join(lines)
