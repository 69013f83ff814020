"""Trainer-like ranks for the e2e tests: each one `tests/e2e/trainer.py` under
`opentelemetry-instrument`, exporting to a stack's agent with the product's env settings."""

from __future__ import annotations

import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def clean_env() -> dict[str, str]:
    """This environment without any OTel, yeto or launcher setting a developer's shell may have."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("OTEL_", "YETO_"))
            and k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")}


def job_matcher(service: str) -> str:
    """A PromQL matcher for the series of `service` and nothing else: Prometheus' `job` is
    service.namespace/service.name, or the bare name without a namespace. (Each test names its
    service uniquely, so this is exactly what its ranks wrote, plus whatever rules computed
    from those series keeping their job label.)"""
    assert re.fullmatch(r"[\w-]+", service), service  # nothing to escape in the regex
    return f'job=~"(.+/)?{service}"'


def job_lock_dir(service: str) -> str:
    """`YETO_OTEL_LOCK_DIR` for `service`'s processes: a directory of the job's own, so its
    ranks elect the node's (and their cgroup's) reporter among themselves, whatever else on
    this machine (another test run, a process of this one) holds a duty in /dev/shm. Removed
    when the test run ends."""
    assert re.fullmatch(r"[\w-]+", service), service
    path = Path(tempfile.gettempdir()) / f"yeto-locks-{service}"
    if not path.exists():
        path.mkdir()
        atexit.register(shutil.rmtree, path, True)
    return str(path)


def job_env(stack, service: str, **env: str) -> dict[str, str]:
    """The environment of a launcher (torchrun) of `service`'s ranks, exporting to the stack's
    agent (`env` adds to or overrides it): no RANK, LOCAL_RANK or WORLD_SIZE, which the launcher
    sets for each rank it starts."""
    full = dict(clean_env(), **stack.trainer_env(),
                OTEL_SERVICE_NAME=service, OTEL_METRIC_EXPORT_INTERVAL="500",
                OTEL_TRACES_EXPORTER="otlp", OTEL_METRICS_EXPORTER="otlp",
                OTEL_LOGS_EXPORTER="none", YETO_OTEL_LOCK_DIR=job_lock_dir(service))
    full.update(env)
    return full


def rank_env(stack, service: str, *, rank: int = 0, world: int = 1, **env: str) -> dict[str, str]:
    """The environment of one rank of `service` on one host, exporting to the stack's agent
    (`env` adds to or overrides it)."""
    return job_env(stack, service, **{"RANK": str(rank), "LOCAL_RANK": str(rank),
                                      "WORLD_SIZE": str(world),
                                      "LOCAL_WORLD_SIZE": str(world), **env})


def run_ranks(stack, instrument_bin: str, workdir: Path, service: str, *, world: int,
              seconds: float, **env: str) -> dict[int, subprocess.CompletedProcess]:
    """Run `world` ranks on one host side by side to completion; {rank: CompletedProcess}."""
    procs = {}
    for rank in range(world):
        procs[rank] = subprocess.Popen(
            [instrument_bin, sys.executable, str(HERE / "trainer.py"),
             str(workdir / f"anchors-{rank}.pt"), str(seconds)],
            env=rank_env(stack, service, rank=rank, world=world, **env), cwd=workdir,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    results = {}
    for rank, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        results[rank] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return results


def _remote_writes(stack) -> dict[str, float] | None:
    """Prometheus' count of remote-write requests by label set (code, ...); None before the
    first one is counted (it is counted once answered, a moment after its samples show)."""
    requests = stack.telemetry("prometheus").get("prometheus_http_requests_total", {})
    return {labels: value for labels, value in requests.items()
            if "/api/v1/write" in labels and value > 0} or None


def assert_prometheus_rejected_nothing(stack, stack_module, timeout: float) -> None:
    """No remote write answered 4xx/5xx, no out-of-order sample, nothing the agent gave up on.
    Call once everything the test sent has arrived."""
    try:
        writes = stack.wait_for(lambda: _remote_writes(stack), timeout=timeout,
                                what="remote writes counted by Prometheus")
    except stack_module.StackError:
        raise AssertionError("no remote write reached Prometheus") from None
    rejected = {labels: value for labels, value in writes.items()
                if re.search(r'code="[45]\d\d"', labels)}
    assert not rejected, rejected
    metrics = stack.telemetry("prometheus")
    assert (stack_module.metric_total(metrics, "prometheus_tsdb_out_of_order_samples_total")
            or 0.0) == 0
    log = stack.log("agent", lines=100000).lower()
    for needle in ("out of order", "out-of-order", "duplicate sample", "permanent error"):
        assert needle not in log, stack.log("agent", lines=200)
