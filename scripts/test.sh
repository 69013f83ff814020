#!/usr/bin/env bash
# Everything the tests need on a fresh Debian machine, then the tests. Each set-up step is a
# no-op when already done (Go's module and build caches make the collector rebuilds fast).
set -euo pipefail
cd "$(dirname "$0")/.."

# torch's CUDA wheels (about 6 GiB installed, plus pip's unpacking) are the bulk of the set-up:
# say so up front instead of failing half-way through pip with ENOSPC.
need_kib=$((12 * 1024 * 1024))
free_kib=$(df -Pk . | awk 'NR == 2 {print $4}')
if [ -d .venv/lib ] || [ "${free_kib:-0}" -ge "$need_kib" ]; then :; else
  echo "scripts/test.sh: $((free_kib / 1024 / 1024)) GiB free in $(pwd); the set-up needs about 12 GiB (torch with its CUDA wheels)" >&2
  exit 1
fi

# The e2e tests (tests/e2e): Prometheus (Debian 2.42), the collector distribution and Jaeger.
command -v prometheus >/dev/null || {
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null
}
# The package may start a system Prometheus (port 9090); the tests run their own on free ports.
if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
  systemctl disable --now prometheus prometheus-node-exporter >/dev/null 2>&1 || true
elif command -v service >/dev/null; then
  service prometheus stop >/dev/null 2>&1 || true
  service prometheus-node-exporter stop >/dev/null 2>&1 || true
fi
collector/build.sh >/dev/null
collector/build-jaeger.sh >/dev/null

# The launcher tests (tests/e2e/test_slurm.py, test_mpi.py) run real launchers: a one-node
# Slurm cluster (slurmd, slurmctld, munge; PMIx for `srun --mpi=pmix`), OpenMPI and MPICH.
# Only the programs are needed: the tests start and stop their own daemons.
launcher_packages=()
command -v slurmd >/dev/null || launcher_packages+=(slurmd)
command -v slurmctld >/dev/null || launcher_packages+=(slurmctld)
command -v munged >/dev/null || [ -x /usr/sbin/munged ] || launcher_packages+=(munge)
command -v mpirun.openmpi >/dev/null || launcher_packages+=(openmpi-bin)
command -v mpiexec.mpich >/dev/null || launcher_packages+=(mpich)
dpkg -s libpmix-dev >/dev/null 2>&1 || launcher_packages+=(libpmix-dev)
if [ ${#launcher_packages[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    "${launcher_packages[@]}" >/dev/null
fi
# Debian's packages may start system daemons; the tests run their own, on their own ports.
for daemon in munge slurmd slurmctld; do
  if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
    systemctl disable --now "$daemon" >/dev/null 2>&1 || true
  elif command -v service >/dev/null; then
    service "$daemon" stop >/dev/null 2>&1 || true
  fi
done

# The report's browser test drives Debian's chromium (no browser download).
command -v chromium >/dev/null || {
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
}

python3 -m venv .venv
. .venv/bin/activate
pip install -q -e ".[test]"
python -m pytest "$@"
