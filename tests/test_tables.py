"""The one table helper (kvcontract.reports): text and markdown, one cell escape."""

from __future__ import annotations

import pytest

from kvcontract.reports import markdown_table, md_cell, text_table


def test_markdown_cells_are_escaped_once_and_kept_on_one_line():
    assert md_cell("a|b\nc") == "a\\|b c"
    lines = markdown_table(["name", "n"], [["x|y", 3]], align="<>")
    assert lines == ["| name | n |", "|:---|---:|", "| x\\|y | 3 |"]


def test_text_columns_are_as_wide_as_their_widest_cell():
    lines = text_table(["clause", "n"], [["MERGE-ORDER-1", 3], ["A", 120]], align="<>")
    assert lines[0].startswith("clause") and lines[1] == "-" * len(lines[2])
    assert lines[2] == "MERGE-ORDER-1    3" and lines[3] == "A              120"


def test_a_row_of_the_wrong_width_is_refused():
    with pytest.raises(ValueError, match="2 columns"):
        text_table(["a", "b"], [["only one"]])
    with pytest.raises(ValueError, match="2 columns"):
        markdown_table(["a", "b"], [["1", "2", "3"]])
