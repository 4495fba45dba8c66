"""attnas: neural architecture search for attention."""

__version__ = "0.1.0"
