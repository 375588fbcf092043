"""Benchmark: build-sft-data on N synthetic trajectories (default 10,000); the target is under 10 s.

    python bench/build_sft_data.py [--n 10000] [--steps 6] [--keep DIR]

Records are serialised exactly as the runner's EpisodeWriter does (half successes, half failures on the same instances,
several steps each), then exported to SFT parquet and DPO JSONL; the export alone is timed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from medagentgym.runner.records import EPISODES_FILE, EpisodeRecord
from medagentgym.training.export import ExportSpec, export

SYSTEM = "You are a clinical data agent. Reply with one JSON action per turn. " * 8


def record(index: int, rollout: int, success: bool, steps: int) -> EpisodeRecord:
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"Task {index}: count rows. " * 20}]
    step_rows = []
    for s in range(steps):
        offset = s if success else -s - rollout
        code = f"import pandas as pd\ndf = pd.read_csv('t{index}.csv')\nanswer = len(df) + {offset}"
        reply = json.dumps({"action": "validate_code", "params": {"code": code}})
        messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": f"Output: {s}\n" * 10}]
        step_rows.append({"step": s, "reply": reply, "action": "validate_code", "params": {"code": code},
                          "observation": f"Output: {s}"})
    return EpisodeRecord(
        task="mimic_iii", split="train", index=index, rollout=rollout, task_id=f"m-{index}", model="bench",
        temperature=0.6, messages=messages, steps=step_rows,
        outcome={"status": "success" if success else "wrong_answer", "score": float(success), "reason": ""},
        loop=False, usage={}, timings={}, config_hash="bench",
    )


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--keep", type=Path, default=None, help="write here instead of a temporary directory")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        (root / "run").mkdir(parents=True, exist_ok=True)
        # EpisodeWriter's fsync per record would dominate the set-up; the bytes on disk are the same.
        with open(root / "run" / EPISODES_FILE, "w", encoding="utf-8") as fh:
            fh.writelines(record(i // 2, i % 2, i % 2 == 0, args.steps).to_json() + "\n" for i in range(args.n))
        start = time.perf_counter()
        report = export([str(root / "run")], root / "out", ExportSpec())
        elapsed = time.perf_counter() - start
    print(f"{args.n} trajectories -> {report['sft']['train_rows'] + report['sft']['val_rows']} SFT rows, "
          f"{report['dpo']['train_rows'] + report['dpo']['val_rows']} DPO pairs in {elapsed:.2f} s")
    return 0 if elapsed < 10 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
