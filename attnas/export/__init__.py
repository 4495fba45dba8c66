"""A run's final model in forms that leave attnas (`attnas export --format ...`)."""
