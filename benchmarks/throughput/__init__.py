"""The agent throughput benchmark (benchmarks/agent_throughput.py), by what each part does:

common     constants, the error and the local stack (collector/stack.py) everyone shares
loadgen    the load-generator process (one simulated host) and the orchestrator's handle on it
rank       a simulated rank: its SDK providers, the census, counting exporters, restarts
shape      the restart span shape, captured from one real restart in a child process
machine    /proc readings of the measured processes and the machine; facts for the report
telemetry  the agent's own metrics: scrape, totals, drop counters
window     one measurement window (CPU, memory, the agent's counters at both ends)
phase      a fresh stack with its load generators: start, stop, drain
checks     zero drops, Prometheus samples, Jaeger spans and traces after a phase
phases     the idle, ranks and headroom phases
markdown   the report tables
"""
