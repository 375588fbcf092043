"""Run llama.cpp's OpenAI-compatible server in this process and exit as soon as the harness is gone.

Started by medagentgym.llm.local as ``python -P llama_server.py HARNESS_PID [llama_cpp.server args]``. The
harness stops the server itself on close, at exit and on Ctrl-C; this watch covers what no handler in the
harness can: SIGTERM, kill -9 or a crash. Run as a script (stdlib only) so that starting it does not pay
for importing medagentgym and the openai client.
"""

import os
import runpy
import sys
import threading
import time

POLL_S = 0.5


def watch_harness(harness_pid: int) -> None:
    # When the harness dies this process is re-parented, so its parent id changes.
    while os.getppid() == harness_pid:
        time.sleep(POLL_S)
    os._exit(0)


def main() -> None:
    harness_pid = int(sys.argv[1])
    threading.Thread(target=watch_harness, args=(harness_pid,), daemon=True).start()
    sys.argv = ["llama_cpp.server", *sys.argv[2:]]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
