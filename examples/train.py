"""A small trainer-like script showing the three ways into yeto-otel.

1. Zero-code: run it unchanged under the agent; the census and a `torch.load` span on every
   torch.load come from the instrumentors yeto-otel registers:

       opentelemetry-instrument python examples/train.py --steps 20

2. In code: the trainer sets up telemetry itself and turns the census on
   (`--telemetry in-code`, the block marked [2] below).

3. The resume path: `--resume ANCHORS` reloads the resume anchors with
   `load_resume_anchors` (mapped: only the shards the catch-up reads come into memory) inside
   a `yeto.resume.anchors` span (the block marked [3]). `--save-anchors ANCHORS` writes them.

With no OTEL exporter or endpoint set, telemetry goes to local OTLP JSON files under
YETO_OTEL_LOCAL_DIR (default ./yeto-telemetry); `yeto-otel report yeto-telemetry` reads them.
With OTEL_EXPORTER_OTLP_ENDPOINT set it goes to that collector instead. Nothing here depends
on which: the script is the same.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import torch


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--telemetry", choices=("none", "in-code"), default="none",
                        help="none: leave it to opentelemetry-instrument (or run without); "
                             "in-code: configure telemetry and the census in this script")
    parser.add_argument("--resume", metavar="ANCHORS", help="resume from this anchor file")
    parser.add_argument("--save-anchors", metavar="ANCHORS",
                        help="save the resume anchors here at the end")
    parser.add_argument("--step-log", metavar="FILE",
                        help="append one JSON record per step (with the host-memory census "
                             "when YETO_DILOCO_HOST_MEM_CENSUS=1)")
    return parser.parse_args()


def setup_telemetry_in_code() -> None:
    # [2] In code. configure_telemetry() sets up the SDK exactly as opentelemetry-instrument
    # would with yeto's distro (embedded default or OTLP, rank resource attributes). A trainer
    # with its own MeterProvider passes it instead: instrument(meter_provider=provider).
    from yeto_otel import configure_telemetry
    from yeto_otel.instrumentation import HostMemoryInstrumentor, TorchLoadInstrumentor

    print(f"telemetry: {configure_telemetry()}", flush=True)
    HostMemoryInstrumentor().instrument()
    TorchLoadInstrumentor().instrument()


def make_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(),
                               torch.nn.Linear(512, 512), torch.nn.GELU(),
                               torch.nn.Linear(512, 16))


def resume(model: torch.nn.Module, path: str) -> None:
    # [3] The resume path. The anchors are the weights this island last synced from; the
    # syncer has since moved past some fragments, and each is caught up as
    # global_new + (local - anchor_old). Here "global_new" stands in for what the syncer
    # would send: the anchor itself (no other island made progress).
    from yeto_otel.anchors import load_resume_anchors

    params = dict(model.named_parameters())
    fragments = [list(params)[i:i + 2] for i in range(0, len(params), 2)]
    with load_resume_anchors(path) as anchors, torch.no_grad():
        for fragment_id, names in enumerate(fragments):
            for name in names:
                anchor_old = anchors.tensors[name]
                global_new = anchor_old
                params[name].copy_(global_new + (params[name] - anchor_old))
            anchors.fragment_done(fragment_id)
    print(f"resumed from {path} ({anchors.load_mode})", flush=True)


def main() -> None:
    args = parse_args()
    if args.telemetry == "in-code":
        setup_telemetry_in_code()
    # [1] Zero-code needs nothing here: under opentelemetry-instrument the census is already
    # observed and torch.load already traced.
    from yeto_otel import add_census_to_step_log

    model = make_model()
    if args.resume:
        resume(model, args.resume)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    log = open(args.step_log, "a", encoding="utf-8") if args.step_log else None
    held = []
    for step in range(1, args.steps + 1):
        x = torch.randn(64, 256)
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        loss_value = loss.item()
        held.append(torch.ones(8 << 20, dtype=torch.uint8))  # a sawtooth of host memory
        if step % 4 == 0:
            held.clear()
        record = {"step": step, "time_unix_nano": time.time_ns(), "loss": loss_value}
        add_census_to_step_log(record)  # unchanged unless YETO_DILOCO_HOST_MEM_CENSUS=1
        if log is not None:
            log.write(json.dumps(record) + "\n")
        if step == 1 or step == args.steps or math.log2(step).is_integer():
            print(f"step {step}: loss {loss_value:.4f}", flush=True)
    if log is not None:
        log.close()
    if args.save_anchors:
        from yeto_otel.anchors import save_resume_anchors

        save_resume_anchors(args.save_anchors,
                            {name: p.detach() for name, p in model.named_parameters()})
        print(f"saved anchors to {args.save_anchors}", flush=True)


if __name__ == "__main__":
    main()
