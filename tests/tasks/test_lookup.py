"""request_info's distinct-value index: cached beside the data, else in the user cache, rebuilt on change."""

from __future__ import annotations

import sqlite3

from medagentgym.tasks import lookup
from medagentgym.tasks.lookup import TableLookup, load_index


def make_db(path, drugs):
    con = sqlite3.connect(path)
    con.execute("create table prescriptions (row_id integer, drug text, startdate text)")
    con.executemany("insert into prescriptions values (?, ?, ?)",
                    [(i, d, f"2105-01-{1 + i % 28:02d} 10:00:00") for i, d in enumerate(drugs)])
    con.commit()
    con.close()


def test_index_cached_beside_data_and_rebuilt_when_db_changes(tmp_path):
    db = tmp_path / "x.db"
    make_db(db, ["heparin", "heparin", "aspirin"])
    index = load_index(db)
    assert (tmp_path / ".request_info" / "x.db.index.pkl").is_file()
    drug = next(c for c in index.tables["prescriptions"] if c.name == "drug")
    assert drug.n_distinct == 2 and sorted(drug.searchable) == ["aspirin", "heparin"]
    # Date columns are not searched by term: "2105" should find nothing there.
    assert not next(c for c in index.tables["prescriptions"] if c.name == "startdate").searchable
    db.unlink()
    make_db(db, ["warfarin"])
    assert "warfarin" in TableLookup(db)({"info_type": "term", "keyterm": "warfarin"})


def test_read_only_data_dir_uses_user_cache(tmp_path, monkeypatch):
    db = tmp_path / "data" / "x.db"
    db.parent.mkdir()
    make_db(db, ["heparin"])
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(lookup.os, "access", lambda path, mode: False)
    assert "heparin" in TableLookup(db)({"info_type": "term", "keyterm": "heprin"})
    assert not (db.parent / ".request_info").exists()
    assert list((tmp_path / "cache" / "medagentgym" / "request_info").glob("*-x.db.index.pkl"))


def test_high_cardinality_columns_keep_a_preview_only(tmp_path, monkeypatch):
    monkeypatch.setattr(lookup, "MAX_DISTINCT", 5)
    db = tmp_path / "x.db"
    make_db(db, [f"drug{i}" for i in range(20)])
    out = TableLookup(db)({"info_type": "column_values", "keyterm": "prescriptions.drug"})
    assert "20 distinct values" in out
    assert "No value close" in TableLookup(db)({"info_type": "term", "keyterm": "drug7"})
