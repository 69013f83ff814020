"""post_import.when_imported: a callback once a module is first imported, without importing it."""

import importlib
import importlib.resources
import itertools
import logging
import pkgutil
import sys
import threading

import pytest

from yeto_otel.instrumentation import ImportWatch, when_imported

_names = itertools.count()


@pytest.fixture
def fresh_module(tmp_path, monkeypatch):
    """The name of a module that exists on sys.path but has never been imported."""
    name = f"yeto_fresh_module_{next(_names)}"
    (tmp_path / f"{name}.py").write_text("EXECUTED = True\nVALUE = 41 + 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    assert name not in sys.modules
    yield name
    sys.modules.pop(name, None)
    for finder in [f for f in sys.meta_path if isinstance(f, ImportWatch) and f.name == name]:
        sys.meta_path.remove(finder)


def _watchers(name):
    return [f for f in sys.meta_path if isinstance(f, ImportWatch) and f.name == name]


def test_callback_runs_once_after_the_first_import(fresh_module):
    seen = []
    watch = when_imported(fresh_module, lambda m: seen.append((m, m.VALUE)))
    assert isinstance(watch, ImportWatch)
    assert fresh_module not in sys.modules  # watching does not import it
    assert seen == [] and _watchers(fresh_module) == [watch]

    module = importlib.import_module(fresh_module)
    assert seen == [(module, 42)]  # after the module's code ran, with the module itself
    assert _watchers(fresh_module) == []  # the watcher removed itself

    importlib.import_module(fresh_module)
    assert len(seen) == 1


def test_callback_sees_the_module_fully_executed(fresh_module):
    states = []
    when_imported(fresh_module, lambda m: states.append(getattr(m, "EXECUTED", False)))
    __import__(fresh_module)
    assert states == [True]


def test_module_reimported_after_removal_does_not_fire_again(fresh_module):
    seen = []
    when_imported(fresh_module, lambda m: seen.append(m))
    importlib.import_module(fresh_module)
    del sys.modules[fresh_module]
    importlib.import_module(fresh_module)
    assert len(seen) == 1


def test_runs_immediately_when_already_imported(fresh_module):
    module = importlib.import_module(fresh_module)
    seen = []
    assert when_imported(fresh_module, seen.append) is None
    assert seen == [module]
    assert _watchers(fresh_module) == []


def test_cancel_removes_the_watcher_and_the_callback_never_runs(fresh_module):
    seen = []
    watch = when_imported(fresh_module, seen.append)
    assert watch in sys.meta_path
    watch.cancel()
    assert watch not in sys.meta_path
    watch.cancel()  # twice is harmless
    module = importlib.import_module(fresh_module)
    assert seen == [] and module.VALUE == 42


def test_watch_does_not_change_other_imports_or_the_module(fresh_module, tmp_path):
    other = f"{fresh_module}_other"
    (tmp_path / f"{other}.py").write_text("X = 1\n")
    importlib.invalidate_caches()
    seen = []
    watch = when_imported(fresh_module, seen.append)
    try:
        assert importlib.import_module(other).X == 1
        assert seen == [] and watch in sys.meta_path
        module = importlib.import_module(fresh_module)
        assert module.__spec__.origin == str(tmp_path / f"{fresh_module}.py")
        assert module.__file__ == module.__spec__.origin
    finally:
        sys.modules.pop(other, None)
    assert seen == [module]


def test_a_missing_module_is_still_missing(fresh_module):
    name = f"{fresh_module}_does_not_exist"
    seen = []
    watch = when_imported(name, seen.append)
    try:
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(name)
        assert seen == []
    finally:
        watch.cancel()


def test_concurrent_first_imports_fire_once(fresh_module):
    seen = []
    when_imported(fresh_module, seen.append)
    barrier = threading.Barrier(4)

    def worker():
        barrier.wait()
        importlib.import_module(fresh_module)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads)
    assert len(seen) == 1


def test_watched_package_keeps_its_loaders_abilities(tmp_path, monkeypatch):
    # `import torch` under opentelemetry-instrument goes through the watch: afterwards torch
    # must still work with importlib.resources / pkgutil, which ask the module's loader.
    name = f"yeto_fresh_package_{next(_names)}"
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text("X = 1\n")
    (tmp_path / name / "data.txt").write_text("payload\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    seen = []
    watch = when_imported(name, seen.append)
    try:
        package = importlib.import_module(name)
        assert seen == [package]
        assert pkgutil.get_data(name, "data.txt") == b"payload\n"
        assert importlib.resources.files(name).joinpath("data.txt").read_text() == "payload\n"
        assert package.__spec__.loader.is_package(name) is True
    finally:
        watch.cancel()
        sys.modules.pop(name, None)


def test_several_watches_on_one_module_all_fire_once(fresh_module):
    """Each instrumentor watches torch: every watch fires after the one import."""
    seen = []
    first = when_imported(fresh_module, lambda m: seen.append("first"))
    second = when_imported(fresh_module, lambda m: seen.append("second"))
    importlib.import_module(fresh_module)
    assert sorted(seen) == ["first", "second"]
    assert first not in sys.meta_path and second not in sys.meta_path


def _warnings(caplog):
    return [r.getMessage() for r in caplog.records
            if r.name == "yeto_otel.instrumentation" and r.levelno == logging.WARNING]


def test_a_callback_that_raises_never_fails_the_import(fresh_module, caplog):
    """A patch of ours that breaks (a bug, a release of the module that moved what it
    expects) is logged once, naming who patched and the error; the module is imported as it
    is and the other watches on it still fire."""
    seen = []

    def broken(module):
        raise AttributeError("module has no attribute 'load'")

    when_imported(fresh_module, broken, "BrokenInstrumentor (yeto_broken)")
    when_imported(fresh_module, seen.append)
    with caplog.at_level(logging.WARNING, logger="yeto_otel.instrumentation"):
        module = importlib.import_module(fresh_module)
    assert module.VALUE == 42 and sys.modules[fresh_module] is module
    assert seen == [module]
    (warning,) = _warnings(caplog)
    assert "BrokenInstrumentor (yeto_broken)" in warning and fresh_module in warning
    assert "AttributeError: module has no attribute 'load'" in warning


def test_a_callback_that_raises_on_a_module_already_imported_is_logged(fresh_module, caplog):
    importlib.import_module(fresh_module)

    def broken(module):
        raise RuntimeError("patch broke")

    with caplog.at_level(logging.WARNING, logger="yeto_otel.instrumentation"):
        assert when_imported(fresh_module, broken, "BrokenInstrumentor") is None
    (warning,) = _warnings(caplog)
    assert "BrokenInstrumentor" in warning and "RuntimeError: patch broke" in warning


def test_the_modules_own_error_still_fails_its_import(tmp_path, monkeypatch):
    name = f"yeto_failing_module_{next(_names)}"
    (tmp_path / f"{name}.py").write_text("raise ImportError('the module itself is broken')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    seen = []
    watch = when_imported(name, seen.append)
    try:
        with pytest.raises(ImportError, match="the module itself is broken"):
            importlib.import_module(name)
        assert seen == [] and name not in sys.modules
    finally:
        watch.cancel()
        sys.modules.pop(name, None)
