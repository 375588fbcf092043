"""Credentials: read from the environment or a TOML file, and kept out of everything we write.

Configs only ever hold the *name* of a variable (``model.api_key_env``); values are resolved here at
client-construction time. Every value handed out is remembered so the log filter and the record
writer can redact it should a model or a server echo it back.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import toml

from medagentgym.errors import CredentialsError

_known: set[str] = set()
_lock = threading.Lock()
REDACTED = "[REDACTED]"


def _remember(value: str) -> None:
    if len(value) >= 8:
        with _lock:
            _known.add(value)


def load_credentials_file(path: str | os.PathLike | None) -> dict[str, str]:
    """KEY = "value" lines (TOML). A missing or malformed file is a user error naming the fix."""
    if not path:
        return {}
    p = Path(path).expanduser()
    if not p.is_file():
        raise CredentialsError(
            f"credentials_path={str(path)!r} does not exist. Create it with one KEY = \"value\" line per "
            "secret (e.g. OPENAI_API_KEY = \"sk-...\"), or drop credentials_path and export the variables."
        )
    try:
        data = toml.load(p)
    except (toml.TomlDecodeError, UnicodeDecodeError) as exc:
        raise CredentialsError(
            f"credentials file {p} is not valid TOML ({str(exc).splitlines()[0]}). Write one "
            "KEY = \"value\" line per secret, with the value in double quotes."
        ) from None
    bad = [k for k, v in data.items() if not isinstance(v, str)]
    if bad:
        raise CredentialsError(
            f"credentials file {p}: {', '.join(bad)} must be quoted strings (KEY = \"value\")."
        )
    return data


def get_secret(name: str, credentials_path: str | None = None, what: str = "API key") -> str:
    """The value of ``name`` from the environment, else from the credentials file."""
    value = os.environ.get(name) or load_credentials_file(credentials_path).get(name)
    if not value:
        where = f" or in the credentials file {credentials_path}" if credentials_path else ""
        raise CredentialsError(
            f"The {what} is missing: set the environment variable {name}{where} "
            f"(e.g. `export {name}=...`, or credentials_path=FILE with a line {name} = \"...\"). "
            "To run without any key use +model=local or +model=oracle."
        )
    _remember(value)
    return value


def redact(text: str) -> str:
    with _lock:
        known = list(_known)
    for value in known:
        if value in text:
            text = text.replace(value, REDACTED)
    return text


class RedactFilter(logging.Filter):
    """Scrubs known secret values from log records before any handler formats them."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _known:
            record.msg = redact(record.getMessage())
            record.args = None
        return True
