"""The local yeto-otel stack on free loopback ports: Jaeger v2, Prometheus, and the agent.

For the e2e tests and for trying the collector configs by hand. Standard library only (no pytest);
import it by path or run it::

    python collector/stack.py            # start everything, print the endpoints, Ctrl-C stops

    from stack import Stack               # with collector/ on sys.path
    with Stack() as stack:
        env = stack.trainer_env()         # OTEL_EXPORTER_OTLP_ENDPOINT etc. for a trainer
        ...
        stack.jaeger_traces("my-service")
        stack.prometheus_query("yeto_process_memory_rss_bytes")

Binaries (each overridable by an environment variable):
  agent       collector/build/yeto-otelcol   (collector/build.sh)        YETO_OTELCOL_BIN
  Jaeger      collector/jaeger/bin/jaeger    (collector/build-jaeger.sh) YETO_JAEGER_BIN
  Prometheus  `prometheus` on PATH (Debian 2.42: apt-get install prometheus) YETO_PROMETHEUS_BIN

Readiness is polled on each component's health endpoint (no fixed sleeps). Every process is
stopped on exit (SIGTERM, then SIGKILL after a grace period). Components can be stopped, killed
and restarted one by one (`stop("jaeger")`, `kill("agent")`, `start("agent")`) for outage tests;
a restarted component keeps its ports, its storage and, for the agent, its on-disk queue
and remote-write write-ahead log (both under `queue_dir`).
Tests wait on conditions with `Stack.wait_for` (polled, bounded by a timeout, a component that
is restarting or slow to answer counts as "not yet").

What each component is started with, and the process handling: collector/stack_components.py
(imported by this file from beside it; its public names are re-exported here).
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
import urllib.parse
from datetime import datetime, timezone
from pathlib import Path


def _sibling(name: str):
    """collector/<name>.py, whether this file was imported as `stack` (collector/ on sys.path)
    or by path under another name (tests/required_components.stack_module())."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses needs the module registered
        spec.loader.exec_module(module)
    return sys.modules[name]


_components = _sibling("stack_components")
COLLECTOR_DIR = _components.COLLECTOR_DIR
LOOPBACK = _components.LOOPBACK
Component = _components.Component
StackError = _components.StackError
StackUnavailable = _components.StackUnavailable
free_port = _components.free_port
free_ports = _components.free_ports
_http_get = _components.http_get
_Component = Component  # the name tests used before the split

__all__ = ["COLLECTOR_DIR", "Component", "Stack", "StackError", "StackUnavailable", "free_port",
           "free_ports", "metric_total", "parse_metrics_text"]
# Errors a poll may meet while a component starts, stops or answers slowly: asked again.
TRANSIENT_ERRORS = (OSError, http.client.HTTPException, StackUnavailable)
# Tries at the first start, each on fresh ports, when a port was taken before its server bound
# it (another process may bind any free port between free_port() and the server's own bind).
PORT_ATTEMPTS = 3


def parse_metrics_text(text: str) -> dict[str, dict[str, float]]:
    """A component's own metrics in the Prometheus text format: name -> {label set as written
    (`{a="b",...}`, or "" without labels): value}."""
    metrics: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        name, brace, labels = head.partition("{")
        metrics.setdefault(name, {})[brace + labels] = float(value)
    return metrics


def api_time(text: str) -> float:
    """Seconds since the epoch of an RFC 3339 time from the Prometheus API (nanoseconds, Z)."""
    match = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", text)
    if not match:
        raise ValueError(f"not an RFC 3339 time: {text!r}")
    base, fraction, zone = match.groups()
    zone = "+00:00" if zone == "Z" else zone
    seconds = datetime.fromisoformat(base + zone).astimezone(timezone.utc).timestamp()
    return seconds + (float("0." + fraction) if fraction else 0.0)


def metric_total(metrics: dict[str, dict[str, float]], name: str, **labels: str) -> float | None:
    """Sum of `name` over its series that have every `labels` pair; None when it has none."""
    values = [value for series, value in metrics.get(name, {}).items()
              if all(f'{key}="{wanted}"' in series for key, wanted in labels.items())]
    return sum(values) if values else None


class Stack:
    """Jaeger + Prometheus + the agent (collector/agent.yaml), all on free loopback ports.

    `workdir`: where logs, Prometheus' TSDB, the Prometheus config and the agent's queue go
    (a fresh temporary directory, removed on exit, when not given). `agent_env`: extra
    environment for the agent (e.g. YETO_AGENT_RETRY_MAX_ELAPSED). `rules`: Prometheus rule
    file globs (default collector/alerts/*.yml when that directory has any).
    """

    def __init__(self, workdir: str | os.PathLike | None = None, *,
                 agent_config: str | os.PathLike = COLLECTOR_DIR / "agent.yaml",
                 agent_env: dict[str, str] | None = None,
                 rules: list[str] | None = None,
                 start_timeout: float = 60.0,
                 with_agent: bool = True) -> None:
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="yeto-stack-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.start_timeout = start_timeout
        self.with_agent = with_agent
        if rules is None:
            rules = ([str(COLLECTOR_DIR / "alerts" / "*.yml")]
                     if list((COLLECTOR_DIR / "alerts").glob("*.yml")) else [])
        self.rules = rules
        self.queue_dir = self.workdir / "agent-queue"
        self._agent_config = Path(agent_config)
        self._agent_env = dict(agent_env or {})
        self._started = False  # once anything started, the ports are kept for good
        self._build()

    # endpoints -----------------------------------------------------------------------------
    @property
    def agent_otlp_grpc(self) -> str:
        return f"http://{LOOPBACK}:{self.ports['agent_otlp_grpc']}"

    @property
    def agent_otlp_http(self) -> str:
        return f"http://{LOOPBACK}:{self.ports['agent_otlp_http']}"

    @property
    def jaeger_url(self) -> str:
        return f"http://{LOOPBACK}:{self.ports['jaeger_query_http']}"

    @property
    def jaeger_otlp_grpc(self) -> str:
        return f"{LOOPBACK}:{self.ports['jaeger_otlp_grpc']}"

    @property
    def prometheus_url(self) -> str:
        return f"http://{LOOPBACK}:{self.ports['prometheus']}"

    @property
    def agent_telemetry_url(self) -> str:
        return f"http://{LOOPBACK}:{self.ports['agent_telemetry']}/metrics"

    def trainer_env(self, protocol: str = "grpc") -> dict[str, str]:
        """Environment for a process that should export to this stack's agent."""
        endpoint = self.agent_otlp_grpc if protocol == "grpc" else self.agent_otlp_http
        return {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
                "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc" if protocol == "grpc" else "http/protobuf",
                "OTEL_EXPORTER_OTLP_INSECURE": "true"}

    # set-up ----------------------------------------------------------------------------------
    def _build(self) -> None:
        """Fresh free ports, and every component set up to use them (nothing started)."""
        names = _components.PORT_NAMES
        self.ports = dict(zip(names, free_ports(len(names))))
        base = {k: v for k, v in os.environ.items() if not k.startswith(("YETO_", "OTEL_"))}
        self._components = {
            "jaeger": _components.jaeger_component(self.ports, self.workdir, base),
            "prometheus": _components.prometheus_component(self.ports, self.workdir,
                                                           self.rules, base)}
        if self.with_agent:
            self._components["agent"] = _components.agent_component(
                self.ports, self.workdir, self.queue_dir, self._agent_config, self._agent_env,
                base)

    # life cycle ------------------------------------------------------------------------------
    def start(self, name: str | None = None) -> "Stack":
        """Start one component, or all that are not running (backends first) when `name` is
        None. A component keeps its ports once anything has started."""
        names = [name] if name else ["jaeger", "prometheus", "agent"]
        first, attempt = not self._started, 1
        while True:
            try:
                for each in names:
                    if each in self._components:
                        self._components[each].start(self.start_timeout)
                self._started = True
                return self
            except StackError as error:
                retry = (name is None and first and attempt < PORT_ATTEMPTS
                         and "address already in use" in str(error).lower())
                if not retry:
                    if name is None:
                        self.close()
                    raise
                self.stop()
                self._build()
                attempt += 1
            except BaseException:
                if name is None:
                    self.close()
                raise

    def stop(self, name: str | None = None, *, grace: float = 15.0) -> None:
        """Stop one component (SIGTERM, SIGKILL after `grace`), or all (agent first)."""
        names = [name] if name else ["agent", "prometheus", "jaeger"]
        for each in names:
            if each in self._components:
                self._components[each].stop(signal.SIGTERM, grace)

    def kill(self, name: str) -> None:
        """SIGKILL one component (nothing flushed); `start(name)` brings it back."""
        self._components[name].stop(signal.SIGKILL, grace=10.0)

    def running(self, name: str) -> bool:
        return self._components[name].running

    def pid(self, name: str) -> int | None:
        """The component's process id while it runs (for CPU and memory measurements)."""
        component = self._components[name]
        return component.process.pid if component.running else None

    def log(self, name: str, lines: int = 50) -> str:
        return self._components[name].log_tail(lines)

    def close(self) -> None:
        self.stop()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> "Stack":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.close()

    # queries ---------------------------------------------------------------------------------
    def jaeger_traces(self, service: str, limit: int = 1000, timeout: float = 60.0,
                      **params: str) -> list[dict]:
        """Traces of `service` from Jaeger's query API (`/api/traces`), [] when none.
        `timeout`: for the answer, which for thousands of traces takes seconds."""
        query = urllib.parse.urlencode(dict(params, service=service, limit=limit))
        status, body = _http_get(f"{self.jaeger_url}/api/traces?{query}", timeout=timeout)
        if status == 404 or (status == 400 and b"not found" in body.lower()):
            return []
        if status != 200:
            error = StackUnavailable if status >= 500 else StackError
            raise error(f"jaeger /api/traces: HTTP {status}: {body[:300]!r}")
        return json.loads(body).get("data") or []

    def jaeger_services(self) -> list[str]:
        status, body = _http_get(f"{self.jaeger_url}/api/services", timeout=10.0)
        if status != 200:
            error = StackUnavailable if status >= 500 else StackError
            raise error(f"jaeger /api/services: HTTP {status}: {body[:300]!r}")
        return json.loads(body).get("data") or []

    def prometheus_query(self, expr: str, time_s: float | None = None) -> list[dict]:
        """Instant query result (`data.result`) from Prometheus' HTTP API."""
        params = {"query": expr}
        if time_s is not None:
            params["time"] = str(time_s)
        return self._prometheus("/api/v1/query", params)["result"]

    def prometheus_series(self, match: str) -> list[dict]:
        return self._prometheus("/api/v1/series", {"match[]": match})

    def prometheus_names(self, match: str) -> set[str]:
        """Metric names (`__name__` values) of the series that `match` selects."""
        return set(self._prometheus("/api/v1/label/__name__/values", {"match[]": match}))

    def prometheus_rule_groups(self) -> list[dict]:
        """The loaded rule groups, each rule with its health, state and last evaluation."""
        return self._prometheus("/api/v1/rules", {})["groups"]

    def prometheus_metadata(self, metric: str | None = None) -> dict:
        return self._prometheus("/api/v1/metadata", {"metric": metric} if metric else {})

    def _prometheus(self, path: str, params: dict[str, str]) -> object:
        url = f"{self.prometheus_url}{path}?{urllib.parse.urlencode(params)}"
        status, body = _http_get(url, timeout=30.0)
        try:
            payload = json.loads(body) if body else {}
        except ValueError:  # e.g. the plain-text 503 of a Prometheus that is not ready yet
            payload = {}
        if status != 200 or payload.get("status") != "success":
            error = StackUnavailable if status >= 500 else StackError
            raise error(f"prometheus {path}: HTTP {status}: {body[:300]!r}")
        return payload["data"]

    def telemetry(self, name: str) -> dict[str, dict[str, float]]:
        """A component's own metrics (see `parse_metrics_text`); {} while it is down."""
        url = {"agent": self.agent_telemetry_url,
               "prometheus": f"{self.prometheus_url}/metrics",
               "jaeger": f"http://{LOOPBACK}:{self.ports['jaeger_telemetry']}/metrics"}[name]
        try:
            status, body = _http_get(url, timeout=10.0)
        except OSError:
            return {}
        return parse_metrics_text(body.decode(errors="replace")) if status == 200 else {}

    def agent_metric(self, name: str, **labels: str) -> float | None:
        """Sum of the agent's own metric `name` over the series matching `labels`; None when
        the agent is down or has no such series yet."""
        return metric_total(self.telemetry("agent"), name, **labels)

    def wait_for(self, predicate, timeout: float = 60.0, interval: float = 0.5,
                 what: str = "condition"):
        """Poll `predicate()` until it returns something truthy; return that. A transient
        error in the predicate (nothing answered in time, HTTP 5xx: see TRANSIENT_ERRORS)
        counts as "not yet"; any other error ends the wait at once."""
        deadline = time.monotonic() + timeout
        while True:
            last_error = None
            try:
                value = predicate()
            except TRANSIENT_ERRORS as error:
                value, last_error = None, error
            if value:
                return value
            if time.monotonic() > deadline:
                also = f" (last: {last_error!r})" if last_error is not None else ""
                raise StackError(f"timed out after {timeout}s waiting for {what}{also}")
            time.sleep(interval)


def main() -> int:
    def _interrupt(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _interrupt)
    with Stack(workdir=sys.argv[1] if len(sys.argv) > 1 else None) as stack:
        print(f"agent OTLP gRPC  {stack.agent_otlp_grpc}")
        print(f"agent OTLP HTTP  {stack.agent_otlp_http}")
        print(f"Jaeger query     {stack.jaeger_url}")
        print(f"Prometheus       {stack.prometheus_url}")
        print(f"workdir          {stack.workdir}")
        print("export " + " ".join(f"{k}={v}" for k, v in stack.trainer_env().items()))
        sys.stdout.flush()
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
