"""A trainer-like rank for the outage tests, run under `opentelemetry-instrument`.

argv: <steps> <seconds per step> <summary JSON path> [<padding bytes>]. Each step is one
`e2e.step` span with its step number (`e2e.seq`), an optional `e2e.padding` attribute of that
many bytes (to make spans as large as real restart spans), and a little work; the census exports in the background all along. The
summary records every step's duration, so a test can tell whether exporting slowed the steps,
and how long the exit (the SDK's final flush) took.
"""

import json
import sys
import time

from opentelemetry import trace

steps, period, summary_path = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
padding = int(sys.argv[4]) if len(sys.argv) > 4 else 0
attributes = {"e2e.padding": "x" * padding} if padding else {}
tracer = trace.get_tracer("yeto_otel.e2e")
durations = []
state = [0.0] * 4096
for seq in range(steps):
    began = time.monotonic()
    with tracer.start_as_current_span("e2e.step", attributes={"e2e.seq": seq, **attributes}):
        for i in range(len(state)):
            state[i] += 1.0
    # Fixed-rate steps: the wait fills the rest of the period, so the rate does not depend on
    # how fast this machine is.
    time.sleep(max(0.0, period - (time.monotonic() - began)))
    durations.append(time.monotonic() - began)
    if seq == 0:
        print("first step done", flush=True)

with open(summary_path, "w") as f:
    json.dump({"steps": steps, "durations": durations, "exit_began": time.time()}, f)
print("steps done", flush=True)
