"""Reusable network pieces that spaces assemble (domain adapters: stems, heads, baselines)."""
