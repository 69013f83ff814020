"""Run a callback when a module is first imported, without importing it ourselves.

Instrumentors loaded by `opentelemetry-instrument` start before the program imports anything;
importing torch there would cost every process seconds and hundreds of MiB, torch or not.
`when_imported("torch", patch)` patches now if torch is already in `sys.modules`, else once
the program's own `import torch` has finished executing the module.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
from typing import Callable

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
    def __init__(self, name: str, callback: Callable[[object], None]):
        self.name = name
        self._callback = callback
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
        self._callback(module)

    def cancel(self) -> None:
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass


def _fire_all(name: str, module) -> None:
    for watch in [f for f in sys.meta_path if isinstance(f, ImportWatch) and f.name == name]:
        watch._fire(module)


def when_imported(name: str, callback: Callable[[object], None]) -> ImportWatch | None:
    """Call `callback(module)` now if `name` is imported, else right after its first import.
    Returns the pending watch (to `cancel()`), or None if the callback already ran."""
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return None
    watch = ImportWatch(name, callback)
    sys.meta_path.insert(0, watch)
    return watch
