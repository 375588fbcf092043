"""Benchmark: request_info `term` lookup on a generated 1,000,000-row table (goal: <= 100 ms per lookup).

Prints one line comparing our warm lookup (rapidfuzz over the cached distinct-value index) with the
original approach (an edit distance per cell in a Python loop, timed on a slice and extrapolated).

    PYTHONPATH=. python bench/request_info.py [--rows 1000000]   (or after pip install -e .)
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from rapidfuzz.distance import Levenshtein

from medagentgym.tasks.lookup import TableLookup

SYLLABLES = ["ace", "bro", "cil", "dex", "fen", "gly", "hep", "lor", "mab", "nol", "pam", "quin", "rin", "sol",
             "tam", "vir", "xa", "zol"]
FORMS = ["tab", "cap", "inj", "po tabs", "oral soln", "iv bag"]
ROUTES = ["po", "iv", "sc", "ng", "im", "pr", "tp", "inh"]
TERMS = ["heparin", "fenrin 40 mg tab", "solvir", "quinlor", "acetaminophen"]


def make_table(db: Path, rows: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    drugs = sorted({
        "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))
        + f" {rng.choice([5, 10, 20, 40, 81, 250, 500])} mg {rng.choice(FORMS)}"
        for _ in range(40_000)
    }) + ["heparin", "acetaminophen"]
    con = sqlite3.connect(db)
    con.execute("create table prescriptions (row_id integer, subject_id integer, startdate text, drug text, "
                "route text, dose_val_rx real)")
    con.executemany(
        "insert into prescriptions values (?, ?, ?, ?, ?, ?)",
        ((i, 10000 + i % 46000, f"2104-{1 + i % 12:02d}-{1 + i % 28:02d} {i % 24:02d}:{i % 60:02d}:00",
          rng.choice(drugs), rng.choice(ROUTES), float(i % 500)) for i in range(rows)),
    )
    con.commit()
    con.close()


def per_cell_seconds(db: Path, term: str, sample: int = 50_000) -> float:
    """The original approach's cost: an edit distance for every text cell, extrapolated from a slice."""
    con = sqlite3.connect(db)
    cells = [c for row in con.execute(f"select drug, route from prescriptions limit {sample}") for c in row]
    n_cells = con.execute("select count(*) from prescriptions").fetchone()[0] * 2
    con.close()
    t0 = time.perf_counter()
    best = sorted(cells, key=lambda c: Levenshtein.distance(str(c), term))[:5]
    assert best
    return (time.perf_counter() - t0) * n_cells / len(cells)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.db"
        make_table(db, args.rows)
        t0 = time.perf_counter()
        TableLookup(db).index  # noqa: B018  (builds and caches the index)
        build_s = time.perf_counter() - t0
        lookup = TableLookup(db)
        t0 = time.perf_counter()
        lookup.index  # noqa: B018  (a fresh process's first call: loads the cached index)
        load_s = time.perf_counter() - t0
        times = []
        for _ in range(3):
            for term in TERMS:
                t0 = time.perf_counter()
                out = lookup({"info_type": "term", "keyterm": term})
                times.append(time.perf_counter() - t0)
                assert "matching" in out, out
        ours = statistics.median(times)
        original = per_cell_seconds(db, TERMS[0])
    verdict = "OK" if ours <= 0.100 else "SLOW"
    print(
        f"request_info term lookup, {args.rows:,} rows: median {ours * 1000:.1f} ms, max {max(times) * 1000:.1f} ms "
        f"(goal <= 100 ms: {verdict}); per-cell edit distance (original approach) ~{original:.1f} s; "
        f"ratio {original / ours:,.0f}x; index build {build_s:.1f} s once, cached load {load_s * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
