"""A trainer-like rank for the e2e tests, run under `opentelemetry-instrument`.

argv: <anchor file> <seconds of steps>. Saves small anchors, resumes them mapped (the
`yeto.resume.anchors` span with two `fragment_done` events), then runs steps while the census
exports every OTEL_METRIC_EXPORT_INTERVAL ms; exits normally so the SDK flushes everything.
"""

import sys
import time

import torch

from yeto_otel.anchors import load_resume_anchors, save_resume_anchors

path, seconds = sys.argv[1], float(sys.argv[2])
save_resume_anchors(path, {"w": torch.arange(64 * 1024, dtype=torch.float32),
                           "b": torch.ones(4096, dtype=torch.float32)})
with load_resume_anchors(path) as anchors:
    total = 0.0
    for i, (name, tensor) in enumerate(sorted(anchors.tensors.items())):
        total += float(tensor.sum())
        anchors.fragment_done(i)
    print("mode", anchors.load_mode, "sum", total, flush=True)

model = torch.zeros(1024)
deadline = time.monotonic() + seconds
steps = 0
while time.monotonic() < deadline:
    model += 1.0
    steps += 1
    time.sleep(0.05)
print("steps", steps, flush=True)
