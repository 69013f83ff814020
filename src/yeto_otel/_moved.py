"""Import paths of earlier releases that users were shown, kept working for one more release.

`from yeto_otel.step_log import add_census_to_step_log` (and `yeto_otel.host_cache`,
`yeto_otel.distro`) still import, with a DeprecationWarning naming the new path: the same
objects now live in the rooms of the package. Lazy: nothing is imported until the old path is.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

__all__ = ["MOVED", "install"]

# old module -> (the module that now has its names, the import users should write)
MOVED = {
    "yeto_otel.step_log": ("yeto_otel.census", "from yeto_otel import add_census_to_step_log"),
    "yeto_otel.host_cache": ("yeto_otel.census",
                             "from yeto_otel import HostCacheReleasePolicy"),
    "yeto_otel.distro": ("yeto_otel.otel", "from yeto_otel import configure_telemetry"),
}


class _Alias(importlib.abc.Loader):
    def __init__(self, old: str):
        self.old = old

    def create_module(self, spec):
        return None  # a plain new module, filled in below

    def exec_module(self, module) -> None:
        new_name, instead = MOVED[self.old]
        warnings.warn(f"{self.old} has moved: use `{instead}` (the old path goes in 0.3)",
                      DeprecationWarning, stacklevel=3)
        new = importlib.import_module(new_name)
        # A module of its own that forwards every name, so the new module's identity
        # (__name__, __spec__) is left alone.
        module.__all__ = list(getattr(new, "__all__", ()))
        module.__getattr__ = lambda name: getattr(new, name)


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, _Alias(fullname))


def install() -> None:
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedFinder())
