"""A real 2-rank torch.distributed.checkpoint save, load and async_save on CPU (gloo), each
rank traced by `DcpInstrumentor` into memory; each rank writes its finished spans to
`<out>/spans-<rank>.json`.

    python tests/instrumentation/dcp_ranks.py OUT_DIR     # the ranks meet through OUT_DIR/rendezvous

Each rank saves a tensor shared by both (written once) and one of its own whose size depends
on the rank, loads them back into zeros (checked equal), then loads from a directory that does
not exist (the load's own error must reach it), then saves again with async_save and waits
for the returned future.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from yeto_otel.instrumentation import DcpInstrumentor

WORLD = 2
UPLOAD_DEADLINE = 60  # seconds for the upload span to end after the future completes
SHARED_ELEMENTS = 64 * 1024
OWN_ELEMENTS = (128 * 1024, 256 * 1024)  # float32: 512 KiB for rank 0, 1 MiB for rank 1


def state(rank: int, fill: bool) -> dict[str, torch.Tensor]:
    make = (lambda n, seed: torch.arange(n, dtype=torch.float32) + seed) if fill else \
        (lambda n, seed: torch.zeros(n, dtype=torch.float32))
    return {"shared": make(SHARED_ELEMENTS, 0.5), f"own{rank}": make(OWN_ELEMENTS[rank], rank)}


def _span_record(span) -> dict:
    return {"name": span.name, "span_id": span.context.span_id,
            "parent": span.parent.span_id if span.parent else None,
            "attributes": dict(span.attributes), "status": span.status.status_code.name,
            "events": [event.name for event in span.events],
            "start": span.start_time, "end": span.end_time}


def _wait_for_span(exporter, name: str) -> None:
    deadline = time.monotonic() + UPLOAD_DEADLINE
    while not any(s.name == name for s in exporter.get_finished_spans()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {name} span within {UPLOAD_DEADLINE} s")
        time.sleep(0.01)


def rank_main(rank: int, out: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = DcpInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    # Rendezvous through a file in the test's directory, not a TCP port picked in advance
    # (another process could take that port before rank 0 listens on it).
    dist.init_process_group("gloo", init_method=f"file://{Path(out) / 'rendezvous'}",
                            rank=rank, world_size=WORLD)
    import torch.distributed.checkpoint as dcp  # after instrument(): the post-import patch

    checkpoint = Path(out) / "checkpoint"
    dcp.save(state(rank, fill=True), checkpoint_id=str(checkpoint))
    loaded = state(rank, fill=False)
    dcp.state_dict_loader.load(loaded, storage_reader=dcp.FileSystemReader(str(checkpoint)))
    for key, expected in state(rank, fill=True).items():
        assert torch.equal(loaded[key], expected), key
    failure = None
    try:
        dcp.load(state(rank, fill=False), checkpoint_id=str(Path(out) / "missing"))
    except (Exception, dcp.CheckpointException) as exc:  # CheckpointException: a BaseException
        failure = type(exc).__name__
    later = Path(out) / "async"
    dcp.async_save(state(rank, fill=True), checkpoint_id=str(later)).result()
    _wait_for_span(exporter, "dcp.async_save.upload")  # ended by the future's callback
    instrumentor.uninstrument()
    restored = dcp.load is dcp.state_dict_loader.load and not hasattr(dcp.load, "__yeto_dcp__") \
        and dcp.save is dcp.state_dict_saver.save and not hasattr(dcp.save, "__yeto_dcp__") \
        and not hasattr(dcp.async_save, "__yeto_dcp__")
    dist.destroy_process_group()
    result = {"spans": [_span_record(s) for s in exporter.get_finished_spans()],
              "failure": failure, "restored": restored,
              "file_sizes": {p.name: p.stat().st_size for p in checkpoint.iterdir()},
              "async_file_sizes": {p.name: p.stat().st_size for p in later.iterdir()}}
    (Path(out) / f"spans-{rank}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    mp.spawn(rank_main, args=(sys.argv[1],), nprocs=WORLD, join=True)
