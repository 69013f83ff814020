#!/usr/bin/env python
"""How long a rank inside a C call takes to die of SIGTERM: bare, under opentelemetry-instrument
with the defaults (no signal handler), and with YETO_OTEL_EXIT_FLUSH_ON_SIGNALS=on, in one run.

Run by hand (not a test):

    python benchmarks/sigterm_timing.py              # 5 rounds, ~1 min here

Each variant runs the same rank (RANK=0, local telemetry files in a temporary directory): it
sets up, prints `in C` and enters one C call of about 1.1 s (`hashlib.pbkdf2_hmac`, sized here
first), during which no bytecode runs. SIGTERM is sent 0.5 s after `in C`; the figure is the
time from `in C` to the process's end, and its status. The variants are interleaved round by
round (order rotated) so that drift on a shared machine hits them alike.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

RANK = """
import hashlib, sys
rounds = int(sys.argv[1])
print("in C", flush=True)
hashlib.pbkdf2_hmac("sha256", b"password", b"salt", rounds)
print("returned", flush=True)
"""
VARIANTS = {
    "bare": ([], {}),
    "yeto-otel, defaults": (["opentelemetry-instrument"], {}),
    "yeto-otel, signals opt-in": (["opentelemetry-instrument"],
                                  {"YETO_OTEL_EXIT_FLUSH_ON_SIGNALS": "on"}),
}


def rounds_for(seconds: float) -> int:
    """pbkdf2 rounds that take about `seconds` on this machine."""
    probe = 200_000
    started = time.perf_counter()
    hashlib.pbkdf2_hmac("sha256", b"password", b"salt", probe)
    return int(probe * seconds / (time.perf_counter() - started))


def run_once(prefix: list[str], env: dict, rounds: int, delay: float, workdir: str):
    full = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "YETO_"))}
    full.update(RANK="0", WORLD_SIZE="1", YETO_OTEL_LOCAL_DIR=os.path.join(workdir, "t"), **env)
    command = [*(shutil.which(p, path=os.path.dirname(sys.executable)) for p in prefix),
               sys.executable, "-c", RANK, str(rounds)]
    child = subprocess.Popen(command, env=full, stdout=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL))
    assert child.stdout.readline().strip() == "in C"
    entered = time.monotonic()
    time.sleep(delay)  # the SIGTERM comes this long into the C call: what is measured
    child.send_signal(signal.SIGTERM)
    status = child.wait()
    return time.monotonic() - entered, status


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--call-s", type=float, default=1.1, help="length of the C call")
    parser.add_argument("--delay-s", type=float, default=0.5, help="SIGTERM this far into it")
    args = parser.parse_args()
    rounds = rounds_for(args.call_s)
    results: dict[str, list[tuple[float, int]]] = {name: [] for name in VARIANTS}
    names = list(VARIANTS)
    with tempfile.TemporaryDirectory() as workdir:
        for r in range(args.rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                prefix, env = VARIANTS[name]
                results[name].append(run_once(prefix, env, rounds, args.delay_s, workdir))
    print(f"C call of ~{args.call_s} s ({rounds} pbkdf2 rounds), SIGTERM {args.delay_s} s in, "
          f"{args.rounds} rounds interleaved; python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs")
    print(f"{'variant':28} {'died after (s) median':>22} {'min':>6} {'max':>6}  status")
    for name, runs in results.items():
        times = [t for t, _ in runs]
        statuses = sorted({s for _, s in runs})
        print(f"{name:28} {statistics.median(times):22.2f} {min(times):6.2f} {max(times):6.2f}"
              f"  {statuses}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
