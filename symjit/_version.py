"""The one place that states symjit's version (pyproject.toml reads it; codegen stamps it into
cache keys, generated sources and AOT manifests). Imports nothing, so every layer may read it."""
__version__ = "0.1.0"
