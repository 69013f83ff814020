"""A process that contends for a duty, driven line by line on stdin (tests/census/test_duty.py,
test_node_duty.py).

    python duty_contender.py duty KEY LOCK_DIR
    python duty_contender.py node LOCK_DIR LOCAL_RANK

Commands, one answer line each:
- `check`: `duty`: whether `Duty(KEY).held()`; `node`: one collection of a real
  HostMemoryInstrumentor on an in-memory reader, and whether it exported any `yeto.node.*`;
- `fork`: forks a child that holds the inherited descriptors and waits (until killed);
  answers the child's pid and, once the child has checked, whether the child held the duty.
"""

from __future__ import annotations

import os
import signal
import sys


def _duty_check(key: str, lock_dir: str):
    from yeto_otel.census import Duty

    duty = Duty(key, directory=lock_dir)
    return duty.held


def _node_check(lock_dir: str, local_rank: str):
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from yeto_otel.census import CENSUS
    from yeto_otel.instrumentation import HostMemoryInstrumentor
    from yeto_otel.settings import Settings

    node_names = {m.name for m in CENSUS if m.node}
    reader = InMemoryMetricReader()
    HostMemoryInstrumentor().instrument(
        meter_provider=MeterProvider(metric_readers=[reader]),
        settings=Settings(host_allocator="none", node_metrics="auto", lock_dir=lock_dir,
                          local_rank=int(local_rank)))

    def exported_node_metrics() -> bool:
        data = reader.get_metrics_data()
        names = {m.name for rm in data.resource_metrics for sm in rm.scope_metrics
                 for m in sm.metrics if m.data.data_points}
        return bool(names & node_names)

    return exported_node_metrics


def _fork(check) -> str:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        os.write(write_end, b"1" if check() else b"0")
        os.close(write_end)
        while True:  # alive, with every descriptor it inherited, until the test kills it
            signal.pause()
    os.close(write_end)
    held = os.read(read_end, 1) == b"1"
    os.close(read_end)
    return f"{pid} {held}"


def main() -> None:
    mode, *args = sys.argv[1:]
    check = _duty_check(*args) if mode == "duty" else _node_check(*args)
    print("ready", flush=True)
    for line in sys.stdin:
        command = line.strip()
        answer = str(check()) if command == "check" else _fork(check)
        print(answer, flush=True)


if __name__ == "__main__":
    main()
