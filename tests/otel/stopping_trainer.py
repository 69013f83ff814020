"""A trainer that is stopped from outside, for the exit flush tests.

argv: <setup> [<wait>]

- setup `instrumented`: run under `opentelemetry-instrument` (telemetry set up before this
  script runs). `instrumented+own-handler`: the same, then the trainer installs its own SIGTERM
  handler (after ours, so it replaces ours).
- setup `in-code+own-handler`: the trainer installs its own SIGTERM handler, then sets up
  telemetry in code (`configure_telemetry`, the census instrumentor). `in-code+ignore`: it
  ignores SIGTERM, then sets up telemetry.
- wait `signal` (default): sleep until stopped. `stdin`: at the first line read, exit normally,
  or by `os._exit(3)` when the line is `os._exit`.

The trainer's own handler prints `trainer handler <signum>` and exits with status 7. The trainer
ends one span (`trainer.step`) and prints `ready` once it has, then waits.
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

from opentelemetry import trace  # noqa: E402

with trace.get_tracer("stopping-trainer").start_as_current_span("trainer.step"):
    pass
print("ready", flush=True)
if wait == "stdin":
    line = sys.stdin.readline().strip()
    print("exiting", flush=True)
    if line == "os._exit":
        os._exit(3)
else:
    while True:
        time.sleep(3600)
