"""What a child process does (the entry script with `--child MODE`): write the two files, or
restart one variant in a fresh process and measure it. torch is imported here only."""

from __future__ import annotations

import gc
import json
import mmap
import os
import resource
import time
import warnings
from functools import partial

from yeto_otel.proc import ResidencyProbe

from . import readings
from .anchor_set import PT_NAME, SHIFTED_FRAGMENT, ST_NAME, shard_name, shard_numels, \
    touched_indices

# Variants whose handle gives one tensor per name (get_tensor), not the product's anchors.
_BY_NAME = ("safetensors", "mmap-floor")


def child_write(args) -> dict:
    import torch
    from safetensors.torch import save_file

    from yeto_otel.anchors import save_resume_anchors

    numels = shard_numels(args.size, args.shards, args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    tensors = {shard_name(i): torch.randn(n, generator=gen, dtype=torch.float32)
               for i, n in enumerate(numels)}
    pt, st = os.path.join(args.dir, PT_NAME), os.path.join(args.dir, ST_NAME)
    t = time.perf_counter()
    save_resume_anchors(pt, tensors)
    t_pt = time.perf_counter() - t
    t = time.perf_counter()
    save_file(tensors, st)
    os.sync()
    t_st = time.perf_counter() - t
    return {"pt": pt, "pt_size": os.path.getsize(pt), "st": st, "st_size": os.path.getsize(st),
            "save_pt_s": t_pt, "save_st_s": t_st, "pt_ranges": _byte_ranges(pt)}


def _byte_ranges(pt: str) -> list[list[int]]:
    """[file offset, bytes] of every shard in the anchor file, in shard order: where the
    product's mapped load finds each shard, for the plain-mmap variant to read the same bytes."""
    from yeto_otel.anchors import load_resume_anchors

    start, real = None, os.path.realpath(pt)
    with load_resume_anchors(pt) as anchors:
        with open("/proc/self/maps") as maps:  # torch maps the whole file from offset 0
            for line in maps:
                fields = line.split()
                if line.rstrip().endswith(real) and int(fields[2], 16) == 0:
                    start = int(fields[0].split("-")[0], 16)
        tensors = anchors.tensors
        return [[tensors[shard_name(i)].data_ptr() - start,
                 tensors[shard_name(i)].numel() * tensors[shard_name(i)].element_size()]
                for i in range(len(tensors))]


class _PlainMmap:
    """A plain read-only private mmap of the anchor file; get_tensor(name) is a tensor over the
    shard's bytes in it (no copy), so the catch-up reads exactly what the product's would."""

    def __init__(self, path: str, ranges: list[list[int]]):
        with open(path, "rb") as f:
            self._map = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
        self._ranges = ranges

    def get_tensor(self, name: str):
        import torch

        offset, nbytes = self._ranges[int(name.rsplit(".", 1)[1])]
        with warnings.catch_warnings():  # "not writable": the tensor is only read
            warnings.simplefilter("ignore", UserWarning)
            return torch.frombuffer(self._map, dtype=torch.float32, count=nbytes // 4,
                                    offset=offset)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        gc.collect()  # the catch-up's tensors export the map's buffer until collected
        self._map.close()


def _handle_factory(mode: str, path: str, args, provider):
    from safetensors import safe_open

    from yeto_otel.anchors import load_resume_anchors

    if mode == "safetensors":
        return partial(safe_open, path, framework="pt")
    if mode == "mmap-floor":
        with open(os.path.join(args.dir, "write.json")) as f:
            ranges = json.load(f)["pt_ranges"]
        return partial(_PlainMmap, path, ranges)
    return partial(load_resume_anchors, path, tracer_provider=provider)


def child_run(args) -> dict:
    """One restart: load, catch up on the shifted fragment, close; measured around it."""
    import torch
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    torch.set_num_threads(args.threads)
    mode = args.child
    path = os.path.join(args.dir, ST_NAME if mode == "safetensors" else PT_NAME)
    names = [shard_name(i) for i in touched_indices(args.shards, args.layout)]
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    open_handle = _handle_factory(mode, path, args, provider)
    rss_before = readings.vm_rss()
    gc.collect()

    anon0, node0 = readings.anonymous(), readings.node_anon_pages()
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    handle = open_handle()
    handle.__enter__()
    t1 = time.perf_counter()
    held, checksum = _catch_up(torch, handle, mode, names)
    t2 = time.perf_counter()
    ru2 = resource.getrusage(resource.RUSAGE_SELF)

    # Measurements, anchors still held (not timed as part of the restart).
    anon1, node1 = readings.anonymous(), readings.node_anon_pages()
    hwm = readings.vm_hwm()
    measured = _measure(path)

    t3 = time.perf_counter()
    del held
    handle.__exit__(None, None, None)
    t4 = time.perf_counter()
    return {
        "mode": mode, "path": path, "file_size": os.path.getsize(path), "touched_shards": len(names),
        "load_s": t1 - t0, "catchup_s": t2 - t1, "close_s": t4 - t3, "time_s": (t2 - t0) + (t4 - t3),
        "anon_delta": anon1 - anon0, "node_anon_delta": node1 - node0, "peak_rss_growth": hwm - rss_before,
        **measured,
        "checksum": checksum,
        "cpu_s": (ru2.ru_utime + ru2.ru_stime) - (ru0.ru_utime + ru0.ru_stime),
        "majflt": ru2.ru_majflt - ru0.ru_majflt, "minflt": ru2.ru_minflt - ru0.ru_minflt,
        **_span_fields(exporter),
    }


def _catch_up(torch, handle, mode: str, names: list[str]) -> tuple[list, float]:
    """Read every element of the touched shards; returns them (still held) and the checksum."""
    checksum = 0.0
    held = []
    for name in names:
        # The product's tensors; safetensors and the plain mmap: get_tensor of this shard only.
        t = handle.get_tensor(name) if mode in _BY_NAME else handle.tensors[name]
        held.append(t)  # the old anchors of the fragment stay referenced until it is done
        checksum += float(t.sum(dtype=torch.float64))
    if mode not in _BY_NAME:
        handle.fragment_done(SHIFTED_FRAGMENT)
    return held, checksum


def _measure(path: str) -> dict:
    """Bytes touched by the probe vs smaps (ground truth, read once), and what each costs."""
    probe = ResidencyProbe(path)
    residency = probe.measure()
    smaps_rss, smaps_mappings = readings.smaps_rss_of(path, readings.read_smaps())
    probe_s = readings.median_time(probe.measure, 20)  # full: rereads /proc/self/maps (as at close)
    # what fragment_done does: the mapping's range kept from the load, pagemap only
    probe_cached_s = readings.median_time(lambda: probe.measure(rescan=False), 20)
    smaps_s = readings.median_time(readings.read_smaps, 5)
    return {
        "probe_mapped": residency.bytes_mapped if residency else None,
        "probe_touched": residency.bytes_touched if residency else None,
        "probe_mappings": residency.mappings if residency else None,
        "smaps_rss": smaps_rss, "smaps_mappings": smaps_mappings,
        "probe_cost_s": probe_s, "probe_cached_cost_s": probe_cached_s, "smaps_cost_s": smaps_s,
        "vmas": readings.vma_count(),
    }


def _span_fields(exporter) -> dict:
    spans = {s.name: s for s in exporter.get_finished_spans()}
    span = spans.get("yeto.resume.anchors")
    load_span = spans.get("yeto.resume.anchors.load")
    return {
        "span": dict(span.attributes) if span is not None else None,
        "load_span_s": (load_span.end_time - load_span.start_time) / 1e9 if load_span else None,
    }
