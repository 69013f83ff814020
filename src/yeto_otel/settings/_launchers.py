"""Which rank a process is, from its launcher's own variables.

torchrun is one launcher among several, and most of the others never set RANK: Slurm's srun,
OpenMPI's mpirun, MPICH's and Intel MPI's mpiexec (PMI), PMIx launchers, MVAPICH2, and
Lightning's own DDP launcher each put the rank in variables of their own, all of them in the
environment before the interpreter starts. The first source in this order that names a rank
wins; its local rank and world size come with it:

| source | rank | local rank | world size |
|---|---|---|---|
| `torch` (torchrun, Kubeflow, JobSet, DeepSpeed, accelerate) | RANK | LOCAL_RANK | WORLD_SIZE |
| `openmpi` (mpirun) | OMPI_COMM_WORLD_RANK | OMPI_COMM_WORLD_LOCAL_RANK | OMPI_COMM_WORLD_SIZE |
| `pmix` (srun --mpi=pmix, prterun) | PMIX_RANK | | |
| `pmi` (MPICH, Intel MPI, srun --mpi=pmi2) | PMI_RANK | MPI_LOCALRANKID | PMI_SIZE |
| `mvapich2` | MV2_COMM_WORLD_RANK | MV2_COMM_WORLD_LOCAL_RANK | MV2_COMM_WORLD_SIZE |
| `slurm` (a job step: SLURM_STEP_ID set) | SLURM_PROCID | SLURM_LOCALID | SLURM_NTASKS |
| `lightning` (its launcher's ranks) | LOCAL_RANK on node 0 | LOCAL_RANK | WORLD_SIZE |

- Slurm counts only inside a job step. The batch step of `sbatch` has SLURM_PROCID=0 and no
  step id: a Python process run from the batch script is a plain process, not rank 0.
- A local rank or world size that the winning source does not give is taken from the Slurm
  step when that names the same rank (srun --mpi=pmix sets PMIX_RANK alone).
- Lightning's launcher starts local ranks 1 and up itself, with LOCAL_RANK, NODE_RANK and
  WORLD_SIZE but no RANK. On node 0 its rank is its local rank; on other nodes the rank
  depends on the devices per node, which the environment does not say: the rank is pending,
  to be read from torch.distributed once the process group exists. Local rank 0 is the process
  the user started, which Lightning gives LOCAL_RANK=0 only after its start: a process that
  inherits that is one of its helpers, not a rank.

A malformed value of the winning source is a `SettingsError` naming its variable, as a bad RANK
is; the sources after it are not read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ._values import SettingsError, parse_rank

__all__ = ["LaunchPlace", "launch_place"]

RANK_ACCEPTED = "a non-negative integer below the world size"


@dataclass(frozen=True)
class LaunchPlace:
    """Where this process sits in its job, as its launcher said."""

    rank: int | None = None
    local_rank: int | None = None
    world_size: int | None = None
    source: str | None = None  # the source that named the rank (table above)
    # The environment says this process is a rank but not which (Lightning beyond node 0).
    rank_pending: bool = False


# (source, rank variable, local rank variable, world size variable), in precedence order.
_SOURCES = (
    ("torch", "RANK", "LOCAL_RANK", "WORLD_SIZE"),
    ("openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("pmix", "PMIX_RANK", None, None),
    ("pmi", "PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE"),
    ("mvapich2", "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_SIZE"),
    ("slurm", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"),
)
_SLURM = _SOURCES[-1]


def _number(env: Mapping[str, str], name: str | None) -> int | None:
    if name is None:
        return None
    raw = env.get(name, "")
    try:
        return parse_rank(raw.strip())
    except ValueError as exc:
        raise SettingsError(name, raw, "a non-negative integer", str(exc)) from None


def _in_slurm_step(env: Mapping[str, str]) -> bool:
    return env.get("SLURM_STEP_ID", "").strip() != ""


def launch_place(environ: Mapping[str, str]) -> LaunchPlace:
    """This process's place in its job from the launcher's variables (see the module's text)."""
    for source, rank_name, local_name, world_name in _SOURCES:
        if source == "slurm" and not _in_slurm_step(environ):
            continue
        rank = _number(environ, rank_name)
        if rank is None:
            continue
        local, world = _number(environ, local_name), _number(environ, world_name)
        if (local is None or world is None) and source != "slurm" and _in_slurm_step(environ):
            slurm = _slurm_place(environ)
            if slurm is not None and slurm.rank == rank:
                local = slurm.local_rank if local is None else local
                world = slurm.world_size if world is None else world
        if world is not None and rank >= world:
            raise SettingsError(rank_name, str(rank), RANK_ACCEPTED,
                                f"{world_name or 'the world size'} is {world}, so ranks go "
                                f"from 0 to {world - 1}")
        return LaunchPlace(rank, local, world, source)
    return _lightning_place(environ)


def _slurm_place(environ: Mapping[str, str]) -> LaunchPlace | None:
    _, rank_name, local_name, world_name = _SLURM
    try:
        rank = _number(environ, rank_name)
        return LaunchPlace(rank, _number(environ, local_name), _number(environ, world_name),
                           "slurm") if rank is not None else None
    except SettingsError:
        return None  # only filling gaps: a bad Slurm variable is Slurm's, not the winner's


def _lightning_place(environ: Mapping[str, str]) -> LaunchPlace:
    if not all(environ.get(name, "").strip() for name in ("LOCAL_RANK", "NODE_RANK",
                                                          "WORLD_SIZE")):
        return LaunchPlace()
    local, node = _number(environ, "LOCAL_RANK"), _number(environ, "NODE_RANK")
    world = _number(environ, "WORLD_SIZE")
    if not local:  # local rank 0 is the process the user started (see the module's text)
        return LaunchPlace(local_rank=local, world_size=world)
    if node == 0:
        if world is not None and local >= world:
            raise SettingsError("LOCAL_RANK", str(local), RANK_ACCEPTED,
                                f"WORLD_SIZE is {world} and NODE_RANK is 0, so local ranks "
                                f"go from 0 to {world - 1}")
        return LaunchPlace(local, local, world, "lightning")
    return LaunchPlace(None, local, world, "lightning", rank_pending=True)
