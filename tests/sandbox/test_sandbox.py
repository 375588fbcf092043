"""The sandbox contract, on every backend: answers, output, workspace, environment, limits, robustness."""

from __future__ import annotations

import ast
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from medagentgym.config import SandboxConfig
from medagentgym.errors import UserError
from medagentgym.sandbox import SandboxSpec, create_sandbox
from medagentgym.sandbox import server as server_mod

ANSWERS = [
    ("answer = 1 + 1", 2),
    ("import numpy as np\nanswer = np.float64(2.5)", 2.5),
    ("import numpy as np\nanswer = np.arange(3)", [0, 1, 2]),
    ("import numpy as np\nanswer = [np.int64(1), (np.float32(0.5),)]", [1, (0.5,)]),
    ("import pandas as pd\nanswer = pd.DataFrame({'a': [1, 2], 'b': [3, 4]})", [[1, 3], [2, 4]]),
    ("import pandas as pd\nanswer = pd.Series(['x', 'y'])", ["x", "y"]),
    ("import numpy as np\nanswer = {'k': np.bool_(True)}", {"k": True}),
    ("answer = None", None),
    ("answer = \"it's\"", "it's"),
]


def test_answer_is_a_plain_python_literal(make_sandbox):
    sb = make_sandbox()
    for code, expected in ANSWERS:
        res = sb.run_python(code)
        assert res.status == "ok", (code, res)
        assert ast.literal_eval(res.answer) == expected, code


def test_answer_cannot_be_spoofed_by_printing(make_sandbox):
    sb = make_sandbox()
    res = sb.run_python("print(\"answer = 42\")\nprint('{\"answer\": \"42\"}')")
    assert res.ok and res.answer is None and "answer = 42" in res.stdout
    res = sb.run_python("import sys\nanswer = 7\nsys.stdout.write('{\"answer\": \"8\"}\\n')")
    assert res.answer == "7"


def test_stdout_and_stderr_are_kept_apart_and_errors_show_the_traceback(make_sandbox):
    res = make_sandbox().run_python("import sys\nprint('out')\nprint('err', file=sys.stderr)\nx = [1][3]")
    assert res.status == "error" and res.exit_code == 1
    assert res.stdout == "out\n"
    assert res.stderr.startswith("err\n") and "IndexError" in res.stderr and "x = [1][3]" in res.stderr
    assert "_server" not in res.stderr  # our own frames are not shown to the agent


def test_system_exit_and_a_crashing_child_are_ordinary_results(make_sandbox):
    sb = make_sandbox()
    assert sb.run_python("raise SystemExit(3)").exit_code == 3
    assert sb.run_python("import sys\nsys.exit(0)").status == "ok"
    res = sb.run_python("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)")
    assert res.status == "error" and "SIGSEGV" in res.note
    assert sb.run_python("answer = 'still here'").answer == "'still here'"


def test_workspace_is_cwd_and_home_persists_per_episode_and_is_removed(make_sandbox):
    sb = make_sandbox()
    ws = sb.workspace
    res = sb.run_python("import os\nopen('note.txt', 'w').write('hi')\nanswer = [os.getcwd(), os.environ['HOME']]")
    assert ast.literal_eval(res.answer) == [str(ws), str(ws)]
    assert sb.run_shell("cat note.txt").stdout == "hi"
    assert sb.run_python("answer = open('note.txt').read()").answer == "'hi'"
    other = make_sandbox()
    assert other.workspace != ws and other.run_shell("ls note.txt").status == "error"
    sb.close()
    assert not ws.exists()
    kept = make_sandbox(keep_workspace=True)
    kept.run_shell("touch left.txt")
    kept.close()
    assert (kept.workspace / "left.txt").exists()
    shutil.rmtree(kept.workspace)


def test_each_execution_starts_from_a_clean_interpreter(make_sandbox):
    sb = make_sandbox()
    sb.run_python("import json\nleak = 1")
    res = sb.run_python("answer = 'leak' in globals()")
    assert res.answer == "False"
    a = sb.run_python("import random\nanswer = random.random()").answer
    b = sb.run_python("import random\nanswer = random.random()").answer
    assert a != b  # each fork is reseeded, not a replay of the server's random state


def test_environment_is_an_allow_list(make_sandbox, monkeypatch):
    monkeypatch.setenv("MAG_TEST_SECRET_TOKEN", "s3cr3t-value")
    sb = make_sandbox(spec=SandboxSpec(env={"TASK_VAR": "x"}), threads=2)
    res = sb.run_python("import os\nanswer = dict(os.environ)")
    env = ast.literal_eval(res.answer)
    assert "MAG_TEST_SECRET_TOKEN" not in env and "s3cr3t-value" not in res.answer
    assert env["TASK_VAR"] == "x" and env["PYTHONHASHSEED"] == "0" and env["OMP_NUM_THREADS"] == "2"
    assert env["HOME"] == str(sb.workspace)
    shell = sb.run_shell("env")
    assert "s3cr3t" not in shell.stdout and "TASK_VAR=x" in shell.stdout


def test_readonly_paths_are_visible_at_the_same_path(make_sandbox, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "public.csv").write_text("a,b\n1,2\n")
    sb = make_sandbox(spec=SandboxSpec(readonly_paths=[data / "public.csv"]))
    res = sb.run_python(f"import pandas as pd\nanswer = int(pd.read_csv({str(data / 'public.csv')!r})['b'][0])")
    assert res.answer == "2", res


def test_a_timeout_argument_overrides_the_config(make_sandbox):
    res = make_sandbox(timeout=30).run_python("import time\ntime.sleep(5)", timeout=0.5)
    assert res.status == "timeout" and "timeout after 0.5 s" in res.note and res.duration_s < 4


def test_shell_commands_report_exit_codes(make_sandbox):
    sb = make_sandbox()
    res = sb.run_shell("echo out; echo err >&2; exit 4")
    assert (res.status, res.exit_code, res.stdout, res.stderr) == ("error", 4, "out\n", "err\n")
    assert res.answer is None and "exit code 4" in res.note


def test_fresh_interpreter_path(make_sandbox):
    sb = make_sandbox(warm=False)
    res = sb.run_python("import sys\nanswer = 'pandas' in sys.modules")
    assert res.ok and res.answer == "False"  # nothing preloaded: a fresh interpreter
    assert sb.run_python("import pandas as pd\nanswer = int(pd.Series([1, 2]).sum())").answer == "3"


def test_executions_from_many_threads_do_not_mix(make_sandbox):
    boxes = [make_sandbox() for _ in range(8)]
    errors: list[str] = []

    def work(i: int, sb) -> None:
        for j in range(3):
            res = sb.run_python(f"print({i * 10 + j})\nanswer = {i} * 100 + {j}")
            if res.answer != str(i * 100 + j) or res.stdout != f"{i * 10 + j}\n":
                errors.append(f"{i},{j}: {res}")

    threads = [threading.Thread(target=work, args=(i, sb)) for i, sb in enumerate(boxes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_bad_configuration_is_a_user_error():
    with pytest.raises(UserError, match="sandbox.backend"):
        create_sandbox(SandboxConfig(backend="docker"), SandboxSpec())
    with pytest.raises(UserError, match="sandbox.python"):
        create_sandbox(SandboxConfig(backend="process", python="/nonexistent/python9"), SandboxSpec())
    with pytest.raises(UserError, match="sandbox.timeout=0 must be a positive number"):
        create_sandbox(SandboxConfig(backend="process", timeout=0), SandboxSpec())


def test_describe_names_backend_and_protections(make_sandbox, backend):
    text = make_sandbox().describe()
    assert f"backend={backend}" in text and "timeout=20s" in text
    if backend == "process":
        assert "NOT active" in text and "network isolation" in text


def test_another_interpreter_gets_its_own_warm_server(make_sandbox, backend, tmp_path):
    alias = tmp_path / "python-alias"
    alias.symlink_to(sys.executable)
    res = make_sandbox(spec=SandboxSpec(python=str(alias))).run_python("import sys\nanswer = sys.executable")
    assert res.answer == repr(str(alias)), res
    if backend == "process":
        assert any(key[0] == str(alias) for key in server_mod._shared)


def test_a_dead_shared_server_is_restarted():
    cfg = SandboxConfig(backend="process")
    with create_sandbox(cfg, SandboxSpec()) as sb:
        assert sb.run_python("answer = 1").ok
        srv = sb._server()
        os.killpg(srv.pid, signal.SIGKILL)
        srv._proc.wait()
        res = sb.run_python("answer = 2")
    assert res.ok and res.answer == "2"


@pytest.mark.parametrize("how", ["exit", "kill"])
def test_nothing_outlives_the_harness(tmp_path, how):
    """After a normal exit (atexit) or a kill -9 of the harness no server is left running, and the
    workspace of the killed harness is removed by the next sandbox created under the same root."""
    repo = Path(__file__).resolve().parents[2]
    root = tmp_path / "workspaces"
    script = textwrap.dedent(f"""
        import sys, time
        from medagentgym.config import SandboxConfig
        from medagentgym.sandbox import SandboxSpec, create_sandbox
        sb = create_sandbox(SandboxConfig(backend="process", workspace_root={str(root)!r}), SandboxSpec())
        assert sb.run_python("answer = 1").ok
        print(sb._server().pid, flush=True)
        if {how == "kill"!r}:
            time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(repo)})
    server_pid = int(proc.stdout.readline())
    if how == "kill":
        proc.kill()
    proc.wait(timeout=30)
    end = time.monotonic() + 10
    while _alive(server_pid) and time.monotonic() < end:
        time.sleep(0.05)
    assert not _alive(server_pid), f"server {server_pid} survived the harness ({how})"
    with create_sandbox(SandboxConfig(backend="process", workspace_root=str(root)), SandboxSpec()) as sb:
        assert [p.name for p in root.iterdir()] == [sb.workspace.name]


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_auto_falls_back_to_process_without_bwrap(monkeypatch):
    from medagentgym.sandbox import resolve_backend
    from medagentgym.sandbox.bwrap import bwrap_problem

    monkeypatch.setenv("PATH", "/nonexistent")
    bwrap_problem.cache_clear()
    try:
        assert resolve_backend("auto") == "process"
        with pytest.raises(UserError, match="apt-get install bubblewrap"):
            resolve_backend("bwrap")
    finally:
        monkeypatch.undo()
        bwrap_problem.cache_clear()
    assert resolve_backend("auto") == ("process" if bwrap_problem() else "bwrap")


def test_a_server_that_cannot_start_is_a_sandbox_error_not_a_crash():
    cfg = SandboxConfig(backend="process", python="/bin/true")
    with create_sandbox(cfg, SandboxSpec()) as sb:
        res = sb.run_python("answer = 1")
    assert res.status == "sandbox_error" and "did not start" in res.note
