"""Golden cases for the whole-gold-list set comparison."""

from __future__ import annotations

import pytest

from medagentgym.grading.answers import NO_ANSWER
from medagentgym.grading.sets import compare_sets, flatten_items


@pytest.mark.parametrize(
    ("gold", "submitted", "boolean", "expected"),
    [
        (["po", "po/ng"], ["po", "po/ng"], False, True),
        (["po", "po/ng"], ("PO/NG", " po "), False, True),  # case and surrounding whitespace
        (["left  heart cath"], "Left heart\tcath", False, True),  # inner whitespace runs collapse
        (["po", "po/ng"], ["po"], False, False),  # every gold item is required
        (["po"], ["po", "iv"], False, False),  # nothing extra
        (["po", "po/ng"], "po, po/ng", False, False),  # one string is one item
        (["2"], 2.0, False, True),
        (["2"], "2.0", False, True),
        (["2"], 12, False, False),
        (["2"], 20, False, False),
        (["10386"], "10,386", False, True),
        (["75.33333333333333"], 75.33333333333334, False, True),  # float noise
        (["75.33333333333333"], 75.33, False, False),  # rounding changes the answer
        (["-355"], -355, False, True),
        (["0"], 0, False, True),
        (["0"], False, False, False),  # True/False are not numbers unless the query is yes/no
        (["1"], True, False, False),
        (["1"], True, True, True),
        (["0"], False, True, True),
        (["0"], "false", True, True),
        (["1"], False, True, False),
        (["None"], None, False, True),
        (["None"], "null", False, True),
        (["None"], 0, False, False),  # the original mapped None to "0"
        (["None"], "", False, False),
        (["None"], [], False, False),
        (["True"], True, False, True),
        (["True"], "true", False, True),
        (["True"], 1, False, False),
        (["-354", "-354"], -354, False, True),  # duplicate gold rows are one item of the set
        (["2182-04-24 21:20:00", "Circumcision"], [("2182-04-24 21:20:00", "circumcision")], False, True),
        (["a", "b"], [("a",), ("b",)], False, True),  # cursor.fetchall() rows
        (["a", "b"], [["a"], ["b"], ["c"]], False, False),
        (["5"], list(range(20)), False, False),  # a dump of every candidate
        (["5"], NO_ANSWER, False, False),
        (["5"], "", False, False),
    ],
)
def test_compare_sets(gold, submitted, boolean, expected):
    result = compare_sets(gold, submitted, boolean=boolean)
    assert result.correct is expected, result.reason


def test_reason_names_missing_and_extra():
    reason = compare_sets(["a", "b"], ["a", "c", "d"]).reason
    assert "1 of 2 gold item(s) missing" in reason and "2 extra" in reason


def test_flatten_items():
    assert flatten_items(5) == [5]
    assert flatten_items([(1, 2), 3, [4]]) == [1, 2, 3, 4]
    assert flatten_items("ab") == ["ab"]
