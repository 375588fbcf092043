"""The attack suite: hostile agent code through the real interface, on both backends. Each attack must
leave the harness alive and the episode usable, with a result that says what happened, and nothing
leaked or left behind. Where the default backend cannot stop an attack by design, the test checks that
describe() says so instead."""

from __future__ import annotations

import ast
import base64
import hashlib
import importlib.util
import socket
import threading
import uuid
import zipfile
from pathlib import Path

import pytest

from medagentgym.sandbox import SandboxSpec
from tests.sandbox.procs import RENAME, wait_gone

SECRET = "sk-attack-suite-0123456789"


def _still_usable(sb) -> None:
    res = sb.run_python("answer = 6 * 7")
    assert res.ok and res.answer == "42", res


def test_reading_credentials_from_the_environment(make_sandbox, backend, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    sb = make_sandbox()
    code = """
import os, glob
found = [dict(os.environ)]
for path in glob.glob('/proc/*/environ') + glob.glob('/proc/*/task/*/environ'):
    try:
        found.append(open(path, 'rb').read().decode(errors='replace'))
    except OSError:
        pass
print(found)
answer = str(found)
"""
    res = sb.run_python(code)
    assert SECRET not in res.stdout + res.stderr + str(res.answer)
    if backend == "bwrap":  # own pid namespace: the harness is not even visible to shell commands
        res = sb.run_shell("cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; env")
        assert SECRET not in res.stdout + res.stderr
    _still_usable(sb)


@pytest.mark.parametrize("linked", [False, True], ids=["dir", "symlinked-dir"])
def test_reading_task_files_with_gold_answers(make_sandbox, backend, tmp_path, linked):
    real = tmp_path / "real-task"
    real.mkdir()
    data = tmp_path / "task"
    if linked:  # data dirs are often symlinks: the gold must stay hidden under both names
        data.symlink_to(real)
    else:
        data = real
    (data / "public.csv").write_text("x\n1\n")
    gold = data / "test_tasks.jsonl"
    gold.write_text('{"answer": "GOLD-ANSWER-731"}\n')
    solutions = data / "solutions"
    solutions.mkdir()
    (solutions / "ref.py").write_text("answer = 'GOLD-ANSWER-731'\n")
    spec = SandboxSpec(readonly_paths=[data], hidden_paths=[gold, solutions])
    sb = make_sandbox(spec=spec)
    for hidden in (gold, solutions / "ref.py"):
        res = sb.run_python(f"import os\nprint(open({str(data / 'public.csv')!r}).read())\n"
                            f"print(open({str(hidden)!r}).read())")
        assert "x\n1" in res.stdout and "GOLD-ANSWER-731" not in res.stdout + res.stderr
        assert res.status == "error" and ("Permission denied" in res.stderr or "No such file" in res.stderr)
    shell = sb.run_shell(f"cat {gold}; grep -r GOLD-ANSWER {data}/ {real}/ /tmp 2>/dev/null")
    if backend == "bwrap":
        assert "GOLD-ANSWER-731" not in shell.stdout + shell.stderr
    else:
        assert "hidden task files are only blocked for Python open()" in sb.describe()
    _still_usable(sb)


def test_writing_outside_the_workspace(make_sandbox, backend, tmp_path):
    outside = [tmp_path / "escaped.txt", Path(f"/tmp/mag-escaped-{uuid.uuid4().hex}.txt")]
    if backend == "bwrap":  # the default backend would really write there: only aim at the root when isolated
        outside.append(Path(f"/mag-escaped-{uuid.uuid4().hex}.txt"))
    sb = make_sandbox()
    code = f"""
import os
results = {{}}
for path in {[str(p) for p in outside]!r} + [os.path.expanduser('~/inside.txt')]:
    try:
        open(path, 'w').write('x')
        results[path] = 'written'
    except OSError as exc:
        results[path] = type(exc).__name__
answer = results
"""
    res = sb.run_python(code)
    results = ast.literal_eval(res.answer)
    assert results.pop(str(sb.workspace / "inside.txt")) == "written"
    escaped = [p for p in outside if p.exists()]
    for p in escaped:
        p.unlink()
    if backend == "bwrap":
        assert escaped == [] and all(v != "written" for v in results.values()), results
    else:
        assert "NOT active: filesystem isolation" in sb.describe()
    _still_usable(sb)


def test_fork_bomb_is_bounded_and_cleaned_up(make_sandbox):
    sb = make_sandbox(max_processes=16, timeout=10)
    res = sb.run_python(RENAME.format(name="magbomb") + "import os\nwhile True:\n    os.fork()")
    assert res.status == "limit" and "16 processes" in res.note, res
    assert wait_gone("magbomb") == []
    _still_usable(sb)


def test_shell_fork_bomb_is_bounded_and_cleaned_up(make_sandbox):
    sb = make_sandbox(max_processes=16, timeout=2)
    # A copy of sh under its own name, so that the host can tell the bomb's processes from everyone else's.
    res = sb.run_shell("cp /bin/sh ./magshbomb && ./magshbomb -c 'b() { b | b & }; b; wait' 2>/dev/null")
    assert res.status != "sandbox_error" and res.duration_s < 8, res
    assert wait_gone("magshbomb") == []
    _still_usable(sb)


def test_allocating_64_gb(make_sandbox):
    sb = make_sandbox(memory_mb=1024)
    res = sb.run_python("x = bytearray(64 * 2**30)")
    assert res.status == "limit" and "memory limit of 1024 MB" in res.note, res
    res = sb.run_python("import numpy as np\nx = np.ones(8 * 2**30)")
    assert res.status == "limit" and "MemoryError" in res.note + res.stderr, res
    _still_usable(sb)


def test_infinite_loop_and_sleep_past_the_timeout(make_sandbox):
    sb = make_sandbox(timeout=0.5)
    attacks = [("python", "print('started')\nwhile True:\n    pass"), ("python", "import time\ntime.sleep(100)"),
               ("shell", "sleep 100")]
    for kind, code in attacks:
        res = sb.run_python(code) if kind == "python" else sb.run_shell(code)
        assert res.status == "timeout" and "timeout after 0.5 s" in res.note, res
        assert res.duration_s < 4
        assert ("started" in res.stdout) == ("started" in code)  # output printed before the kill is kept
    _still_usable(sb)


def test_cpu_time_limit(make_sandbox):
    sb = make_sandbox(timeout=20, cpu_time=1)
    res = sb.run_python("while True:\n    pass")
    assert res.status == "limit" and "CPU time limit of 1 s" in res.note, res


def test_printing_100_mb(make_sandbox):
    sb = make_sandbox(max_output_bytes=10_000)
    res = sb.run_python("import sys\nchunk = 'x' * 1_000_000\nfor _ in range(100):\n    sys.stdout.write(chunk)\n"
                        "print('tail', file=sys.stderr)\nanswer = 'done'")
    assert res.ok and res.answer == "'done'" and len(res.stdout) == 10_000 and res.stderr == "tail\n"
    assert "stdout cut: 99990000 bytes beyond the 10000-byte limit" in res.note
    _still_usable(sb)


def test_background_process_in_a_new_session_is_killed(make_sandbox):
    sb = make_sandbox()
    code = f"""
import subprocess, sys, os
child = {RENAME.format(name='magbg')!r} + 'import time\\ntime.sleep(300)'
subprocess.Popen([sys.executable, '-c', child], start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
if os.fork() == 0:  # a classic daemon: double fork, new session
    os.setsid()
    if os.fork() == 0:
        exec(child)
    os._exit(0)
os.wait()
import time
time.sleep(0.5)
answer = 'left them running'
"""
    res = sb.run_python(code)
    assert res.ok and "killed 2 process(es) still running" in res.note, res
    assert wait_gone("magbg") == []
    _still_usable(sb)


def test_killing_the_sandbox_server(make_sandbox):
    """Agent code runs as the same user as its server, so it can kill it: that execution is a
    sandbox_error (infrastructure), and the next one gets a fresh server."""
    sb = make_sandbox()
    res = sb.run_python("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nimport time\ntime.sleep(2)")
    assert res.status == "sandbox_error" and "no report" in res.note, res
    _still_usable(sb)


@pytest.fixture
def tcp_service():
    """A one-line TCP service on the host's loopback: returns its port."""
    lsock = socket.create_server(("127.0.0.1", 0))

    def serve():
        while True:
            try:
                conn, _ = lsock.accept()
            except OSError:
                return
            conn.sendall(b"hello from the host\n")
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    yield lsock.getsockname()[1]
    lsock.close()


CONNECT = """
import socket
try:
    s = socket.create_connection(('127.0.0.1', {port}), timeout=3)
    answer = s.recv(100).decode()
except OSError as exc:
    answer = type(exc).__name__
"""


def test_connecting_to_the_host_loopback(make_sandbox, backend, tcp_service):
    sb = make_sandbox()
    res = sb.run_python(CONNECT.format(port=tcp_service))
    if backend == "bwrap":
        assert res.answer == "'ConnectionRefusedError'", res
    else:
        assert "network isolation" in sb.describe().split("NOT active")[1]
    _still_usable(sb)


def test_an_allowed_host_and_nothing_else_is_reachable(make_sandbox, backend, tcp_service):
    if backend != "bwrap":
        pytest.skip("the process backend does not isolate the network")
    with socket.create_server(("127.0.0.1", 0)) as other:
        other_port = other.getsockname()[1]
        sb = make_sandbox(spec=SandboxSpec(allow_hosts=[f"127.0.0.1:{tcp_service}"]))
        assert f"network=off except 127.0.0.1:{tcp_service}" in sb.describe()
        assert sb.run_python(CONNECT.format(port=tcp_service)).answer == "'hello from the host\\n'"
        assert sb.run_python(CONNECT.format(port=other_port)).answer == "'ConnectionRefusedError'"


def _wheel(directory: Path, name: str) -> Path:
    """A minimal pure-Python wheel, built here so that `pip install` needs no network."""
    files = {f"{name}/__init__.py": b"VALUE = 'installed in the episode'\n",
             f"{name}-0.1.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n".encode(),
             f"{name}-0.1.dist-info/WHEEL":
                 b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{name}-0.1.dist-info/RECORD,,")
    out = directory / f"{name}-0.1-py3-none-any.whl"
    with zipfile.ZipFile(out, "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
        zf.writestr(f"{name}-0.1.dist-info/RECORD", "\n".join(record) + "\n")
    return out


@pytest.mark.slow
def test_pip_install_stays_in_the_episode(make_sandbox):
    name = "magattackpkg"
    sb = make_sandbox(timeout=60)
    wheel = _wheel(sb.workspace, name)
    res = sb.run_shell(f"python -m pip install --no-index {wheel.name}")
    assert res.ok, res
    res = sb.run_python(f"import {name}\nanswer = {name}.VALUE")
    assert res.answer == "'installed in the episode'", res
    assert importlib.util.find_spec(name) is None  # the harness's environment is unchanged
    other = make_sandbox()
    assert other.run_python(f"import {name}").status == "error"  # and so is the next episode's
