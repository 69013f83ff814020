"""`RankExitInstrumentor`: each reporting process keeps an exit record, and a rank that dies is
reported once with its cause, phase and step (`yeto_otel.exits`, docs/faults.md).

    RankExitInstrumentor().instrument(tracer_provider=..., meter_provider=...)

or, with no code change, `opentelemetry-instrument python train.py` (entry point
`yeto_rank_exits`; `OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=yeto_rank_exits` or
`YETO_OTEL_EXIT_RECORDS=off` turns it off). A launcher or a child keeps no record: only a rank
or a plain process does.

It registers the exits counter (the deaths this process reported, by cause and phase) and the
per-death series (`yeto_otel.names`, docs/metrics.md); the counter's collection is also the
observer's tick: the process keeps its own record's memory and OOM kill counts current, and
the host's elected process looks for dead records.
"""

from __future__ import annotations

import os
from typing import Any, Collection, Sequence

from opentelemetry import trace
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor
from opentelemetry.metrics import CallbackOptions, Observation, get_meter

from ..exits import process_exits, start_exit_records
from ..names import (EXIT_INFO, EXITS_CAUSE_ATTRIBUTE, EXITS_COUNTER, EXITS_COUNTER_UNIT,
                     EXITS_PHASE_ATTRIBUTE, RANK_EXIT)
from ..exits import PhaseSpanProcessor, note_exit_status
from ..otel import Role, current_role, process_pipeline, rank_attributes
from ..settings import SettingsError, current_settings
from ._guard import attempt
from ._post_import import when_imported
from ..version import __version__

__all__ = ["RankExitInstrumentor"]

SCOPE = "yeto_otel.rank_exits"


class RankExitInstrumentor(BaseInstrumentor):
    _counter_registered = False

    def instrumentation_dependencies(self) -> Collection[str]:
        return ()

    def _instrument(self, **kwargs: Any) -> None:
        """Keyword arguments: `tracer_provider`, `meter_provider`; `settings`, `attributes`
        and `proc_root` (for tests)."""
        role = current_role()
        if role is Role.LAUNCHER:
            _watch_workers()  # keeps no record, but sees how its workers end
            return
        if role is not None and not role.reports:
            return  # a child keeps no record
        settings = kwargs.get("settings") or current_settings()
        if not settings.exit_records:
            return
        pipeline = process_pipeline()
        tracer_provider = kwargs.get("tracer_provider") or (
            pipeline.tracer_provider if pipeline is not None else trace.get_tracer_provider())
        meter_provider = kwargs.get("meter_provider") or (
            pipeline.meter_provider if pipeline is not None else None)
        attributes = kwargs.get("attributes") or rank_attributes() or {}
        tracer = trace.get_tracer(SCOPE, __version__, tracer_provider)
        exits = start_exit_records(settings, attributes, tracer,
                                   proc_root=kwargs.get("proc_root", "/proc"))
        if exits is None:
            return
        add = getattr(tracer_provider, "add_span_processor", None)
        if add is not None:  # the SDK's provider (the API's proxy has none: no phases then)
            add(PhaseSpanProcessor())
        if not RankExitInstrumentor._counter_registered:
            RankExitInstrumentor._counter_registered = True
            meter = get_meter(SCOPE, __version__, meter_provider)
            # The counter's callback looks first; the per-death series is read after it.
            meter.create_observable_counter(
                EXITS_COUNTER, callbacks=[_collect], unit=EXITS_COUNTER_UNIT,
                description=f"Deaths of ranks and plain processes this process reported "
                            f"({RANK_EXIT.name} spans), by cause and phase.")
            meter.create_observable_up_down_counter(
                EXIT_INFO, callbacks=[_deaths], unit=EXITS_COUNTER_UNIT,
                description="1 for each death this process reported, with the dead process's "
                            "cause, phase, rank, job, service, step and pid.")

    def _uninstrument(self, **kwargs: Any) -> None:
        pass  # the record lives as long as the process: a death after this is still a death


# torchrun's process contexts: `wait()` returns each worker that ended badly with its pid and
# exit code (negative: the signal), before the agent stops the others or restarts them.
_PCONTEXT_MODULE = "torch.distributed.elastic.multiprocessing.api"
_PCONTEXT_OWNER = "RankExitInstrumentor (yeto_rank_exits) in the launcher"


def _watch_workers() -> None:
    """In an instrumented launcher (torchrun): write each failed worker's exit status into its
    exit record, where whoever reports its death reads it (a launcher's settings are read
    only here, and a bad one just leaves the statuses unwritten)."""
    try:
        settings = current_settings()
    except SettingsError:
        return
    if settings.exit_records:
        when_imported(_PCONTEXT_MODULE, lambda module: _patch_wait(module, settings.lock_dir),
                      _PCONTEXT_OWNER)


def _patch_wait(module, lock_dir: str) -> None:
    context = module.PContext
    original = context.wait
    if getattr(original, "_yeto_exit_statuses", False):
        return

    def wait(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        if result is not None and getattr(result, "failures", None):
            attempt("noting the workers' exit statuses", _note_failures, result.failures,
                    lock_dir)
        return result

    wait._yeto_exit_statuses = True
    wait.__wrapped__ = original
    context.wait = wait


def _note_failures(failures: dict, lock_dir: str) -> None:
    for failure in failures.values():
        code = int(failure.exitcode)
        note_exit_status(lock_dir, os.geteuid(), int(failure.pid), -code if code < 0 else 0,
                         code if code >= 0 else 0)


# (cause, phase) already exported at 0: a new series starts at 0 and counts its first death at
# the next collection, so that Prometheus' increase() sees it (a series that appears at 1 has
# no earlier sample to rise from).
_started_at_zero: set[tuple[str, str]] = set()


def _collect(_options: CallbackOptions) -> Sequence[Observation]:
    exits = process_exits()
    if exits is None:
        return ()
    try:
        exits.collect()
    except Exception:  # never into the SDK: the next collection looks again
        pass
    observations = []
    for (cause, phase), n in list(exits.observer.counts.items()):
        first = (cause, phase) not in _started_at_zero
        _started_at_zero.add((cause, phase))
        observations.append(Observation(0 if first else n, {EXITS_CAUSE_ATTRIBUTE: cause,
                                                            EXITS_PHASE_ATTRIBUTE: phase}))
    return observations


def _deaths(_options: CallbackOptions) -> Sequence[Observation]:
    exits = process_exits()
    if exits is None:
        return ()
    return [Observation(1, attributes) for attributes in list(exits.observer.deaths)]
