"""Rules the code states about itself, checked on the source so they stay kept:

- small modules and functions (the package, the tools, the benchmarks, the generators);
- only the `yeto_otel.settings` room reads or writes the environment, and only the public entry
  points fall back to the settings (`load_settings()`, `current_settings()`) when not given
  their values;
- every metric, span and attribute name is spelled once, in its table: no other module of
  the package holds one as a string;
- each room's modules are private by name; rooms use each other only through their faces.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from repo_paths import ROOT
from yeto_otel.census import CENSUS, CENSUS_ERRORS
from yeto_otel.names import RESUME_METRICS, SPANS, prometheus_name_of

PACKAGE = ROOT / "src" / "yeto_otel"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
SIZED = [PACKAGE, ROOT / "tools", ROOT / "benchmarks", ROOT / "collector"]
ROOMS = ("proc", "census", "anchors", "names", "otel", "instrumentation", "cli", "settings",
         "exits")


def python_files(*roots: Path) -> list[Path]:
    return sorted(p for root in roots for p in root.rglob("*.py")
                  if "build" not in p.relative_to(ROOT).parts)


def package_modules() -> list[Path]:
    return python_files(PACKAGE)


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)


# --- sizes -----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", python_files(*SIZED), ids=lambda p: str(p.relative_to(ROOT)))
def test_modules_and_functions_are_small(path: Path):
    source = path.read_text(encoding="utf-8")
    lines = source.count("\n")
    assert lines <= MAX_MODULE_LINES, f"{lines} lines: split it by what each part does"
    long = [f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {', '.join(long)}"


# --- the environment -------------------------------------------------------------------------

# The public entry points that may fall back to the environment when a value is not passed in
# (module -> functions). Everything else receives its values.
ENVIRONMENT_EDGES = {
    "yeto_otel.anchors._resume": {"load_resume_anchors"},
    "yeto_otel.anchors._save": {"save_resume_anchors"},
    "yeto_otel.census._step_log": {"add_census_to_step_log"},
    "yeto_otel.instrumentation._host_memory": {"_instrument"},
    "yeto_otel.instrumentation._dataloader": {"_instrument"},
    "yeto_otel.instrumentation._rank_exits": {"_instrument", "_watch_workers"},
    "yeto_otel.otel._configurator": {"_configure"},
    "yeto_otel.otel._foreign": {"_take_charge"},
    "yeto_otel.otel._start": {"_decide_and_prepare"},
    "yeto_otel.otel._resource": {"detect"},
    "yeto_otel.otel._setup": {"destination"},
    "yeto_otel.cli._census": {"run"},
    "yeto_otel.cli.demo._command": {"run"},
}


def _environment_uses(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "putenv",
                                                             "unsetenv", "environb"):
            found.append(f"line {node.lineno}: .{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module == "os" and \
                any(a.name in ("environ", "getenv", "putenv") for a in node.names):
            found.append(f"line {node.lineno}: from os import ...")
    return found


@pytest.mark.parametrize("path", package_modules(), ids=module_name)
def test_only_settings_touches_the_environment(path: Path):
    if in_settings_room(path):
        return
    assert _environment_uses(ast.parse(path.read_text(encoding="utf-8"))) == []


def in_settings_room(path: Path) -> bool:
    return module_name(path).split(".")[:2] == ["yeto_otel", "settings"]


SETTINGS_READERS = ("load_settings", "current_settings")


def _functions_calling(tree: ast.AST, *callees: str) -> set[str]:
    callers = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Call) and getattr(inner.func, "id", None) in callees:
                    callers.add(node.name)
    return callers


@pytest.mark.parametrize("path", package_modules(), ids=module_name)
def test_settings_are_read_only_at_the_edges(path: Path):
    name = module_name(path)
    if in_settings_room(path):
        return
    callers = _functions_calling(ast.parse(path.read_text(encoding="utf-8")), *SETTINGS_READERS)
    assert callers <= ENVIRONMENT_EDGES.get(name, set()), (
        f"{name} reads settings in {sorted(callers)}: pass the values in instead")


def test_the_edges_list_is_current():
    """A stale entry in ENVIRONMENT_EDGES would let a new reader slip in unnoticed."""
    for name, functions in ENVIRONMENT_EDGES.items():
        path = PACKAGE.parent / (name.replace(".", "/") + ".py")
        assert path.is_file(), name
        assert functions <= _functions_calling(ast.parse(path.read_text()), *SETTINGS_READERS), \
            name


# --- names -----------------------------------------------------------------------------------

# The tables: the only modules that may spell a metric, span or attribute name.
TABLES = {"yeto_otel.census._table", "yeto_otel.names._spans", "yeto_otel.names._resume_metrics",
          "yeto_otel.names._exit_names",
          "yeto_otel.otel._resource"}  # the resource attributes' own (the exit span has yeto.rank)


def table_names() -> set[str]:
    names = set()
    for row in (*CENSUS, CENSUS_ERRORS, *RESUME_METRICS):
        names |= {row.name, prometheus_name_of(row)}
    for row in CENSUS:
        names.add(row.step_log_key)
    for span in SPANS:
        names.add(span.name)
        names |= {a.name for a in span.attributes}
        for event in span.events:
            names.add(event.name)
            names |= {a.name for a in event.attributes}
    # Our own namespaces, and the census rows that carry the semantic conventions' names: the
    # `torch.load` span is named after the function, and prose about the function is not a
    # spelled span name.
    semconv = {n for row in CENSUS if row.semconv for n in (row.name, prometheus_name_of(row))}
    return {n for n in names if n.startswith(("yeto", "host_mem"))} | semconv


def _strings_outside_docstrings(tree: ast.AST):
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = getattr(node, "body", [])
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                id(node) not in docstrings:
            yield node


def spelled_names(source: str, names: set[str]) -> list[str]:
    pattern = re.compile(r"(?<![\w.])(" + "|".join(sorted(map(re.escape, names), key=len,
                                                          reverse=True)) + r")(?![\w])")
    found = []
    for node in _strings_outside_docstrings(ast.parse(source)):
        found += [f"line {node.lineno}: {m}" for m in pattern.findall(node.value)]
    return found


@pytest.mark.parametrize("path", package_modules(), ids=module_name)
def test_names_come_from_their_tables(path: Path):
    if module_name(path) in TABLES:
        return
    assert spelled_names(path.read_text(encoding="utf-8"), table_names()) == []


def test_the_names_check_catches_a_spelled_name():
    names = table_names()
    assert spelled_names('x = "yeto.process.memory.rss"', names) == \
        ["line 1: yeto.process.memory.rss"]
    assert spelled_names('q = f"rate(yeto_census_errors_total[5m])"', names) == \
        ["line 1: yeto_census_errors_total"]
    assert spelled_names('"""Reads yeto.process.memory.rss."""', names) == []  # a docstring
    assert spelled_names('x = "yeto.process.memory.rss_peak"', names) == \
        ["line 1: yeto.process.memory.rss_peak"]  # the longer name, not its prefix
    assert spelled_names('q = "process_memory_usage_bytes"', names) == \
        ["line 1: process_memory_usage_bytes"]  # the semantic conventions' names too
    assert spelled_names('x = "yeto.process.memory.usage_x"', names) == []


# --- rooms -----------------------------------------------------------------------------------


def test_each_room_is_a_package_with_private_modules():
    for room in ROOMS:
        folder = PACKAGE / room
        assert (folder / "__init__.py").is_file(), room
        public = [p.name for p in folder.rglob("*.py")
                  if not p.name.startswith("_") and p.name != "__init__.py"]
        assert public == [], f"{room}/: modules not private by name: {public}"


_RELATIVE_PRIVATE = re.compile(r"^\s*from\s+(\.\.+)([\w.]*)\s+import", re.M)


@pytest.mark.parametrize("path", package_modules(), ids=module_name)
def test_rooms_meet_only_through_their_faces(path: Path):
    """`from ..census._snapshot import X` from another room would bypass the census face."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = module_name(path).split(".")
    offenders = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level >= 2 and node.module:
            target = here[:len(here) - node.level] + node.module.split(".")
            room = target[1] if len(target) > 1 else None
            private = any(part.startswith("_") for part in target[2:])
            if room in ROOMS and room != here[1] and private:
                offenders.append(f"line {node.lineno}: {'.'.join(target)}")
    assert offenders == []
