"""The command line: `graphrag-engine` parses, calls the engine and prints (the one place that
prints, and that sets up how the library's log messages are shown)."""

from graphrag_engine.cli.commands import main
from graphrag_engine.cli.parser import build_parser

__all__ = ["build_parser", "main"]
