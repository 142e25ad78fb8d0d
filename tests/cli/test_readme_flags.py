"""README's entry-point table stays true: it names every reproduce entry, and every ``--flag``
a row gives for an entry is one that entry's parser takes."""
from __future__ import annotations

import functools
import importlib
import re
from pathlib import Path

import pytest

import reproduce
from reproduce import common

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^\| `python3 -m reproduce\.(\w+)([^`]*)` \|(.*)$", re.M)


@functools.cache
def _rows() -> dict[str, str]:
    """``{entry: the row's text}`` of README's ``python3 -m reproduce.ENTRY`` rows (read once)."""
    text = (ROOT / "README.md").read_text()
    return {name: extra + " |" + rest for name, extra, rest in ROW.findall(text)}


def _unknown_flags(name: str, row: str) -> list[str]:
    entry = importlib.import_module(reproduce.ENTRIES[name])
    known = set(common._parser(entry, entry.Config)._option_string_actions)
    named = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", row))
    return sorted(named - known)


def test_the_table_names_every_entry():
    rows = _rows()
    assert set(reproduce.ENTRIES) <= set(rows), set(reproduce.ENTRIES) - set(rows)


@pytest.mark.parametrize("name", sorted(reproduce.ENTRIES))
def test_every_flag_a_row_names_is_the_entrys(name):
    row = _rows()[name]
    assert _unknown_flags(name, row) == []


def test_a_flag_the_entry_lacks_is_caught():
    name = "fedlamb_fig12"
    row = _rows()[name]
    assert _unknown_flags(name, row + " `--no-such-flag`") == ["--no-such-flag"]
