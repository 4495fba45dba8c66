"""Training a found architecture: the training loop (`train`) and retraining a finished run with several seeds (`retraining`)."""
