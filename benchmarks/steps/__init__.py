"""The trainers `benchmarks/step_overhead.py` runs: one rank's script per workload."""
