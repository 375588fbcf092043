"""stage=build-sft-data: successful episodes -> verl SFT parquet; success/failure pairs -> OpenRLHF DPO JSONL."""

from __future__ import annotations

from dataclasses import dataclass, field

from omegaconf import DictConfig


@dataclass
class Schema:
    name: str = "build-sft-data"
    inputs: list[str] = field(default_factory=list)  # run dirs and/or sweep dirs of the evaluate stage
    output_dir: str | None = None  # null: the Hydra run dir
    # SFT filters on successful episodes
    min_score: float = 1.0
    max_steps: int | None = None
    drop_loops: bool = True
    drop_parse_failures: bool = True
    dedupe: bool = True
    first_n: int | None = None  # keep N random successes (the 100-trajectory SFT warm-up)
    val_fraction: float = 0.1  # share of task instances held out
    seed: int = 0
    sft: bool = True
    dpo: bool = True
    dpo_pairing: str = "all"  # all | zip
    dpo_max_pairs_per_instance: int | None = 4


def run(cfg: DictConfig) -> int:
    from pathlib import Path

    from medagentgym.errors import UserError
    from medagentgym.training.episodes import Filters
    from medagentgym.training.export import ExportSpec, export, format_report
    from medagentgym.training.launch import stage_run_dir
    from medagentgym.training.pairs import PairSpec

    s = cfg.stage
    if not s.inputs:
        raise UserError(
            "stage.inputs is empty: name the evaluate run or sweep dirs to read, e.g. "
            "\"stage.inputs=[outputs/runs/RUN]\"."
        )
    out = Path(s.output_dir).expanduser().resolve() if s.output_dir else stage_run_dir(None)
    spec = ExportSpec(
        filters=Filters(s.min_score, s.max_steps, s.drop_loops, s.drop_parse_failures, s.dedupe),
        pairs=PairSpec(s.dpo_pairing, s.dpo_max_pairs_per_instance, s.seed),
        val_fraction=s.val_fraction,
        seed=s.seed,
        first_n=s.first_n,
        sft=s.sft,
        dpo=s.dpo,
    )
    report = export(list(s.inputs), out, spec)
    print(format_report(report))
    print(f"[medagentgym] wrote {out}")
    return 0
