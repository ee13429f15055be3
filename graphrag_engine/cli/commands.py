"""Command line: demo | index | import | info | query | eval | export | bench (thin: parse, call, print).

Bad input prints one line on stderr and exits 2; an internal failure exits 1; a query run that
finished with questions whose answer prompt failed after every retry exits 3.
"""

from __future__ import annotations

from collections.abc import Sequence

from graphrag_engine.cli.exits import run_command
from graphrag_engine.cli.index_commands import (
    cmd_export,
    cmd_import,
    cmd_index,
    cmd_info,
    cmd_reindex,
)
from graphrag_engine.cli.logs import show_library_messages
from graphrag_engine.cli.parser import build_parser
from graphrag_engine.cli.query_commands import (
    cmd_ask,
    cmd_bench_hint,
    cmd_compare,
    cmd_demo,
    cmd_eval,
    cmd_generate,
    cmd_methods,
    cmd_query,
)

COMMANDS = {
    "demo": cmd_demo,
    "index": cmd_index,
    "reindex": cmd_reindex,
    "info": cmd_info,
    "generate": cmd_generate,
    "query": cmd_query,
    "ask": cmd_ask,
    "export": cmd_export,
    "import": cmd_import,
    "methods": cmd_methods,
    "eval": cmd_eval,
    "compare": cmd_compare,
    "bench_hint": cmd_bench_hint,
}
"""Each parser command's function (graphrag_engine/cli/parser.py names them)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    show_library_messages()
    return run_command(COMMANDS[args.command], args)
