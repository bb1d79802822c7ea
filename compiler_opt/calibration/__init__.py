"""Whole-graph calibration of the simulator against real runs on this CPU (issue 9, item 5).

It lives above `cost_model` because it builds suite workloads (`compiler_opt.workloads`) and
draws fusion configurations with the `fuse` / `fuse-by-priority` passes; the measuring pieces it
uses (`GroupExecutor`, the `Profiler`, host topologies) stay in `cost_model.profiling`.
"""
