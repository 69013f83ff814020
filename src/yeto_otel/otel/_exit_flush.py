"""The reporting process's last export when it exits, and, opt-in, when SIGTERM or SIGINT stops it.

By default yeto-otel installs no signal handler: a library's handler changes how the process it
lives in stops (Python runs a handler only between bytecodes, so a rank inside a long C call
would no longer die of SIGTERM at once; a framework that chains its own handler to the one it
found would call ours). So by default the reporting process (a rank, or a plain process) gets:

- an atexit handler for every normal exit (the end of the script, `sys.exit`, an uncaught
  exception, and a trainer whose own SIGTERM handler ends the process normally, as Lightning
  and accelerate do). It replaces the SDK's per-provider atexit hooks, which are not bounded.
  A process that dies of the signal itself loses what it had not exported: at most one metric
  export interval, and the spans ended since the last batch export (`OTEL_BSP_SCHEDULE_DELAY`,
  never longer than the interval by our defaults).

With YETO_OTEL_EXIT_FLUSH_ON_SIGNALS=on it also gets:

- a SIGTERM and a SIGINT handler that exports first and then does what the signal would have
  done without us: the handler that was there before is called (a trainer's own handler;
  Python's default SIGINT handler, which raises KeyboardInterrupt); under the default action
  the signal is raised again with that action, so the process dies of it and the launcher sees
  the same status (-15 / 143 for SIGTERM). An ignored signal is left ignored, and a handler
  installed from C (not visible to Python) is left alone.
- A handler that finds it is no longer the installed one was chained by whoever replaced it (a
  framework that calls the handler it found after its own, as Lightning does): it exports,
  calls the handler it found itself, if any, and returns. It never ends the process: that is
  the decision of the handler that called it, exactly as without us.

All the exporting a process does on its way out is bounded by YETO_OTEL_EXIT_FLUSH_TIMEOUT, in
total: each provider is flushed on a thread of its own, joined against one deadline, so an
unreachable collector holds the exit no longer than the bound (what was not exported by then
is dropped, logged once), and a lock held by the interrupted code cannot hang it either.
A handler whose next step is a trainer's own code only flushes (the trainer may go on and end
more spans); the final shutdown is left to the exit. A second signal during the flush does at
once what the signal does. A forked child (a DataLoader worker, a pool's process) gets back
the handlers that were there before ours, so a signal does in it what it did without us, and
the atexit handler it inherits does nothing (its own pipeline, if any, has its own exit). Only
the main thread can install signal handlers; elsewhere only atexit is used.

What no handler can save: `os._exit` and SIGKILL (and a trainer's handler that ends with
either) lose what was not yet exported: at most one metric export interval, the spans ended
since the last batch export and the log records of the last second.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import signal
import threading
import time
from collections.abc import Iterable

__all__ = ["STOP_SIGNALS", "ExitFlush", "ProviderFlusher", "exit_flush", "flush_providers",
           "install_exit_flush"]

_log = logging.getLogger("yeto_otel.exit")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

# The forking thread's signal mask while it forks (see `ExitFlush._before_fork`).
_fork_mask = threading.local()


class ProviderFlusher:
    """Flushes one provider on a daemon thread of its own, started up front: a provider that
    hangs then holds neither the others nor the caller past its deadline, and no thread has to
    be started at interpreter shutdown (Python 3.12.0 and 3.12.1 refuse that in atexit)."""

    def __init__(self, provider) -> None:
        self.provider = provider
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._serve, daemon=True,
                         name=f"yeto-otel-exit-{type(provider).__name__}").start()

    def _serve(self) -> None:
        while True:
            final, timeout_s, done = self._requests.get()
            try:
                if final:
                    # Not twice: a program may have shut a provider down itself, and the SDK's
                    # MeterProvider logs a warning for a second call (`_shutdown`: SDK 1.45).
                    if not getattr(self.provider, "_shutdown", False):
                        self.provider.shutdown()  # the readers' last collection included
                else:
                    self.provider.force_flush(max(1, int(timeout_s * 1000)))
            except Exception:  # the SDK logs its own export errors; nothing may escape
                pass
            finally:
                done.set()

    def request(self, *, final: bool, timeout_s: float) -> threading.Event:
        done = threading.Event()
        self._requests.put((final, timeout_s, done))
        return done


def flush_providers(flushers: Iterable[ProviderFlusher], timeout_s: float, *,
                    final: bool) -> bool:
    """Export what the providers hold within `timeout_s`, all at once: `final` shuts them
    down, else only flushes them. True when all finished in time."""
    requests = [flusher.request(final=final, timeout_s=timeout_s) for flusher in flushers]
    deadline = time.monotonic() + max(0.0, timeout_s)
    for done in requests:
        done.wait(max(0.0, deadline - time.monotonic()))
    return all(done.is_set() for done in requests)


class ExitFlush:
    """The exit flush of one process's providers: its handlers, its atexit hook, its budget."""

    def __init__(self, providers: list, timeout_ms: int, pid: int | None = None) -> None:
        self.flushers = [ProviderFlusher(provider) for provider in providers]
        self.pid = os.getpid() if pid is None else pid
        self.budget_s = timeout_ms / 1000  # what the exit may still wait, over all flushes
        self.previous: dict[int, object] = {}
        self.finished = False  # the providers are shut down
        self._flushing = False
        self._warned = False

    def flush(self, *, final: bool) -> None:
        if self.finished or self._flushing or os.getpid() != self.pid:
            return
        self._flushing = True
        started = time.monotonic()
        try:
            done = flush_providers(self.flushers, self.budget_s, final=final)
        finally:
            self._flushing = False
            self.budget_s = max(0.0, self.budget_s - (time.monotonic() - started))
        self.finished = self.finished or final
        if not done and not self._warned:
            self._warned = True
            _log.warning("telemetry not exported within YETO_OTEL_EXIT_FLUSH_TIMEOUT at exit "
                         "was dropped (is the collector reachable?)")

    def at_exit(self) -> None:
        self.flush(final=True)

    def on_signal(self, signum: int, frame) -> object:
        previous = self.previous.get(signum, signal.SIG_DFL)
        if signal.getsignal(signum) != self.on_signal:
            # Called by the handler that replaced ours: export, let the one we found run,
            # and leave what happens next (dying, going on) to the caller.
            self.flush(final=False)
            return previous(signum, frame) if callable(previous) else None
        if previous is signal.SIG_DFL:
            self.flush(final=True)  # the process ends right after: nothing more to export
            return _die_of(signum)
        self.flush(final=False)  # the trainer's own handler decides what comes next
        if callable(previous):
            return previous(signum, frame)
        return None

    def install_handlers(self, signals: Iterable[int] = STOP_SIGNALS) -> list[int]:
        """Put `on_signal` in front of each signal's handler, from the main thread only;
        returns the signals it now handles."""
        if threading.current_thread() is not threading.main_thread():
            return []
        installed = []
        for signum in signals:
            previous = signal.getsignal(signum)
            if previous is signal.SIG_IGN or previous is None:
                continue  # ignored stays ignored; a handler set from C is not ours to wrap
            self.previous[signum] = previous
            signal.signal(signum, self.on_signal)
            installed.append(signum)
        if installed:
            os.register_at_fork(before=self._before_fork, after_in_parent=self._after_fork,
                                after_in_child=self._after_fork_in_child)
        return installed

    def _before_fork(self) -> None:
        # Python clears the signals its handlers caught in a new child before the child runs
        # any code, so a SIGTERM sent right after a fork could be lost in the child. Blocked
        # until the child has its handlers back, it stays pending for them instead.
        _fork_mask.saved = signal.pthread_sigmask(signal.SIG_BLOCK, self.previous)

    def _after_fork(self) -> None:
        saved = getattr(_fork_mask, "saved", None)
        if saved is not None:
            _fork_mask.saved = None
            signal.pthread_sigmask(signal.SIG_SETMASK, saved)

    def _after_fork_in_child(self) -> None:
        for signum, previous in self.previous.items():
            if signal.getsignal(signum) == self.on_signal:  # not if a trainer replaced ours
                signal.signal(signum, previous)
        self._after_fork()


def _die_of(signum: int) -> None:
    """What the default action would have done: end the process by the signal itself."""
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    # Only reached where every thread blocks the signal: exit with the status a shell shows.
    os._exit(128 + signum)


_current: ExitFlush | None = None


def exit_flush() -> ExitFlush | None:
    """This process's exit flush, if it installed one (a forked copy's is not its own)."""
    return _current if _current is not None and _current.pid == os.getpid() else None


def install_exit_flush(providers: Iterable, timeout_ms: int, *,
                       signals: Iterable[int] = ()) -> ExitFlush:
    """Flush `providers` (the SDK's global ones) when this process exits, within `timeout_ms`
    in all, and when one of `signals` (none by default; `STOP_SIGNALS` with
    YETO_OTEL_EXIT_FLUSH_ON_SIGNALS=on) stops it. Once per process: a later call returns the
    first one (the SDK's global providers cannot be replaced either)."""
    global _current
    existing = exit_flush()
    if existing is not None:
        return existing
    providers = [p for p in providers if callable(getattr(p, "shutdown", None))]
    for provider in providers:
        atexit.unregister(provider.shutdown)  # the SDK's own, unbounded exit hook
    _current = ExitFlush(providers, timeout_ms)
    atexit.register(_current.at_exit)
    _current.install_handlers(signals)
    return _current
