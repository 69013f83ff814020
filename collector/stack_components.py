"""The processes of the local stack (collector/stack.py): where each binary is, what Jaeger,
Prometheus and the agent are started with, and how one is started (its health endpoint polled
until it answers ready, no fixed sleeps) and stopped (SIGTERM, then SIGKILL after a grace
period). Standard library only; stack.py re-exports what a user of the stack needs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["COLLECTOR_DIR", "LOOPBACK", "PORT_NAMES", "Component", "StackError",
           "StackUnavailable", "agent_component", "find_binary", "free_port", "free_ports",
           "http_get", "jaeger_component", "prometheus_component"]

COLLECTOR_DIR = Path(__file__).resolve().parent
LOOPBACK = "127.0.0.1"
# Every port the stack listens on, each one picked free on the loopback address.
PORT_NAMES = ("jaeger_otlp_grpc", "jaeger_otlp_http", "jaeger_query_http", "jaeger_query_grpc",
              "jaeger_health", "jaeger_telemetry", "prometheus", "agent_otlp_grpc",
              "agent_otlp_http", "agent_health", "agent_telemetry")


class StackError(RuntimeError):
    """A component could not be found, started or reached."""


class StackUnavailable(StackError):
    """A component answered that it cannot serve right now (HTTP 5xx, or not its API's answer,
    e.g. while it starts or stops): worth asking again, unlike a refused query."""


def free_port() -> int:
    """A TCP port that is free on the loopback address right now."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """`count` different TCP ports, free on the loopback address right now. (Asked one at a
    time, the kernel may hand out a port it handed out a moment ago: all are held until all
    are found.)"""
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(sock)
            sock.bind((LOOPBACK, 0))
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def http_get(url: str, timeout: float = 2.0) -> tuple[int, bytes]:
    """(status, body) of a GET; OSError when nothing answered within `timeout`."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def find_binary(env_name: str, default: Path | str, hint: str) -> str:
    """The program named by $env_name, else `default` (a path, or a name looked up on PATH)."""
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
class Component:
    """One server process: started with `argv` and `env`, ready once `ready(status, body)`
    holds for its `health_url`; its output goes to `log_path`."""

    name: str
    argv: list[str]
    env: dict[str, str]
    health_url: str
    ready: callable  # (status, body) -> bool
    log_path: Path
    process: subprocess.Popen | None = None
    _log: object = field(default=None, repr=False)

    def start(self, timeout: float) -> None:
        if self.running:
            return
        self._log = open(self.log_path, "ab")
        self.process = subprocess.Popen(self.argv, env=self.env, stdin=subprocess.DEVNULL,
                                        stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        delay = 0.05
        while True:
            if self.process.poll() is not None:
                returncode = self.process.returncode
                self.stop()
                raise StackError(f"{self.name} exited with {returncode} while starting; "
                                 f"log {self.log_path}:\n{self.log_tail()}")
            try:
                status, body = http_get(self.health_url, timeout=1.0)
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


def _http_ok(status: int, body: bytes) -> bool:
    return status == 200


def _at(ports: dict[str, int], name: str) -> str:
    return f"{LOOPBACK}:{ports[name]}"


def jaeger_component(ports: dict[str, int], workdir: Path, base_env: dict[str, str]) -> Component:
    """Jaeger v2 (collector/jaeger.yaml) with its traces on disk (Badger, the overlay
    jaeger-persistent.yaml), so a restarted Jaeger still has what it stored before."""
    env = dict(base_env,
               YETO_JAEGER_OTLP_GRPC_ENDPOINT=_at(ports, "jaeger_otlp_grpc"),
               YETO_JAEGER_OTLP_HTTP_ENDPOINT=_at(ports, "jaeger_otlp_http"),
               YETO_JAEGER_QUERY_HTTP_ENDPOINT=_at(ports, "jaeger_query_http"),
               YETO_JAEGER_QUERY_GRPC_ENDPOINT=_at(ports, "jaeger_query_grpc"),
               YETO_JAEGER_HEALTH_ENDPOINT=_at(ports, "jaeger_health"),
               YETO_JAEGER_TELEMETRY_PORT=str(ports["jaeger_telemetry"]),
               YETO_JAEGER_BADGER_DIR=str(workdir / "jaeger-data"),
               # Jaeger traces its own query API to the default OTLP endpoint, where nothing
               # listens; at exit it waits out that export (10 s by default), which made every
               # stop take ~10 s and, on a loaded machine, risked the SIGKILL after the grace.
               OTEL_EXPORTER_OTLP_TRACES_TIMEOUT="1000")
    jaeger = find_binary("YETO_JAEGER_BIN", COLLECTOR_DIR / "jaeger" / "bin" / "jaeger",
                         "build it with collector/build-jaeger.sh")
    return Component("jaeger", [jaeger, "--config", str(COLLECTOR_DIR / "jaeger.yaml"),
                                "--config", str(COLLECTOR_DIR / "jaeger-persistent.yaml")],
                     env, f"http://{_at(ports, 'jaeger_health')}/status", _http_ok,
                     workdir / "jaeger.log")


def prometheus_component(ports: dict[str, int], workdir: Path, rules: list[str],
                         base_env: dict[str, str]) -> Component:
    """Prometheus with the remote-write receiver, the rule files `rules`, no scrape targets."""
    prom_dir = workdir / "prometheus"
    prom_dir.mkdir(exist_ok=True)
    prom_config = prom_dir / "prometheus.yml"
    config = {"global": {"scrape_interval": "15s", "evaluation_interval": "5s"},
              "rule_files": rules, "scrape_configs": []}
    prom_config.write_text(json.dumps(config, indent=2))  # JSON is YAML
    prometheus = find_binary("YETO_PROMETHEUS_BIN", "prometheus",
                             "install it with `apt-get install -y prometheus` (Debian, 2.42)")
    return Component("prometheus",
                     [prometheus, f"--config.file={prom_config}",
                      f"--storage.tsdb.path={prom_dir / 'data'}",
                      f"--web.listen-address={_at(ports, 'prometheus')}",
                      "--web.enable-remote-write-receiver", "--log.level=info"],
                     dict(base_env), f"http://{_at(ports, 'prometheus')}/-/ready", _http_ok,
                     workdir / "prometheus.log")


def agent_component(ports: dict[str, int], workdir: Path, queue_dir: Path, agent_config: Path,
                    agent_env: dict[str, str], base_env: dict[str, str]) -> Component:
    """The agent (`agent_config`, collector/agent.yaml by default) sending traces to this
    Jaeger and metrics to this Prometheus, its disk queue and
    its remote-write write-ahead log (`prom_remotewrite/`) in `queue_dir`."""
    otelcol = find_binary("YETO_OTELCOL_BIN", COLLECTOR_DIR / "build" / "yeto-otelcol",
                          "build it with collector/build.sh")
    env = dict(base_env,
               YETO_AGENT_OTLP_GRPC_ENDPOINT=_at(ports, "agent_otlp_grpc"),
               YETO_AGENT_OTLP_HTTP_ENDPOINT=_at(ports, "agent_otlp_http"),
               YETO_AGENT_HEALTH_ENDPOINT=_at(ports, "agent_health"),
               YETO_AGENT_TELEMETRY_PORT=str(ports["agent_telemetry"]),
               YETO_AGENT_QUEUE_DIR=str(queue_dir),
               YETO_TRACES_OTLP_ENDPOINT=_at(ports, "jaeger_otlp_grpc"),
               # Jaeger takes no logs over OTLP; print them instead of retrying errors.
               YETO_AGENT_LOGS_EXPORTERS="[debug]",
               YETO_PROMETHEUS_REMOTE_WRITE_URL=f"http://{_at(ports, 'prometheus')}/api/v1/write")
    env.update(agent_env)
    return Component("agent", [otelcol, "--config", str(agent_config)], env,
                     f"http://{_at(ports, 'agent_health')}/", _http_ok, workdir / "agent.log")
