"""The table of every setting yeto-otel reads: name, default, what it accepts, what it does and
its parser. Pure data: `yeto_otel.settings` reads the environment against it, and
`docs/settings.md` is generated from it, so a setting cannot exist without being documented."""

from __future__ import annotations

from ._values import (
    Setting, ANCHOR_DTYPES, HOST_ALLOCATOR_ACCEPTED, IDENTITY_OWNER, RANK_LIMIT,
    parse_allocator, parse_allocator_timeout, parse_anchor_dtype, parse_anchor_readahead,
    parse_directory, parse_exit_flush_timeout, parse_identity_owner, parse_job_id,
    parse_lock_dir, parse_node_metrics, parse_on_off, parse_positive_rank, parse_rank,
    parse_smaps_budget, parse_switch,
)

__all__ = ["SETTINGS"]


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "YETO_OTEL_HOST_ALLOCATOR",
        "auto",
        HOST_ALLOCATOR_ACCEPTED,
        "Where the accelerator host (pinned) allocator's counters come from. `auto` uses CUDA "
        "when torch is imported and CUDA is initialised, else torch_npu when it is imported, else "
        "nothing; it never imports torch itself. `module:function` names a callable returning "
        "the flat stats dict (other accelerators, tests).",
        parse_allocator,
    ),
    Setting(
        "YETO_OTEL_ALLOCATOR_TIMEOUT",
        "100",
        "a whole number of milliseconds, 1 to 60000",
        "How long one query of the host allocator may take. A slower one is abandoned for that "
        "collection (the allocator's fields are left out and the census error count of source "
        "`allocator` goes up), so a stuck allocator never holds up a step or the exit; "
        "no new query starts while an abandoned one still runs. A healthy query takes "
        "microseconds.",
        parse_allocator_timeout,
    ),
    Setting(
        "YETO_OTEL_NODE_METRICS",
        "auto",
        "`auto`, `on`, `off`",
        "Whether this process observes the node-wide `yeto.node.*` metrics. `auto`: one "
        "reporting process (a rank or a plain process) per host at a time, the one holding the "
        "host's node lock in `YETO_OTEL_LOCK_DIR`, so 8 ranks do not report node memory 8 "
        "times; when it exits (even killed), another takes over at its next collection. If the "
        "lock cannot be used at all, the process whose `LOCAL_RANK` is 0 (or unset) reports. "
        "`on`: this process always does (no election). `off`: never.",
        parse_node_metrics,
    ),
    Setting(
        "YETO_OTEL_LOCK_DIR",
        "/dev/shm",
        "an absolute directory path",
        "Where the lock files live that elect one process at a time for a shared duty (the "
        "node's metrics, a memory cgroup's census). Processes of one user that name the same "
        "directory share the elections: the default /dev/shm is shared by the processes of a "
        "host and by the containers of a pod, and is writable even when the root filesystem or "
        "/tmp is read-only. The files are kept in `yeto-otel-<uid>` inside it (the effective "
        "uid), made mode 0700; it must be a directory of that user with no group or other "
        "permission, and each lock file a regular file of that user, so elections are per "
        "user: another user's job on the host elects its own reporter and cannot plant or hold "
        "our locks. A lock that cannot be opened, or anything else found in their place (a "
        "FIFO, a symbolic link, another user's file or directory), means \"not held\", counted "
        "among the census errors (source `duty`) and logged once; nothing found is changed.",
        parse_lock_dir,
    ),
    Setting(
        "YETO_OTEL_SEMCONV_METRICS",
        "on",
        "`on`, `off`",
        "`on`: every process that reports its census also exports the OpenTelemetry semantic "
        "conventions' process memory usage (VmRSS) and virtual (VmSize) metrics, from the same "
        "read as the `yeto.process.memory.*` metrics, so stock dashboards and the collector's "
        "process scraper line up with the census (docs/metrics.md). `off`: only the `yeto.*` "
        "names (two series fewer per process).",
        parse_on_off,
    ),
    Setting(
        "YETO_OTEL_SMAPS_BUDGET", "0.1", "percent of one core, 0 to 100, or `always`",
        "How much of one core reading /proc/self/smaps_rollup (Private_Dirty) may take. Its cost "
        "grows with resident memory, so it is read again only once enough time has passed (a "
        "read of c seconds waits 100 c / budget); in between the last value is exported, with "
        "its age. The step log never does the read itself: one that falls due at a step runs on "
        "a background thread. `0`: never read; `always`: read on every collection (small "
        "processes).", parse_smaps_budget,
    ),
    Setting(
        "YETO_OTEL_DATALOADER_WORKERS",
        "on",
        "`on`, `off`",
        "`on`: each DataLoader worker of a rank reports its own process census (and its "
        "`torch.load` spans) as `<host>/rank-<RANK>/worker-<K>`, `K` the worker id, reused "
        "across epochs. `off`: workers are silent, like every other child process.",
        parse_on_off,
    ),
    Setting(
        "YETO_OTEL_LOCAL_DIR",
        "yeto-telemetry",
        "a directory path (created if missing)",
        "Where telemetry goes when no exporter endpoint is configured (no `OTEL_EXPORTER_OTLP_*"
        "ENDPOINT`, no `OTEL_*_EXPORTER`): OTLP JSON lines files, one per signal and process, "
        "that `yeto-otel report` reads. Relative paths are from the working directory.",
        parse_directory,
    ),
    Setting(
        "YETO_OTEL_EXIT_FLUSH_TIMEOUT",
        "3000",
        "a whole number of milliseconds, 0 to 30000",
        "How long a stopping rank (a normal exit; SIGTERM and SIGINT too with "
        "`YETO_OTEL_EXIT_FLUSH_ON_SIGNALS=on`) may wait, in all, to export its last metric "
        "collection, its ended spans and its log records. What is not exported by then (an "
        "unreachable collector) is dropped and logged once. The default fits well inside the "
        "30 s that torchrun, Kubernetes and Slurm give a rank between SIGTERM and SIGKILL; a "
        "local file or an agent on the host takes milliseconds. A DataLoader worker's exit "
        "waits at most 30 ms (or this, if shorter) for a collector, so a slow or absent "
        "collector never holds up the end of an epoch; one that writes only local files "
        "waits as long as its rank. `0`: do not wait.",
        parse_exit_flush_timeout,
    ),
    Setting(
        "YETO_OTEL_EXIT_FLUSH_ON_SIGNALS",
        "off",
        "`off`, `on`",
        "`off`: yeto-otel installs no signal handler; a rank that dies of SIGTERM or SIGINT "
        "loses what it had not exported yet (at most one metric export interval, "
        "`OTEL_METRIC_EXPORT_INTERVAL`, and the spans ended within it), and one that exits "
        "normally (a trainer's own handler, `sys.exit`) exports it at exit. `on`: the rank also "
        "exports on SIGTERM and SIGINT, then does what the signal did before (docs/faults.md). "
        "The price: Python runs a handler only between bytecodes, so a rank inside a long C "
        "call (a hung collective, `cuda.synchronize()`) dies of SIGTERM only when that call "
        "returns, and the launcher may wait out its grace period. Never active when "
        "`OTEL_SDK_DISABLED=true`.",
        parse_on_off,
    ),
    Setting(
        "YETO_OTEL_WORKER_LOAD_SPANS",
        "off",
        "`off`, `on`",
        "`off`: a DataLoader worker's `torch.load`, safetensors and DCP loads get no span (a "
        "dataset that loads one file per sample would send a span per sample); the worker's "
        "census still reports. `on`: every such load in a worker gets its span, under the "
        "worker's identity. Loads in the rank itself are traced either way.",
        parse_on_off,
    ),
    Setting(
        "YETO_OTEL_EXIT_RECORDS",
        "on",
        "`on`, `off`",
        "`on`: every reporting process keeps an exit record in the lock directory (one page of "
        "memory in `<YETO_OTEL_LOCK_DIR>/yeto-otel-<uid>/`, updated without a system call), so "
        "that a rank that dies (OOM kill, SIGKILL) is reported once with its cause, phase, step "
        "and memory (docs/faults.md, \"When a rank dies\"). `off`: no record, no report.",
        parse_on_off,
    ),
    Setting(
        "YETO_DILOCO_HOST_MEM_CENSUS",
        "0",
        "`0` or `1`",
        "`1`: `add_census_to_step_log` adds the host-memory census to the step log record on "
        "sync rank 0. Unset or `0`: the record is left exactly as it was.",
        parse_switch,
    ),
    Setting(
        "YETO_DILOCO_ANCHOR_DTYPE",
        None,
        ", ".join(f"`{name}`" for name in ANCHOR_DTYPES),
        "dtype `save_resume_anchors` stores anchors in when its `dtype` argument is not given. "
        "Unset: the tensors' own dtype (the broadcast dtype, FP32 for an int4/int8 push "
        "session). `bfloat16` halves resident anchors but rounds `local - anchor` and the "
        "resume's `global_new + (local - anchor_old)`: opt in knowingly.",
        parse_anchor_dtype,
    ),
    Setting(
        "YETO_DILOCO_RESUME_ANCHOR_MMAP",
        "1",
        "`0` or `1`",
        "`1`: `load_resume_anchors` maps the anchor file (`torch.load(mmap=True)`), so shards the "
        "resume never reads stay out of memory. `0`: read the whole file eagerly, as before.",
        parse_switch,
    ),
    Setting(
        "YETO_DILOCO_RESUME_ANCHOR_READAHEAD",
        "anchor",
        "`anchor`, `kernel`, `off`",
        "How a mapped resume reads the file on a cold page cache. `anchor`: the first time the "
        "catch-up takes an anchor (`anchors.tensors[name]` or `.get(name)`), its pages are "
        "asked for at once (`madvise(MADV_WILLNEED)` over that anchor): one read per anchor, "
        "only the anchors taken. `kernel`: the kernel's read-around at each page fault (reads "
        "and maps up to ~10% beyond the bytes read here, several reads per anchor). `off`: "
        "`madvise(MADV_RANDOM)`, only the faulting pages (exact, slowest). Measured side by "
        "side in docs/performance.md. Iterating `anchors.tensors` (`items()`, `dict(...)`) "
        "prefetches nothing.",
        parse_anchor_readahead,
    ),
    Setting(
        "RANK",
        None,
        f"an integer from 0 to {RANK_LIMIT - 1}, below WORLD_SIZE when that is set",
        "Global rank set by the launcher (torchrun). Becomes the rank's resource attribute "
        "and part of `service.instance.id`. Without it, the rank is read from the variables of "
        "other launchers (OpenMPI, PMIx, PMI, MVAPICH2, a Slurm job step, Lightning's own "
        "launcher), in the order docs/processes.md gives.",
        parse_rank,
    ),
    Setting(
        "LOCAL_RANK",
        None,
        f"an integer from 0 to {RANK_LIMIT}",
        "Rank within the host, set by the launcher. Becomes `yeto.local_rank`; decides which "
        "process reports node metrics under `YETO_OTEL_NODE_METRICS=auto` only when the node "
        "lock cannot be used.",
        parse_rank,
    ),
    Setting(
        "WORLD_SIZE",
        None,
        f"an integer from 1 to {RANK_LIMIT}",
        "Number of ranks, set by the launcher. Becomes `yeto.world_size`.",
        parse_positive_rank,
    ),
    Setting(
        "YETO_OTEL_JOB_ID",
        None,
        "1 to 128 letters, digits, `.`, `_` or `-`",
        "The job this process belongs to, where its launcher does not say (Kubernetes: the "
        "job's name through the downward API). A rank reports as `<job>/rank-<RANK>`, so two "
        "jobs on one host never share a series and a restarted job keeps its ranks' series. "
        "Unset: the Slurm job (`slurm-<SLURM_JOB_ID>`), else a torchrun run id chosen with "
        "`--rdzv-id` (`torchelastic-<id>`), else none (`<host>/rank-<RANK>`); docs/processes.md.",
        parse_job_id,
    ),
    Setting(
        IDENTITY_OWNER,
        None,
        "set by yeto-otel",
        "Not a setting for people: the process that reports under an identity (a rank) writes "
        "`<RANK>:<pid>` here (`-:<pid>` without a rank, `local-<LOCAL_RANK>:<pid>` while its "
        "rank is pending), so the children that inherit its environment (spawned DataLoader "
        "workers, multiprocessing helpers) know they are not it and stay silent.",
        parse_identity_owner,
    ),
)
