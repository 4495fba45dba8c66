"""Speed benchmarks: each times one step, epoch or operation of attnas (``python -m benchmarks.speed.<name>``)."""
