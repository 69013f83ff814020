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
a restarted component keeps its ports, its storage and, for the agent, its on-disk queue.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["COLLECTOR_DIR", "Stack", "StackError", "free_port", "metric_total",
           "parse_metrics_text"]

COLLECTOR_DIR = Path(__file__).resolve().parent
LOOPBACK = "127.0.0.1"


class StackError(RuntimeError):
    """A component could not be found, started or reached."""


def free_port() -> int:
    """A TCP port that is free on the loopback address right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def _http_get(url: str, timeout: float = 2.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


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


def metric_total(metrics: dict[str, dict[str, float]], name: str, **labels: str) -> float | None:
    """Sum of `name` over its series that have every `labels` pair; None when it has none."""
    values = [value for series, value in metrics.get(name, {}).items()
              if all(f'{key}="{wanted}"' in series for key, wanted in labels.items())]
    return sum(values) if values else None


def _binary(env_name: str, default: Path | str, hint: str) -> str:
    value = os.environ.get(env_name)
    if value:
        path = shutil.which(value) or value
    elif isinstance(default, Path):
        path = str(default)
    else:
        path = shutil.which(default) or ""
    if not path or not os.access(path, os.X_OK):
        raise StackError(f"{env_name}: no executable at {path or default!r}; {hint}")
    return path


@dataclass
class _Component:
    name: str
    argv: list[str]
    env: dict[str, str]
    health_url: str
    ready: callable  # (status, body) -> bool
    log_path: Path
    process: subprocess.Popen | None = None
    _log: object = field(default=None, repr=False)

    def start(self, timeout: float) -> None:
        if self.process is not None and self.process.poll() is None:
            return
        self._log = open(self.log_path, "ab")
        self.process = subprocess.Popen(self.argv, env=self.env, stdin=subprocess.DEVNULL,
                                        stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        delay = 0.05
        while True:
            if self.process.poll() is not None:
                raise StackError(f"{self.name} exited with {self.process.returncode} while "
                                 f"starting; log {self.log_path}:\n{self.log_tail()}")
            try:
                status, body = _http_get(self.health_url, timeout=1.0)
                if self.ready(status, body):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise StackError(f"{self.name} not ready at {self.health_url} within {timeout}s; "
                                 f"log {self.log_path}:\n{self.log_tail()}")
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)

    def stop(self, sig: int = signal.SIGTERM, grace: float = 15.0) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.send_signal(sig)
            try:
                process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


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
        self.ports = {name: free_port() for name in (
            "jaeger_otlp_grpc", "jaeger_otlp_http", "jaeger_query_http", "jaeger_query_grpc",
            "jaeger_health", "jaeger_telemetry", "prometheus", "agent_otlp_grpc",
            "agent_otlp_http", "agent_health", "agent_telemetry")}
        if rules is None:
            rules = ([str(COLLECTOR_DIR / "alerts" / "*.yml")]
                     if list((COLLECTOR_DIR / "alerts").glob("*.yml")) else [])
        self.rules = rules
        self.queue_dir = self.workdir / "agent-queue"
        self._components: dict[str, _Component] = {}
        self._build(Path(agent_config), agent_env or {})

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
    def _build(self, agent_config: Path, agent_env: dict[str, str]) -> None:
        p = self.ports
        base = {k: v for k, v in os.environ.items() if not k.startswith(("YETO_", "OTEL_"))}

        jaeger_env = dict(base,
                          YETO_JAEGER_OTLP_GRPC_ENDPOINT=f"{LOOPBACK}:{p['jaeger_otlp_grpc']}",
                          YETO_JAEGER_OTLP_HTTP_ENDPOINT=f"{LOOPBACK}:{p['jaeger_otlp_http']}",
                          YETO_JAEGER_QUERY_HTTP_ENDPOINT=f"{LOOPBACK}:{p['jaeger_query_http']}",
                          YETO_JAEGER_QUERY_GRPC_ENDPOINT=f"{LOOPBACK}:{p['jaeger_query_grpc']}",
                          YETO_JAEGER_HEALTH_ENDPOINT=f"{LOOPBACK}:{p['jaeger_health']}",
                          YETO_JAEGER_TELEMETRY_PORT=str(p["jaeger_telemetry"]),
                          YETO_JAEGER_BADGER_DIR=str(self.workdir / "jaeger-data"))
        jaeger = _binary("YETO_JAEGER_BIN", COLLECTOR_DIR / "jaeger" / "bin" / "jaeger",
                         "build it with collector/build-jaeger.sh")
        # Traces on disk (Badger), so a restarted Jaeger still has what it stored before.
        self._components["jaeger"] = _Component(
            "jaeger", [jaeger, "--config", str(COLLECTOR_DIR / "jaeger.yaml"),
                       "--config", str(COLLECTOR_DIR / "jaeger-persistent.yaml")], jaeger_env,
            f"http://{LOOPBACK}:{p['jaeger_health']}/status",
            lambda status, body: status == 200, self.workdir / "jaeger.log")

        prom_dir = self.workdir / "prometheus"
        prom_dir.mkdir(exist_ok=True)
        prom_config = prom_dir / "prometheus.yml"
        config = {"global": {"scrape_interval": "15s", "evaluation_interval": "5s"},
                  "rule_files": self.rules, "scrape_configs": []}
        prom_config.write_text(json.dumps(config, indent=2))  # JSON is YAML
        prometheus = _binary("YETO_PROMETHEUS_BIN", "prometheus",
                             "install it with `apt-get install -y prometheus` (Debian, 2.42)")
        self._components["prometheus"] = _Component(
            "prometheus",
            [prometheus, f"--config.file={prom_config}",
             f"--storage.tsdb.path={prom_dir / 'data'}",
             f"--web.listen-address={LOOPBACK}:{p['prometheus']}",
             "--web.enable-remote-write-receiver", "--log.level=info"],
            dict(base), f"http://{LOOPBACK}:{p['prometheus']}/-/ready",
            lambda status, body: status == 200, self.workdir / "prometheus.log")

        if not self.with_agent:
            return
        otelcol = _binary("YETO_OTELCOL_BIN", COLLECTOR_DIR / "build" / "yeto-otelcol",
                          "build it with collector/build.sh")
        env = dict(base,
                   YETO_AGENT_OTLP_GRPC_ENDPOINT=f"{LOOPBACK}:{p['agent_otlp_grpc']}",
                   YETO_AGENT_OTLP_HTTP_ENDPOINT=f"{LOOPBACK}:{p['agent_otlp_http']}",
                   YETO_AGENT_HEALTH_ENDPOINT=f"{LOOPBACK}:{p['agent_health']}",
                   YETO_AGENT_TELEMETRY_PORT=str(p["agent_telemetry"]),
                   YETO_AGENT_QUEUE_DIR=str(self.queue_dir),
                   YETO_TRACES_OTLP_ENDPOINT=f"{LOOPBACK}:{p['jaeger_otlp_grpc']}",
                   # Jaeger takes no logs over OTLP; print them instead of retrying errors.
                   YETO_AGENT_LOGS_EXPORTERS="[debug]",
                   YETO_PROMETHEUS_REMOTE_WRITE_URL=(
                       f"http://{LOOPBACK}:{p['prometheus']}/api/v1/write"))
        env.update(agent_env)
        self._components["agent"] = _Component(
            "agent", [otelcol, "--config", str(agent_config)], env,
            f"http://{LOOPBACK}:{p['agent_health']}/",
            lambda status, body: status == 200, self.workdir / "agent.log")

    # life cycle ------------------------------------------------------------------------------
    def start(self, name: str | None = None) -> "Stack":
        """Start one component, or all (backends first) when `name` is None."""
        names = [name] if name else ["jaeger", "prometheus", "agent"]
        try:
            for each in names:
                if each in self._components:
                    self._components[each].start(self.start_timeout)
        except BaseException:
            if name is None:
                self.close()
            raise
        return self

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
    def jaeger_traces(self, service: str, limit: int = 1000, **params: str) -> list[dict]:
        """Traces of `service` from Jaeger's query API (`/api/traces`), [] when none."""
        query = urllib.parse.urlencode(dict(params, service=service, limit=limit))
        status, body = _http_get(f"{self.jaeger_url}/api/traces?{query}", timeout=10.0)
        if status == 404 or (status == 400 and b"not found" in body.lower()):
            return []
        if status != 200:
            raise StackError(f"jaeger /api/traces: HTTP {status}: {body[:300]!r}")
        return json.loads(body).get("data") or []

    def jaeger_services(self) -> list[str]:
        status, body = _http_get(f"{self.jaeger_url}/api/services", timeout=10.0)
        if status != 200:
            raise StackError(f"jaeger /api/services: HTTP {status}: {body[:300]!r}")
        return json.loads(body).get("data") or []

    def prometheus_query(self, expr: str, time_s: float | None = None) -> list[dict]:
        """Instant query result (`data.result`) from Prometheus' HTTP API."""
        params = {"query": expr}
        if time_s is not None:
            params["time"] = str(time_s)
        return self._prometheus("/api/v1/query", params)["result"]

    def prometheus_series(self, match: str) -> list[dict]:
        return self._prometheus("/api/v1/series", {"match[]": match})

    def prometheus_metadata(self, metric: str | None = None) -> dict:
        return self._prometheus("/api/v1/metadata", {"metric": metric} if metric else {})

    def _prometheus(self, path: str, params: dict[str, str]) -> object:
        url = f"{self.prometheus_url}{path}?{urllib.parse.urlencode(params)}"
        status, body = _http_get(url, timeout=10.0)
        payload = json.loads(body) if body else {}
        if status != 200 or payload.get("status") != "success":
            raise StackError(f"prometheus {path}: HTTP {status}: {body[:300]!r}")
        return payload["data"]

    def telemetry(self, name: str) -> dict[str, dict[str, float]]:
        """A component's own metrics (see `parse_metrics_text`); {} while it is down."""
        url = {"agent": self.agent_telemetry_url,
               "prometheus": f"{self.prometheus_url}/metrics",
               "jaeger": f"http://{LOOPBACK}:{self.ports['jaeger_telemetry']}/metrics"}[name]
        try:
            status, body = _http_get(url, timeout=5.0)
        except OSError:
            return {}
        return parse_metrics_text(body.decode(errors="replace")) if status == 200 else {}

    def agent_metric(self, name: str, **labels: str) -> float | None:
        """Sum of the agent's own metric `name` over the series matching `labels`; None when
        the agent is down or has no such series yet."""
        return metric_total(self.telemetry("agent"), name, **labels)

    def wait_for(self, predicate, timeout: float = 60.0, interval: float = 0.5,
                 what: str = "condition"):
        """Poll `predicate()` until it returns something truthy; return that."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise StackError(f"timed out after {timeout}s waiting for {what}")
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
