"""A one-node Slurm cluster for the tests: Debian's munged, slurmctld and slurmd, run as root
without systemd, every file in a directory of its own, both daemons on 127.0.0.1 and free
ports.

`python tests/e2e/slurm_cluster.py` starts one and prints the SLURM_CONF to use, until
Ctrl-C.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DAEMONS = {"munged": "/usr/sbin/munged", "slurmctld": "/usr/sbin/slurmctld",
           "slurmd": "/usr/sbin/slurmd"}
CLIENTS = ("srun", "sbatch", "sinfo", "squeue", "scontrol", "sacct")
READY_TIMEOUT = 60.0


def missing_programs() -> list[str]:
    found = [p for p in DAEMONS.values() if os.access(p, os.X_OK)]
    found += [c for c in CLIENTS if shutil.which(c)]
    return sorted(set(DAEMONS.values()) - set(found)
                  | {c for c in CLIENTS if not shutil.which(c)})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _config(root: Path, host: str) -> str:
    return f"""\
ClusterName=yeto-tests
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
CommunicationParameters=NoInAddrAny
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={root}/munge/munge.sock
CredType=cred/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobRequeue=1
NodeName={host} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} State=UNKNOWN
PartitionName=tests Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
"""


class SlurmCluster:
    """Started by `start()`, stopped by `stop()` (every daemon, and the directory)."""

    def __init__(self) -> None:
        # munged wants every directory above its socket open to all (a pytest tmp_path is not)
        self.root = Path(tempfile.mkdtemp(prefix="yeto-slurm-"))
        self.root.chmod(0o755)
        self.conf = self.root / "slurm.conf"
        self.host = socket.gethostname().split(".")[0]
        self._daemons: list[subprocess.Popen] = []

    @property
    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf)}

    def start(self) -> "SlurmCluster":
        for name in ("state", "spool", "log"):
            (self.root / name).mkdir()
        self._start_munged()
        self.conf.write_text(_config(self.root, self.host))
        env = {**os.environ, **self.env}
        for daemon, args in (("slurmctld", ["-D", "-i"]), ("slurmd", ["-D"])):
            log = open(self.root / "log" / f"{daemon}.out", "wb")
            self._daemons.append(subprocess.Popen([DAEMONS[daemon], *args, "-f", str(self.conf)],
                                                  env=env, stdout=log, stderr=log,
                                                  start_new_session=True))
        self._wait_idle()
        return self

    def _start_munged(self) -> None:
        munge = self.root / "munge"
        munge.mkdir(mode=0o755)
        key = munge / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        shutil.chown(munge, "munge", "munge")
        shutil.chown(key, "munge", "munge")
        subprocess.run(["runuser", "-u", "munge", "--", DAEMONS["munged"],
                        f"--socket={munge}/munge.sock", f"--key-file={key}",
                        f"--pid-file={munge}/munged.pid", f"--log-file={munge}/munged.log",
                        f"--seed-file={munge}/seed"], check=True, timeout=30)

    def _wait_idle(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            for daemon in self._daemons:
                if daemon.poll() is not None:
                    raise RuntimeError(f"{daemon.args[0]} exited: {self.logs()}")
            state = subprocess.run(["sinfo", "-h", "-o", "%t"], env={**os.environ, **self.env},
                                   capture_output=True, text=True)
            if state.stdout.strip() == "idle":
                return
            time.sleep(0.2)
        raise RuntimeError(f"the Slurm node was not idle after {READY_TIMEOUT:.0f} s: "
                           f"{self.logs()}")

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}"
                         for p in sorted((self.root / "log").glob("*")))

    def _cancel_jobs(self) -> None:
        """Cancel every job (a requeued batch step may still run) and wait for the queue to
        empty, so that no step daemon is left waiting for a slurmd that is gone."""
        env = {**os.environ, **self.env}
        subprocess.run(["scancel", "--quiet", "--full", "--partition=tests"], env=env,
                       capture_output=True, timeout=30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            queue = subprocess.run(["squeue", "-h", "-o", "%i"], env=env, capture_output=True,
                                   text=True, timeout=30)
            if queue.returncode != 0 or not queue.stdout.strip():
                return
            time.sleep(0.2)

    def _kill_step_daemons(self) -> None:
        """slurmstepd runs apart from slurmd (its own session): any of this cluster's that is
        still there, known by the SLURM_CONF it inherited, goes with the cluster."""
        mine = f"SLURM_CONF={self.conf}".encode()
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/comm", "rb") as f:
                    if not f.read().startswith(b"slurmstepd"):
                        continue
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if mine not in f.read().split(b"\0"):
                        continue
                os.kill(int(entry), signal.SIGKILL)
            except (OSError, ValueError):
                pass  # gone meanwhile

    def stop(self) -> None:
        if self._daemons and all(d.poll() is None for d in self._daemons):
            try:
                self._cancel_jobs()
            except (OSError, subprocess.SubprocessError):
                pass  # the daemons go below whatever the queue says
        for daemon in self._daemons:
            if daemon.poll() is None:
                os.killpg(daemon.pid, signal.SIGTERM)
        for daemon in self._daemons:
            try:
                daemon.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(daemon.pid, signal.SIGKILL)
                daemon.wait()
        self._kill_step_daemons()
        pid_file = self.root / "munge" / "munged.pid"
        if pid_file.exists():
            try:
                os.kill(int(pid_file.read_text()), signal.SIGTERM)
            except (ValueError, ProcessLookupError):
                pass
        shutil.rmtree(self.root, ignore_errors=True)


if __name__ == "__main__":
    cluster = SlurmCluster().start()
    print(f"export SLURM_CONF={cluster.conf}", flush=True)
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
    sys.exit(0)
