"""docs/faults.md promises that every row is held by a test: each test it names must exist."""

from __future__ import annotations

import ast
import re

from repo_paths import ROOT

FAULTS = ROOT / "docs" / "faults.md"
TEST_REF = re.compile(r"(tests/[\w/]+\.py)::(\w+)")


def _rows() -> list[str]:
    lines = FAULTS.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.startswith("| ") and not line.startswith("| fault")]


def _test_functions(path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}


def test_every_row_names_a_test():
    rows = _rows()
    assert len(rows) >= 30
    missing = [row[:80] for row in rows if not TEST_REF.search(row.rsplit("|", 2)[-2])]
    assert not missing, missing


def test_every_named_test_exists():
    named = {ref for row in _rows() for ref in TEST_REF.findall(row)}
    absent = [f"{path}::{name}" for path, name in sorted(named)
              if not (ROOT / path).is_file() or name not in _test_functions(ROOT / path)]
    assert not absent, absent
