"""request_info over a task's SQLite tables: column names, column values, fuzzy term search.

The original re-read every CSV and computed an edit distance per cell in Python on every call. Here the
distinct values of each column are read once (``SELECT DISTINCT``), pickled beside the database (or in a
user cache dir when the data dir is read-only) and kept in memory; a term lookup is then one rapidfuzz
scan over the distinct text values, which are far fewer than the cells.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
import sqlite3
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rapidfuzz import fuzz, process

INDEX_VERSION = 1
# Columns with more distinct values than this are identifiers or free text: only a preview is kept and
# they are left out of term search (their values are better found with SQL).
MAX_DISTINCT = 200_000
PREVIEW = 30
_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2})?)?")


@dataclass
class ColumnIndex:
    name: str
    n_distinct: int
    preview: list[str]
    # Distinct values searched by `term` (text columns only, lower-cased beside the originals).
    searchable: list[str] = field(default_factory=list)


@dataclass
class DatabaseIndex:
    tables: dict[str, list[ColumnIndex]]
    # Flattened search space: parallel lists of (table, column) owners and lower-cased values.
    owners: list[tuple[str, str]] = field(default_factory=list)
    values: list[str] = field(default_factory=list)
    originals: list[str] = field(default_factory=list)


def _stamp(db: Path) -> str:
    st = db.stat()
    return f"v{INDEX_VERSION}-{st.st_size}-{st.st_mtime_ns}"


def _cache_path(db: Path) -> Path:
    beside = db.parent / ".request_info" / f"{db.name}.index.pkl"
    if os.access(db.parent, os.W_OK):
        return beside
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "medagentgym" / "request_info"
    digest = hashlib.sha256(str(db.resolve()).encode()).hexdigest()[:16]
    return base / f"{digest}-{db.name}.index.pkl"


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def build_index(db: Path) -> DatabaseIndex:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        names = [r[0] for r in con.execute("select name from sqlite_master where type='table' order by name")]
        tables: dict[str, list[ColumnIndex]] = {}
        for table in names:
            cols = [r[1] for r in con.execute(f"pragma table_info({_quote(table)})")]
            entries = []
            for col in cols:
                q = f"select distinct {_quote(col)} from {_quote(table)} where {_quote(col)} is not null"
                cur = con.execute(q + f" limit {MAX_DISTINCT + 1}")
                distinct = [r[0] for r in cur]
                n = len(distinct)
                if n > MAX_DISTINCT:
                    n = con.execute(f"select count(*) from ({q})").fetchone()[0]
                texts = [v for v in distinct if isinstance(v, str)]
                searchable = []
                if n <= MAX_DISTINCT and texts and not all(_DATETIME.match(v) for v in texts[:50]):
                    searchable = texts
                entries.append(ColumnIndex(col, n, [str(v) for v in distinct[:PREVIEW]], searchable))
            tables[table] = entries
    finally:
        con.close()
    index = DatabaseIndex(tables)
    for table, entries in tables.items():
        for entry in entries:
            index.owners.extend([(table, entry.name)] * len(entry.searchable))
            index.originals.extend(entry.searchable)
            index.values.extend(v.casefold() for v in entry.searchable)
    return index


def load_index(db: Path) -> DatabaseIndex:
    """The cached index of ``db``, rebuilt when the database file changed."""
    db = Path(db)
    path, stamp = _cache_path(db), _stamp(db)
    try:
        with open(path, "rb") as fh:
            cached_stamp, index = pickle.load(fh)
        if cached_stamp == stamp:
            return index
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, AttributeError):
        pass
    index = build_index(db)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Written to a temporary name and renamed so that parallel episodes never read half a file.
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".idx-")
        with os.fdopen(fd, "wb") as fh:
            pickle.dump((stamp, index), fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except OSError:
        pass  # An unwritable cache only costs a rebuild next time.
    return index


class TableLookup:
    """request_info for one database; thread-safe, the index is loaded on first use."""

    def __init__(self, db: Path, limit: int = 10):
        self.db = Path(db)
        self.limit = limit
        self._index: DatabaseIndex | None = None
        self._lock = threading.Lock()

    @property
    def index(self) -> DatabaseIndex:
        with self._lock:
            if self._index is None:
                self._index = load_index(self.db)
            return self._index

    def __call__(self, params: dict[str, Any]) -> str:
        info_type = str(params.get("info_type", "")).strip()
        keyterm = str(params.get("keyterm", "")).strip()
        if not keyterm:
            return "request_info needs a non-empty keyterm."
        if info_type == "column_names":
            return self.column_names(keyterm)
        if info_type == "column_values":
            return self.column_values(keyterm)
        if info_type == "term":
            return self.term(keyterm)
        return f"Unknown info_type {info_type!r}; use column_names, column_values or term."

    def _table(self, name: str) -> str | None:
        by_lower = {t.casefold(): t for t in self.index.tables}
        return by_lower.get(name.strip().casefold().removesuffix(".csv"))

    def column_names(self, table: str) -> str:
        found = self._table(table)
        if found is None:
            return f"No table named {table!r}. Tables: {', '.join(self.index.tables)}."
        cols = ", ".join(c.name for c in self.index.tables[found])
        return f"Columns of {found}: {cols}."

    def column_values(self, keyterm: str) -> str:
        table, sep, column = keyterm.partition(".")
        found = self._table(table) if sep else None
        if found is None:
            return f"Give keyterm as table.column (e.g. {next(iter(self.index.tables), 'table')}.column)."
        entry = next((c for c in self.index.tables[found] if c.name.casefold() == column.strip().casefold()), None)
        if entry is None:
            cols = ", ".join(c.name for c in self.index.tables[found])
            return f"Table {found} has no column {column!r}. Columns: {cols}."
        shown = ", ".join(entry.preview)
        more = f" (first {len(entry.preview)} shown)" if entry.n_distinct > len(entry.preview) else ""
        return f"{found}.{entry.name} has {entry.n_distinct} distinct values{more}: {shown}."

    def term(self, term: str) -> str:
        """Values containing or resembling the term: exact matches first, then by similarity."""
        index = self.index
        needle = term.casefold()
        # partial_ratio scores a value containing the term at 100 and is several times cheaper than
        # WRatio. It also scores a short value contained in the term at 100 ("m" in "furosemide"), so
        # values shorter than the term must resemble it as a whole; the rest is re-ranked by similarity.
        hits = process.extract(
            needle, index.values, scorer=fuzz.partial_ratio, processor=None, limit=self.limit * 10,
            score_cutoff=70,
        )
        hits = [h for h in hits if len(h[0]) >= len(needle) or fuzz.ratio(needle, h[0]) >= 70]
        if not hits:
            return f"No value close to {term!r} in any table."
        ranked = sorted(hits, key=lambda h: (h[0] != needle, -h[1], -fuzz.ratio(needle, h[0])))
        lines = []
        for _, score, pos in ranked[: self.limit]:
            table, column = index.owners[pos]
            lines.append(f"- {table}.{column}: {index.originals[pos]!r} (similarity {score:.0f})")
        return f"Values matching {term!r}:\n" + "\n".join(lines)
