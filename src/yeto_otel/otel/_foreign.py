"""When another distro or configurator set this process up instead of yeto-otel's.

`opentelemetry-instrument` loads the first `opentelemetry_distro` and the first
`opentelemetry_configurator` entry point it finds, unless OTEL_PYTHON_DISTRO /
OTEL_PYTHON_CONFIGURATOR name one, and which is first depends on how the environment's
packages happen to be listed. opentelemetry-distro (what `opentelemetry-bootstrap` images
ship) registers both. Our distro, when it runs, selects our configurator (`_distro`); when
another distro runs instead, our configurator may still be the first. When it is not, the
process has the other configurator's SDK: no rank identity, no owner-only exporters, an SDK
in the launcher. That cannot be undone (the SDK's global providers are set once), so the
`opentelemetry_pre_instrument` hook here, which runs after every configurator and before any
instrumentor:

- says so on stderr, in one line, naming the package whose configurator ran and the fix,
  in every process but a child (a DataLoader worker per epoch would repeat it);
- gives a reporting process a pipeline of its own (`start_process_pipeline`) under its rank's
  identity, with owner-only exporters and the bounded exit flush, for yeto-otel's census and
  spans: those stay right whatever the rest of the process does.
"""

from __future__ import annotations

import functools
import logging
import sys
from importlib.metadata import entry_points

from ..settings import current_settings
from ._configurator import configurator_ran, start_own_pipeline
from ._process import Role
from ._start import start_process

__all__ = ["other_configurators", "take_charge"]

_log = logging.getLogger("yeto_otel.configuration")
_OURS = "yeto_otel."


@functools.lru_cache(maxsize=None)
def other_configurators() -> tuple[str, ...]:
    """Each configurator entry point that is not ours, in the order
    `opentelemetry-instrument` finds them: `'NAME' of PACKAGE VERSION`."""
    found = []
    for ep in entry_points(group="opentelemetry_configurator"):
        if not ep.value.startswith(_OURS):
            dist = getattr(ep, "dist", None)
            package = f"{dist.metadata['Name']} {dist.version}" if dist else "an unknown package"
            found.append(f"{ep.name!r} of {package}")
    return tuple(found)


def take_charge() -> None:
    """The `opentelemetry_pre_instrument` hook (see the module's doc). Never raises: an
    exception here would end the auto-instrumentation of every package."""
    try:
        _take_charge()
    except Exception as exc:
        _log.warning("yeto-otel could not check which configurator set this process up: %s: %s",
                     type(exc).__name__, exc)


def _take_charge() -> None:
    role = start_process()  # already decided, unless neither our distro nor configurator ran
    if role is None or configurator_ran() or role in (Role.CHILD, Role.DATALOADER_WORKER):
        return
    others = ", ".join(other_configurators()) or "another configurator"
    if role.reports:
        instance = start_own_pipeline(current_settings())
        what = (f"yeto-otel's census and spans go out through a pipeline of their own as "
                f"{instance!r}, but the rest of this process's telemetry has no rank identity "
                f"and forked children may send it again")
    else:
        what = ("this launcher reports nothing of yeto-otel's, but it now has an SDK of its "
                "own, which yeto-otel would have left out")
    sys.stderr.write(
        f"yeto-otel: this process was set up by the configurator {others}, not yeto-otel's: "
        f"{what}. Fix: set OTEL_PYTHON_DISTRO=yeto and OTEL_PYTHON_CONFIGURATOR=yeto, or "
        f"uninstall the other package.\n")
    sys.stderr.flush()
