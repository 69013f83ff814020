"""`yeto-otel demo`: a realistic island restart in one command."""

from ._command import add_arguments, parse_size, run

__all__ = ["add_arguments", "parse_size", "run"]
