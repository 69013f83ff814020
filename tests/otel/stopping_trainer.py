"""A trainer that is stopped from outside, for the exit flush and signal tests.

argv: <setup> [<wait>]

- setup `instrumented`: run under `opentelemetry-instrument` (telemetry set up before this
  script runs). `instrumented+own-handler`: the same, then the trainer installs its own SIGTERM
  handler (after ours, if any, so it replaces ours). `instrumented+chaining`: the same, then a
  handler that runs its own code and then the handler it found, as Lightning's does, and lets
  the trainer go on (it prints `chained handler <signum>`).
- setup `in-code+own-handler`: the trainer installs its own SIGTERM handler, then sets up
  telemetry in code (`configure_telemetry`, the census instrumentor). `in-code+ignore`: it
  ignores SIGTERM, then sets up telemetry. `bare`: no telemetry at all.
- wait `signal` (default): sleep until stopped. `stdin`: at the first line read, exit normally,
  or by `os._exit(3)` when the line is `os._exit`. `c-call`: print `in C` and enter a C call
  that runs for minutes without returning to Python (only the default action of a signal
  ends it at once).

The trainer's own handler prints `trainer handler <signum>` and exits with status 7. The trainer
ends one span (`trainer.step`), prints the dispositions it runs with
(`dispositions SIGTERM=<handler> SIGINT=<handler>`) and `ready`, then waits.
"""

import os
import signal
import sys
import time

setup = sys.argv[1]
wait = sys.argv[2] if len(sys.argv) > 2 else "signal"


def own_handler(signum, frame):
    print(f"trainer handler {signum}", flush=True)
    sys.exit(7)


def chaining(found):
    def handler(signum, frame):
        print(f"chained handler {signum}", flush=True)
        if callable(found):
            found(signum, frame)

    return handler


if setup == "in-code+own-handler":
    signal.signal(signal.SIGTERM, own_handler)
elif setup == "in-code+ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if setup.startswith("in-code"):
    from yeto_otel.instrumentation import HostMemoryInstrumentor
    from yeto_otel.otel import configure_telemetry

    configure_telemetry()
    HostMemoryInstrumentor().instrument()
if setup == "instrumented+own-handler":
    signal.signal(signal.SIGTERM, own_handler)
elif setup == "instrumented+chaining":
    signal.signal(signal.SIGTERM, chaining(signal.getsignal(signal.SIGTERM)))


def named(handler):
    if isinstance(handler, signal.Handlers):
        return handler.name
    return getattr(handler, "__qualname__", None) or str(handler)


if setup != "bare":
    from opentelemetry import trace

    with trace.get_tracer("stopping-trainer").start_as_current_span("trainer.step"):
        pass
print(f"dispositions SIGTERM={named(signal.getsignal(signal.SIGTERM))} "
      f"SIGINT={named(signal.getsignal(signal.SIGINT))}", flush=True)
print("ready", flush=True)
if wait == "stdin":
    line = sys.stdin.readline().strip()
    print("exiting", flush=True)
    if line == "os._exit":
        os._exit(3)
elif wait == "c-call":
    print("in C", flush=True)
    sum(range(10 ** 13))  # one C call: no bytecode runs until it returns (hours)
else:
    while True:
        time.sleep(3600)
