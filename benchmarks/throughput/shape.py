"""The restart span shape the headroom replays: taken from real restarts in a child process
(the entry script with `--capture-shape`), so torch stays out of the headroom load generators."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .common import ENTRY, SERVICE_NAME, child_env

RESTARTS = 20


def capture(workdir: str, resource_attributes: dict) -> dict:
    """In the child: real restarts (save + `load_resume_anchors` + 8 `fragment_done`) on a
    small anchor file: the span shape to replay, and its OTLP/protobuf size."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from .rank import restart, save_small_anchors

    path = os.path.join(workdir, "shape.anchors.pt")
    save_small_anchors(path)
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create(resource_attributes))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    for _ in range(RESTARTS):
        restart(path, provider)
    spans = memory.get_finished_spans()
    by_name = {s.name: s for s in spans}
    root, load = by_name["yeto.resume.anchors"], by_name["yeto.resume.anchors.load"]
    provider.shutdown()
    return {"root": {"name": root.name, "attributes": dict(root.attributes)},
            "child": {"name": load.name, "attributes": dict(load.attributes)},
            "events": [[e.name, dict(e.attributes)] for e in root.events],
            "otlp_bytes_per_restart": encode_spans(spans).ByteSize() / RESTARTS}


def capture_shape(workdir: Path, world_size: int) -> dict:
    """In the orchestrator: the restart span shape of rank 0 of `bench-host-00`."""
    from yeto_otel.otel import rank_resource_attributes
    from yeto_otel.settings import Settings

    attributes = rank_resource_attributes(Settings(rank=0, local_rank=0, world_size=world_size),
                                          hostname="bench-host-00")
    attributes["service.name"] = SERVICE_NAME
    done = subprocess.run(
        [sys.executable, str(ENTRY), "--capture-shape",
         json.dumps({"workdir": str(workdir), "resource": attributes})],
        stdout=subprocess.PIPE, env=child_env(), check=True, text=True, timeout=300)
    return json.loads(done.stdout)
