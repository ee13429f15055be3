"""`graphrag-engine import`: another system's index as an engine index, one reader per system
(msgraphrag.py: Microsoft GraphRAG output folders; hipporag.py: HippoRAG's OpenIE JSON with its
corpus; lightrag.py: LightRAG and nano-graphrag working directories) and one writer for all
(imported.py)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from graphrag_engine.config import IndexConfig
from graphrag_engine.errors import BadInputError
from graphrag_engine.importers.hipporag import is_hipporag_openie, read_hipporag
from graphrag_engine.importers.imported import ImportedGraph, write_imported
from graphrag_engine.importers.lightrag import is_lightrag_dir, read_lightrag
from graphrag_engine.importers.msgraphrag import is_graphrag_output, read_graphrag

SYSTEMS = ("graphrag", "hipporag", "lightrag")
"""The systems `import` reads (`--from`), recognised from the source when not given."""


def detect_system(source: Path) -> str:
    """The system that wrote `source`, from its files."""
    if source.is_dir() and is_graphrag_output(source):
        return "graphrag"
    if is_lightrag_dir(source):
        return "lightrag"
    if is_hipporag_openie(source):
        return "hipporag"
    raise BadInputError(
        f"import: {source} is not an index this engine reads: give a Microsoft GraphRAG output "
        "folder, a LightRAG or nano-graphrag working dir, or HippoRAG's OpenIE JSON with --corpus"
    )


def read_source(
    source: str | Path,
    system: str | None = None,
    corpus: Sequence[str | Path] = (),
    config: IndexConfig | None = None,
) -> ImportedGraph:
    """The index in `source` as engine rows; `system` is recognised when not given."""
    source = Path(source)
    if not source.exists():
        raise BadInputError(f"import: {source} does not exist; give what the other system wrote")
    system = system or detect_system(source)
    if system == "graphrag":
        return read_graphrag(source)
    if system == "lightrag":
        return read_lightrag(source)
    if system == "hipporag":
        return read_hipporag(source, [Path(p) for p in corpus], config or IndexConfig())
    raise BadInputError(f"import --from {system}: known systems are {', '.join(SYSTEMS)}")


def import_index(
    source: str | Path,
    out: str | Path,
    config: IndexConfig | None = None,
    system: str | None = None,
    corpus: Sequence[str | Path] = (),
) -> dict[str, Any]:
    """Import the index in `source` (with the `corpus` it was run on, for HippoRAG) into the
    engine index `out`; the committed manifest (with `unchanged: True` when `out` already
    held this import and nothing was written)."""
    config = config or IndexConfig()
    started = time.perf_counter()
    graph = read_source(source, system, corpus, config)
    return write_imported(graph, out, config, time.perf_counter() - started)
