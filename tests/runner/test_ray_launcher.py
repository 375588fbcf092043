"""The Ray launcher joins an existing cluster by address (the path for users who outgrow one machine)."""

import json
import shutil
import socket
import subprocess
import tempfile

import pytest

from medagentgym.llm.scripted_server import answer_from_goal
from tests.conftest import cli_env, model_args, run_cli

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def ray_head(tmp_path, sample_root):
    ray = shutil.which("ray")
    if ray is None:
        pytest.skip("the ray CLI is not on PATH")
    port = free_port()
    # Ray's socket paths must stay under 107 bytes, so its temp dir cannot live deep in pytest's tmp_path.
    temp_dir = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    env = cli_env(tmp_path, sample_root, RAY_USAGE_STATS_ENABLED="0")
    start = subprocess.run(
        [ray, "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1", "--num-cpus=2",
         "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp_dir}"],
        env=env, capture_output=True, text=True, timeout=180)
    assert start.returncode == 0, start.stderr
    yield f"127.0.0.1:{port}"
    subprocess.run([ray, "stop", "--force"], env=env, capture_output=True, timeout=120)
    shutil.rmtree(temp_dir, ignore_errors=True)


def test_ray_launcher_joins_a_running_head(tmp_path, sample_root, scripted_server, ray_head):
    srv = scripted_server(answer_from_goal)
    p = run_cli(model_args(srv.url) + ["task=arith", "data=sample", "run.end_idx=6", "launcher=ray",
                                       f"launcher.address={ray_head}", "launcher.n_jobs=3", "hydra.run.dir=run"],
                tmp_path, sample_root, env_extra={"RAY_USAGE_STATS_ENABLED": "0"}, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["n_episodes"] == 6 and summary["success_rate"] == 1.0
    assert len(srv.requests) == 6
