"""Deterministic synthetic sample data, generated on first use into data_root/<task>/.

Generation goes to a temporary sibling directory and is renamed into place, so concurrent jobs of a
sweep never see half a sample. A stamp records a hash of the generator's source (the task's module and every
module of this package, since generators share helpers): editing one regenerates the samples.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import shutil
import tempfile
from pathlib import Path

STAMP = ".sample_stamp"


def _fingerprint(task_cls: type) -> str:
    h = hashlib.sha256(inspect.getsource(inspect.getmodule(task_cls)).encode())
    for path in sorted(Path(__file__).parent.glob("*.py")):
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def ensure_sample(task_cls: type, out_dir: Path) -> Path:
    out_dir = Path(out_dir)
    stamp = out_dir / STAMP
    fp = _fingerprint(task_cls)
    if stamp.exists() and stamp.read_text() == fp:
        return out_dir
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}-", dir=out_dir.parent))
    try:
        task_cls.make_sample(tmp)
        (tmp / STAMP).write_text(fp)
        old = None
        if out_dir.exists():
            old = out_dir.with_name(f".{out_dir.name}-old-{os.getpid()}")
            os.replace(out_dir, old)
        try:
            os.replace(tmp, out_dir)
        except OSError:
            # Another process finished first; its copy is equally valid.
            if not (out_dir / STAMP).exists():
                raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out_dir
