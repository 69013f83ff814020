"""Run a callback when a module is first imported, without importing it ourselves.

Instrumentors loaded by `opentelemetry-instrument` start before the program imports anything;
importing torch there would cost every process seconds and hundreds of MiB, torch or not.
`when_imported("torch", patch)` patches now if torch is already in `sys.modules`, else once
the program's own `import torch` has finished executing the module.

A callback that raises is logged once, naming its owner and the error, and the import goes on:
the module is imported all the same (with whatever the callback patched before it raised).
Only the module's own code can fail its import.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
from typing import Callable

from ._guard import log_failure

__all__ = ["ImportWatch", "when_imported"]


class _Loader(importlib.abc.Loader):
    def __init__(self, inner, on_loaded: Callable[[object], None]):
        self._inner = inner
        self._on_loaded = on_loaded

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        # The module keeps its real loader (resources, is_package, get_data...): we only
        # needed to run after its code.
        module.__loader__ = self._inner
        if module.__spec__ is not None:
            module.__spec__.loader = self._inner
        self._inner.exec_module(module)
        self._on_loaded(module)

    def __getattr__(self, name):
        return getattr(self._inner, name)


class ImportWatch(importlib.abc.MetaPathFinder):
    def __init__(self, name: str, callback: Callable[[object], None], owner: str | None = None):
        self.name = name
        self._callback = callback
        self._owner = owner
        self._lock = threading.Lock()
        self._fired = False

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name or self._fired:
            return None
        for finder in sys.meta_path:
            # Other watches are skipped: several watch one module (torch: each instrumentor),
            # and the first to find it fires them all once the module has executed.
            if isinstance(finder, ImportWatch) or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader, lambda module: _fire_all(fullname, module))
                return spec
        return None

    def _fire(self, module) -> None:
        with self._lock:
            if self._fired:
                return
            self._fired = True
        self.cancel()
        _run(self._callback, module, self.name, self._owner)

    def cancel(self) -> None:
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass


def _fire_all(name: str, module) -> None:
    for watch in [f for f in sys.meta_path if isinstance(f, ImportWatch) and f.name == name]:
        watch._fire(module)


def _run(callback: Callable[[object], None], module, name: str, owner: str | None) -> None:
    # Runs inside the program's `import torch` (or inside instrument()): a bug of ours, or a
    # release of the module that moved what the patch expects, must not fail that import.
    try:
        callback(module)
    except Exception as exc:
        who = owner or getattr(callback, "__qualname__", repr(callback))
        log_failure(f"{who}: patching {name}", exc,
                    f"{name} is imported all the same, not traced by it")


def when_imported(name: str, callback: Callable[[object], None],
                  owner: str | None = None) -> ImportWatch | None:
    """Call `callback(module)` now if `name` is imported, else right after its first import.
    Returns the pending watch (to `cancel()`), or None if the callback already ran. `owner`
    (an instrumentation's name) is what the log line names should the callback raise."""
    module = sys.modules.get(name)
    if module is not None:
        _run(callback, module, name, owner)
        return None
    watch = ImportWatch(name, callback, owner)
    sys.meta_path.insert(0, watch)
    return watch
