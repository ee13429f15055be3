"""`graphrag-engine import`: another system's index as an engine index, one reader per system
(msgraphrag.py: Microsoft GraphRAG output folders) and one writer for all (imported.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from graphrag_engine.config import IndexConfig
from graphrag_engine.errors import BadInputError
from graphrag_engine.importers.imported import ImportedGraph, write_imported
from graphrag_engine.importers.msgraphrag import is_graphrag_output, read_graphrag

SYSTEMS = ("graphrag",)
"""The systems `import` reads (`--from`), auto-detected when not given."""


def read_source(source: str | Path, system: str | None = None) -> ImportedGraph:
    """The index in `source` as engine rows; `system` is detected when not given."""
    source = Path(source)
    if not source.exists():
        raise BadInputError(
            f"import: {source} does not exist; give the folder another system wrote"
        )
    if system is None:
        if source.is_dir() and is_graphrag_output(source):
            system = "graphrag"
        else:
            raise BadInputError(
                f"import: {source} is not an index this engine reads ({', '.join(SYSTEMS)}); "
                "give a Microsoft GraphRAG output folder"
            )
    if system == "graphrag":
        return read_graphrag(source)
    raise BadInputError(f"import --from {system}: known systems are {', '.join(SYSTEMS)}")


def import_index(
    source: str | Path,
    out: str | Path,
    config: IndexConfig | None = None,
    system: str | None = None,
) -> dict[str, Any]:
    """Import the index in `source` into the engine index `out`; the committed manifest (with
    `unchanged: True` when `out` already held this import and nothing was written)."""
    return write_imported(read_source(source, system), out, config or IndexConfig())
