"""Standalone models and model pieces: backbones, encoders, decoders and networks built by the spaces."""
