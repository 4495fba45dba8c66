"""Live views of a run's events in outside trackers (TensorBoard, MLflow)."""
