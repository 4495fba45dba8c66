"""Standalone neural network models built from attnas operations."""
