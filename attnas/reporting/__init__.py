"""What people read about runs: `report.md` and its sections, supernet rankings, progress bars and rounded numbers."""
