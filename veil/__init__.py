"""veil: a memory and context-management layer for LLM coding agents."""

from veil.hookspecs import hookimpl

__version__ = "0.1.0"
__all__ = ["__version__", "hookimpl"]
