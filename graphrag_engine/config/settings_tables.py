"""The settings table of each method page (`docs/methods/<name>.md`): every key of the method's
config section with the engine's default beside the paper's value, written from the config
dataclasses so that a page cannot drift from the code.

A config class names the paper's values in `PAPER` (field name -> the value as the paper, or
the authors' public code, gives it, with where it says so); a nested section (LEGO's se, pf,
pr) has its own. `python -m graphrag_engine.config_docs` rewrites the tables with the
reference configs, and its `--check` (a unit test) fails on a stale one.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path
from typing import Any

from graphrag_engine.config.field_docs import field_docs, scalar

BEGIN = "<!-- settings: written by `python -m graphrag_engine.config_docs`; do not edit -->"
END = "<!-- end of settings -->"
HEADING = "## Settings"
NOT_GIVEN = "not given"


def setting_rows(options: Any, prefix: str = "") -> list[tuple[str, str, str, str]]:
    """(key, engine default, paper value, meaning) of every field of a method's section,
    nested sections flattened as `section.key`."""
    cls = type(options)
    paper: dict[str, str] = getattr(cls, "PAPER", {})
    names = {f.name for f in dataclasses.fields(options)}
    unknown = set(paper) - names
    if unknown:
        raise ValueError(f"{cls.__name__}.PAPER names no field: {', '.join(sorted(unknown))}")
    docs = field_docs(cls)
    rows = []
    for f in dataclasses.fields(options):
        value = getattr(options, f.name)
        if dataclasses.is_dataclass(value):
            rows += setting_rows(value, f"{prefix}{f.name}.")
            continue
        meaning = docs.get(f.name, "").split(". ")[0].rstrip(".")
        rows.append((f"{prefix}{f.name}", scalar(value), paper.get(f.name, NOT_GIVEN), meaning))
    return rows


def paper_value(paper: str) -> str:
    """The value a PAPER entry opens with ("8,000 (GraphRAG's code)" -> "8000"), lower case."""
    lead = re.split(r"[ (;:]", paper.strip(), maxsplit=1)[0]
    return lead.strip("`,").replace(",", "").lower()


def deviations(options: Any) -> list[tuple[str, str, str]]:
    """(key, engine default, paper value) of every setting whose default is not the value its
    paper gives; each must be stated under the page's `## Deviations and why`."""
    out = []
    for key, default, paper, _ in setting_rows(options):
        if paper == NOT_GIVEN:
            continue
        engine = default.replace(",", "").lower()
        wanted = paper_value(paper)
        same = engine == wanted
        if not same:
            try:
                same = float(engine) == float(wanted)
            except ValueError:
                pass
        if not same:
            out.append((key, default, paper))
    return out


def settings_table(options: Any | None) -> str:
    """The generated block: a Markdown table of the section's settings (or a line saying the
    method has none of its own)."""
    if options is None:
        body = ["This method has no settings of its own; the shared ones are in"]
        body.append("[configuration.md](../configuration.md).")
    else:
        body = [
            "Engine defaults beside the paper's values (`not given`: the paper sets none); "
            "generated from",
            f"`{_source(type(options))}: {type(options).__name__}`.",
            "",
            "| setting | engine default | paper | what it is |",
            "| --- | --- | --- | --- |",
        ]
        body += [
            f"| `{key}` | `{default}` | {paper} | {meaning.replace('|', '/')} |"
            for key, default, paper, meaning in setting_rows(options)
        ]
    return "\n".join([BEGIN, *body, END])


def _source(cls: type) -> str:
    """The repository path of the file that defines `cls`."""
    path = Path(inspect.getsourcefile(cls) or "").resolve()
    return path.relative_to(Path(__file__).resolve().parents[2]).as_posix()


def page_with_table(page: Path, table: str) -> str:
    """The page's text with its settings block replaced, or added as a `## Settings` section
    before `## Deviations and why`."""
    text = page.read_text()
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        return head + table + rest.split(END, 1)[1]
    section = f"{HEADING}\n\n{table}\n\n"
    anchor = "## Deviations and why"
    if anchor in text:
        return text.replace(anchor, section + anchor, 1)
    return text.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n"
