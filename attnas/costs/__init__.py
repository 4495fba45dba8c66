"""Costs of architectures (parameters, FLOPs, latency, memory) and the objectives, constraints and Pareto fronts of cost-aware searches."""
