"""Every config key with its default and meaning, written from the config dataclasses: the
index config (`configs/index.yaml`), one reference per registered method
(`configs/reference/<method>.yaml`), the settings table of each method page
(`docs/methods/<method>.md`, graphrag_engine/config/settings_tables.py), and the structured LLM
stages from their registry (`docs/structured-stages.md`). A key's meaning is its field docstring (or the comment on
its line); a section's is its class docstring. A field without either is an error, so a new
key cannot go undocumented; tests/test_config_docs.py checks the files are current.

    .venv/bin/python -m graphrag_engine.config_docs          # rewrite the files
    .venv/bin/python -m graphrag_engine.config_docs --check  # exit 1 when one is out of date
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import sys
import textwrap
from pathlib import Path
from typing import Any

from graphrag_engine.config import IndexConfig
from graphrag_engine.config.field_docs import field_docs, scalar
from graphrag_engine.config.query import QueryConfig
from graphrag_engine.config.ranges import range_of
from graphrag_engine.config.settings_tables import page_with_table, settings_table
from graphrag_engine.methods import METHODS, method_names, query_config
from graphrag_engine.stages import stages_page

REPO = Path(__file__).resolve().parents[1]
WIDTH = 96


def _comment(text: str, indent: str) -> list[str]:
    return [f"{indent}# {line}" for line in textwrap.wrap(text, WIDTH - len(indent) - 2)]


def _summary(cls: type) -> str:
    return " ".join((inspect.getdoc(cls) or "").split("\n\n")[0].split())


def section_lines(obj: Any, indent: str = "") -> list[str]:
    """Commented YAML lines of every field of the dataclass instance `obj`, nested."""
    docs = field_docs(type(obj))
    out: list[str] = []
    for f in dataclasses.fields(obj):
        if f.metadata.get("section"):
            continue  # a method's own section: written under the method's name by the caller
        value = getattr(obj, f.name)
        if not indent:
            out.append("")  # a blank line between top-level keys
        if dataclasses.is_dataclass(value):
            out += _comment(docs.get(f.name) or _summary(type(value)), indent)
            out.append(f"{indent}{f.name}:")
            out += section_lines(value, indent + "  ")
            continue
        if f.name not in docs:
            raise ValueError(
                f"{type(obj).__name__}.{f.name} has no docstring: document it in its class"
            )
        spec = range_of(type(obj), f.name)
        doc = docs[f.name] + (f" Range: {spec}." if spec and spec != "any" else "")
        out += _comment(doc, indent)
        out.append(f"{indent}{f.name}: {scalar(value)}")
    return out


def index_reference() -> str:
    """configs/index.yaml: every index key at its default."""
    head = [
        "# Every key of `graphrag-engine index --config FILE`, at its default, with its meaning.",
        "# Written by `python -m graphrag_engine.config_docs` from graphrag_engine/config/sections.py; copy it and change",
        "# what you need (keys you leave out keep these defaults).",
    ]
    return "\n".join(head + section_lines(IndexConfig())) + "\n"


def method_reference(name: str, cfg: QueryConfig) -> str:
    """configs/reference/NAME.yaml: every key of `cfg`, method NAME's reference query config."""
    spec = METHODS[name]
    head = [
        f"# Every key of `graphrag-engine query INDEX QUESTIONS --method FILE` for `{name}`",
        f"# ({spec.paper}), at its default, with its meaning; models.llm.backend is set to",
        "# transformers (the packaged SmolLM2) so that the file runs as it is. Written by",
        "# `python -m graphrag_engine.config_docs` from the config dataclasses; configs/methods/ holds",
        "# shorter, tuned examples.",
    ]
    body = section_lines(cfg)
    if cfg.options is not None:
        body.append("")
        body += _comment(_summary(type(cfg.options)), "")
        body.append(f"{name}:")
        body += section_lines(cfg.options, "  ")
    return "\n".join(head + body) + "\n"


def reference_query_config(name: str) -> QueryConfig:
    """The defaults of method `name` with the packaged local LLM, as its reference file holds."""
    cfg = query_config(name)
    cfg.models.llm.backend = "transformers"
    return cfg


def references() -> dict[Path, str]:
    """Every reference file's path and text."""
    out = {REPO / "configs" / "index.yaml": index_reference()}
    pages = {}
    for name in method_names():
        cfg = reference_query_config(name)  # the LLM backend it sets leaves the options as they are
        out[REPO / "configs" / "reference" / f"{name}.yaml"] = method_reference(name, cfg)
        page = REPO / "docs" / "methods" / f"{name}.md"
        pages[page] = page_with_table(page, settings_table(cfg.options))
    out[REPO / "docs" / "structured-stages.md"] = stages_page()
    return out | pages


def main(argv: list[str] | None = None) -> int:
    """Write the reference configs, or with --check list the stale ones and exit 1."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 when stale")
    args = ap.parse_args(argv)
    stale = []
    for path, text in references().items():
        if path.exists() and path.read_text() == text:
            continue
        stale.append(path)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    verb = "out of date" if args.check else "written"
    for path in stale:
        print(f"{path.relative_to(REPO)}: {verb}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
