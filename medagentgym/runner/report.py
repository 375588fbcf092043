"""The model x task table over any set of run dirs (a sweep, or runs gathered by hand).

Used by the Hydra callback at the end of a multirun and as a command:
    python -m medagentgym.runner.report RUN_OR_SWEEP_DIR [...] [--out DIR]
Cells read ``summary.json``; a run without one is summarised from its ``episodes.jsonl``; a run that
failed before any episode shows its ``error.json``.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import logging
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from medagentgym.runner.records import EPISODES_FILE, iter_records, latest_by_key
from medagentgym.runner.summary import SUMMARY_FILE, summarize

log = logging.getLogger(__name__)
ERROR_FILE = "error.json"


def find_run_dirs(paths: list[Path]) -> list[Path]:
    found: set[Path] = set()
    for p in paths:
        for marker in (SUMMARY_FILE, EPISODES_FILE, ERROR_FILE):
            if (p / marker).exists():
                found.add(p)
            found.update(f.parent for f in p.glob(f"**/{marker}"))
    return sorted(found)


def cell(run_dir: Path) -> dict[str, Any]:
    if (run_dir / SUMMARY_FILE).exists():
        s = json.loads((run_dir / SUMMARY_FILE).read_text())
    elif (run_dir / EPISODES_FILE).exists():
        recs = list(latest_by_key(iter_records(run_dir / EPISODES_FILE)).values())
        s = summarize(recs)
        if recs:
            s.update(task=recs[0].task, model=recs[0].model)
    else:
        s = {}
    if (run_dir / ERROR_FILE).exists():
        err = json.loads((run_dir / ERROR_FILE).read_text())
        s = {**err, **s, "error": err.get("error")}
    s.setdefault("model_config", s.get("model", "?"))
    s.setdefault("task", "?")
    s["run_dir"] = str(run_dir)
    return s


def _fmt(c: dict[str, Any]) -> str:
    if c.get("success_rate") is None:
        return "error" if c.get("error") else "n/a"
    text = f"{c['success_rate']:.3f} ({c['outcomes']['success']}/{c['n_graded']})"
    if c.get("n_excluded"):
        text += f" +{c['n_excluded']} infra"
    if not c.get("complete", True):
        text += " partial"
    return text


def build_table(run_dirs: list[Path]) -> tuple[str, str, list[dict[str, Any]]]:
    cells = [cell(d) for d in run_dirs]
    counts = Counter((c["model_config"], c["task"]) for c in cells)
    for c in cells:
        # Runs that share model and task (a sweep over another setting) keep their own row.
        c["row"] = c["model_config"]
        if counts[(c["model_config"], c["task"])] > 1:
            c["row"] += f" [{Path(c['run_dir']).name}]"
    rows = sorted({c["row"] for c in cells})
    tasks = sorted({c["task"] for c in cells})
    grid = {(c["row"], c["task"]): c for c in cells}
    md = ["| model | " + " | ".join(tasks) + " |", "|---" * (len(tasks) + 1) + "|"]
    for r in rows:
        md.append(f"| {r} | " + " | ".join(_fmt(grid[(r, t)]) if (r, t) in grid else "" for t in tasks) + " |")
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["model", "task", "success_rate", "ci95_low", "ci95_high", "n_graded", "n_excluded",
                "mean_score", "cost", "complete", "error", "run_dir"])
    for c in sorted(cells, key=lambda c: (c["row"], c["task"])):
        ci = c.get("success_rate_ci95") or [None, None]
        w.writerow([c["model_config"], c["task"], c.get("success_rate"), ci[0], ci[1], c.get("n_graded"),
                    c.get("n_excluded"), c.get("mean_score"), c.get("cost"), c.get("complete"), c.get("error"),
                    c["run_dir"]])
    return "\n".join(md) + "\n", buf.getvalue(), cells


def write_table(paths: list[Path], out_dir: Path) -> str:
    md, csv_text, _ = build_table(find_run_dirs(paths))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.md").write_text(md)
    (out_dir / "results.csv").write_text(csv_text)
    return md


class SweepTableCallback(Callback):
    """Writes results.md / results.csv into the sweep dir when a multirun ends."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        if sweep_dir.exists():
            md = write_table([sweep_dir], sweep_dir)
            print(f"\nSweep results ({sweep_dir}):\n{md}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m medagentgym.runner.report", description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", type=Path, help="run dirs or sweep dirs")
    ap.add_argument("--out", type=Path, default=None, help="where to write results.md/.csv (default: first path)")
    args = ap.parse_args(argv)
    missing = [str(p) for p in args.paths if not p.exists()]
    if missing:
        print(f"No such directory: {', '.join(missing)}. Pass run dirs or sweep dirs under outputs/.",
              file=sys.stderr)
        return 2
    print(write_table(args.paths, args.out or args.paths[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
