"""Issue 4's acceptance check: the oracle scores 1.0 on every task's sample through the real CLI loop."""

import json

import pytest

from tests.conftest import REPO, run_cli

TASKS = sorted(p.stem for p in (REPO / "conf" / "task").glob("*.yaml"))


def test_all_twelve_tasks_are_configured():
    assert set(TASKS) == {"mimic_iii", "eicu", "treqs", "medcalcbench", "medagentbench", "biocoder", "ehrshot",
                          "ehr_seqsql", "ehrcon", "biodsbench", "npowerai", "mimic_extract"}


@pytest.mark.parametrize("task", TASKS)
def test_oracle_scores_one_on_the_sample(task, tmp_path, sample_root):
    p = run_cli(["+model=oracle", f"task={task}", "data=sample", "hydra.run.dir=run"], tmp_path, sample_root,
                test_tasks=False)
    assert p.returncode == 0, p.stderr[-3000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["n_episodes"] >= 5 and summary["n_excluded"] == 0
    assert summary["success_rate"] == 1.0, summary["outcomes"]
