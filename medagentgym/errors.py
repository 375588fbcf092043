"""User-facing errors: each carries one paragraph that names the fix. The CLI prints it without a traceback."""

from __future__ import annotations

from pathlib import Path


class UserError(Exception):
    """Bad input from the user (config, data, credentials). The message is shown as is."""


class TaskFileError(UserError):
    pass


class CredentialsError(UserError):
    pass


class ResumeConflictError(UserError):
    pass


class DataMissingError(UserError):
    def __init__(self, task: str, data_dir: Path, missing: list[str], how_to_obtain: str):
        self.missing = list(missing)
        shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
        super().__init__(
            f"Task {task!r} needs data that is not in {data_dir}: missing {shown}. {how_to_obtain} "
            f"Point data.root= (or MEDAGENTGYM_DATA) at the directory that holds {task}/, or run with data=sample."
        )
