"""Every structured LLM stage of the engine, from the registry their modules fill when they
are imported (graphrag_engine.models.stages): the index's extraction, units and reports, the
methods' keys, plans, logic forms, verdicts and global search, and eval's judge and RAGAS steps.
The structured-generation bench, the forecasts and docs/structured-stages.md read them here."""

from __future__ import annotations

from graphrag_engine import methods  # noqa: F401  (every method, and with it its stages)
from graphrag_engine.eval import judge, ragas  # noqa: F401
from graphrag_engine.index import communities, extract, tree, units  # noqa: F401
from graphrag_engine.models.stages import STAGES, StructuredStage
from graphrag_engine.retrieve import keywords  # noqa: F401


def structured_stages() -> dict[str, StructuredStage]:
    """Every declared stage by name, in declaration order."""
    return dict(STAGES)


def stage(name: str) -> StructuredStage:
    """One declared stage (KeyError naming the known ones)."""
    if name not in STAGES:
        raise KeyError(f"no structured stage {name!r} (declared: {', '.join(STAGES)})")
    return STAGES[name]


def stages_page() -> str:
    """docs/structured-stages.md: every stage, where it is declared, its budget and schema."""
    lines = [
        "<!-- written by `python -m graphrag_engine.config_docs` from the stage registry -->",
        "# Structured LLM stages\n",
        "Each stage is declared once beside its prompt (`structured_stage(...)` in the module",
        "named below) with its schema and completion budget; constrained decoding, validation,",
        "re-asks and the bench of structured generation (the retired `bench/structured.py`,",
        "docs/measurements.md) all use that declaration. Budgets and schemas are shown at the",
        "default settings.\n",
        "| stage | declared in | what it asks | settings (defaults) | max tokens |",
        "| --- | --- | --- | --- | --- |",
    ]
    for s in STAGES.values():
        settings = ", ".join(f"{k}={v!r}" for k, v in s.settings.items()) or "-"
        lines.append(f"| `{s.name}` | `{s.owner}` | {s.about} | {settings} | {s.max_tokens()} |")
    return "\n".join(lines) + "\n"
