#!/usr/bin/env python
"""What DataLoader workers' telemetry adds to a training loop's epochs when the collector is fast,
never answers, or is gone: bare against opentelemetry-instrument, in one run.

Run by hand (not a test):

    python benchmarks/worker_teardown.py             # fork and spawn, 3 rounds, ~3 min here

Each variant runs the same rank (RANK=0): a DataLoader with 2 non-persistent workers (the
default, and the Hugging Face Trainer's: every epoch starts new workers and joins them at its
end) over a dataset that loads one small `.pt` file per sample. After one warm-up epoch, the
rank times 3 epochs. Variants: bare (no yeto-otel); yeto-otel with the embedded default (local
files); an OTLP endpoint that accepts connections and never answers (`hung`); one that refuses
them (`refused`). Interleaved round by round, order rotated; the figure is the median over the
rounds and its difference from bare.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile

RANK = r"""
import os, sys, time
import torch
from torch.utils.data import DataLoader, Dataset
method, epochs, data = sys.argv[1], int(sys.argv[2]), sys.argv[3]

class PerSampleFiles(Dataset):
    def __init__(self):
        self.paths = [os.path.join(data, f"sample-{i}.pt") for i in range(8)]
        for i, path in enumerate(self.paths):
            if not os.path.exists(path):
                torch.save(torch.full((4,), float(i)), path)
    def __len__(self):
        return len(self.paths)
    def __getitem__(self, index):
        return torch.load(self.paths[index])

if __name__ == "__main__":
    loader = DataLoader(PerSampleFiles(), batch_size=4, num_workers=2,
                        multiprocessing_context=method, persistent_workers=False)
    sum(float(b.sum()) for b in loader)
    started = time.monotonic()
    for _ in range(epochs):
        sum(float(b.sum()) for b in loader)
    print(f"{time.monotonic() - started:.4f}")
"""


def endpoint(listen: bool) -> tuple[socket.socket, str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    if listen:
        sock.listen(64)  # accepts (the kernel does) and never answers
    return sock, f"http://127.0.0.1:{sock.getsockname()[1]}"


def run_once(instrumented: bool, env: dict, method: str, epochs: int, workdir: str) -> float:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "YETO_"))}
    full.update(RANK="0", WORLD_SIZE="1", OMP_NUM_THREADS="1",
                YETO_OTEL_LOCAL_DIR=os.path.join(workdir, "telemetry"), **env)
    data = os.path.join(workdir, "data")
    os.makedirs(data, exist_ok=True)
    script = os.path.join(workdir, "rank.py")
    with open(script, "w") as f:
        f.write(RANK)
    command = [sys.executable, script, method, str(epochs), data]
    if instrumented:
        command.insert(0, shutil.which("opentelemetry-instrument",
                                       path=os.path.dirname(sys.executable)))
    done = subprocess.run(command, env=full, capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--methods", default="fork,spawn")
    args = parser.parse_args()
    hung_sock, hung = endpoint(True)
    refused_sock, refused = endpoint(False)
    variants = {"bare": (False, {}), "yeto-otel, local files": (True, {}),
                "yeto-otel, collector never answers": (True, {"OTEL_EXPORTER_OTLP_ENDPOINT": hung}),
                "yeto-otel, collector refuses": (True, {"OTEL_EXPORTER_OTLP_ENDPOINT": refused})}
    print(f"{args.epochs} epochs of 2 non-persistent workers, {args.rounds} rounds interleaved; "
          f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as workdir:
        for method in args.methods.split(","):
            times: dict[str, list[float]] = {name: [] for name in variants}
            names = list(variants)
            for r in range(args.rounds):
                for name in names[r % len(names):] + names[:r % len(names)]:
                    instrumented, env = variants[name]
                    times[name].append(run_once(instrumented, env, method, args.epochs, workdir))
            bare = statistics.median(times["bare"])
            print(f"\nstart method {method}")
            print(f"{'variant':38} {'epochs (s) median':>18} {'min':>7} {'max':>7} "
                  f"{'vs bare':>8}")
            for name, values in times.items():
                median = statistics.median(values)
                print(f"{name:38} {median:18.3f} {min(values):7.3f} {max(values):7.3f} "
                      f"{median - bare:+8.3f}")
    hung_sock.close()
    refused_sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
