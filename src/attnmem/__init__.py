"""attnmem: config-driven experiments with attention and external-memory models."""

__version__ = "0.1.0"
