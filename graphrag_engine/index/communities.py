"""Hierarchical Leiden communities of the entity graph (graspologic-native) and LLM community
reports, as GraphRAG and PankRAG use them.

Community ids are content hashes of (level, members), so a community whose members did not
change keeps its id, and its report prompt (built from its members' current names,
descriptions and relations) hits the response cache: an incremental add re-summarises only
the communities it touched.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from graphrag_engine.errors import ConfigError
from graphrag_engine.index.build import Build, Stage
from graphrag_engine.index.extractive_reports import extractive_reports
from graphrag_engine.models import LLM, GenParams
from graphrag_engine.models.stages import structured_stage
from graphrag_engine.models.structured import Schema, generate_structured

REPORT_PROMPT = """You write a short report about a community of related entities from a knowledge graph.
Use only the information below: a title of a few words, a summary of two or three sentences,
an importance rating from 0 to 10 and a few short findings. Reply with one JSON object of this
form and nothing else:
{format}

Entities:
{entities}

Relationships:
{relations}

Report (JSON):"""


def community_id(level: int, members: list[str]) -> str:
    """Content-hash id of a community."""
    return hashlib.sha1(f"{level}\x00{','.join(sorted(members))}".encode()).hexdigest()[:16]


def detect_communities(
    relations: list[dict], max_cluster_size: int = 10, seed: int = 42
) -> list[dict]:
    """Rows of the `communities` table from the entity relations (one hierarchical Leiden run)."""
    try:
        from graspologic_native import hierarchical_leiden
    except ImportError:
        raise ConfigError(
            "communities need graspologic-native: pip install graspologic-native"
        ) from None
    edges = [(r["src"], r["dst"], float(r["weight"])) for r in relations if r["src"] != r["dst"]]
    if not edges:
        return []
    clusters = hierarchical_leiden(edges, max_cluster_size=max_cluster_size, seed=seed)
    members: dict[tuple[int, int], list[str]] = defaultdict(list)
    parent_of: dict[tuple[int, int], int | None] = {}
    for c in clusters:
        members[(c.level, c.cluster)].append(c.node)
        parent_of[(c.level, c.cluster)] = c.parent_cluster
    ids = {key: community_id(key[0], nodes) for key, nodes in members.items()}
    rows = []
    for (level, cluster), nodes in sorted(members.items()):
        parent = parent_of[(level, cluster)]
        parent_id = ids.get((level - 1, parent)) if parent is not None else None
        rows.append(
            {
                "community_id": ids[(level, cluster)],
                "level": level,
                "parent_id": parent_id,
                "entity_ids": sorted(nodes),
            }
        )
    return rows


REPORT = Schema(
    {
        "type": "object",
        "properties": {
            "title": {"type": "string", "minLength": 1, "maxLength": 80},
            "summary": {"type": "string", "minLength": 1, "maxLength": 600},
            "rating": {"type": "integer", "minimum": 0, "maximum": 10},
            "findings": {
                "type": "array",
                "items": {"type": "string", "minLength": 1, "maxLength": 200},
                "maxItems": 5,
            },
        },
        "required": ["title", "summary", "rating", "findings"],
        "additionalProperties": False,
    }
)
"""A community report: title, summary, 0-10 rating, up to five findings (about 450 tokens)."""


REPORT_STAGE = structured_stage(
    "community_report",
    about="a community's report (title, summary, findings, rating) from its entities and relations",
    prompt=lambda entities, relations: REPORT_PROMPT.format(
        format=REPORT.describe(), entities=entities, relations=relations
    ),
    schema=REPORT,
    max_tokens=lambda budget: budget,
    budget=512,
)


BRIEF_CHARS = 200
"""Longest description a report prompt quotes (an LLM-free index's are whole sentences; an LLM
extraction's are at most 100 characters), so a community's prompt stays near its old length."""


def _brief(description: str) -> str:
    """A description as a report prompt quotes it: whole when it fits in BRIEF_CHARS (so short
    and LLM descriptions quote as they always did), else its first line, cut at BRIEF_CHARS on
    a word boundary."""
    if len(description) <= BRIEF_CHARS:
        return description
    first = description.split("\n")[0]
    return first if len(first) <= BRIEF_CHARS else first[:BRIEF_CHARS].rsplit(" ", 1)[0] + " ..."


def report_prompts(
    communities: list[dict], entities: list[dict], relations: list[dict], max_items: int = 40
) -> list[str]:
    """One report prompt per community: its entities and its strongest inner relations."""
    ent = {e["entity_id"]: e for e in entities}
    by_member: dict[str, list[dict]] = defaultdict(list)
    for r in relations:
        by_member[r["src"]].append(r)
    prompts = []
    for c in communities:
        members = set(c["entity_ids"])
        ent_lines = [
            f"- {ent[e]['name']} ({ent[e]['type']})"
            + (f": {_brief(ent[e]['description'])}" if ent[e]["description"] else "")
            for e in c["entity_ids"][:max_items]
        ]
        rels = sorted(
            (r for e in c["entity_ids"] for r in by_member[e] if r["dst"] in members),
            key=lambda r: -r["weight"],
        )[:max_items]
        rel_lines = [
            f"- {ent[r['src']]['name']} -- {ent[r['dst']]['name']}"
            + (f": {_brief(r['description'])}" if r["description"] else "")
            for r in rels
        ]
        prompts.append(
            REPORT_STAGE.prompt("\n".join(ent_lines), "\n".join(rel_lines) or "- (none)")
        )
    return prompts


def community_reports(
    llm: LLM,
    communities: list[dict],
    entities: list[dict],
    relations: list[dict],
    max_tokens: int = 512,
    retries: int = 2,
    max_items: int = 40,
) -> tuple[list[dict], int]:
    """Report rows for every community in one batched call; returns (rows, parse failures)."""
    prompts = report_prompts(communities, entities, relations, max_items)
    run = generate_structured(
        llm,
        prompts,
        REPORT,
        GenParams(max_tokens=max_tokens),
        stage="community_reports",
        retries=retries,
    )
    rows = []
    for c, res in zip(communities, run.results, strict=True):
        if not res.ok:
            continue  # recorded as a failure; no report is invented
        rating = res.value["rating"]
        rows.append(
            {
                "community_id": c["community_id"],
                "title": res.value["title"],
                "summary": res.value["summary"],
                "rating": float(rating),
                "full_text": res.raw,
            }
        )
    return rows, run.failures


def _communities(b: Build) -> dict[str, Any]:
    """Hierarchical Leiden communities, and their LLM reports when asked (else extractive
    reports, unless those are turned off too); a community whose LLM report failed to parse
    gets its extractive report, so global search still covers the whole graph."""
    c = b.config.communities
    rows = detect_communities(b.relations, c.max_cluster_size, c.seed)
    b.writer.write_table("communities", rows)
    values: dict[str, Any] = {"items": len(rows), "levels": len({r["level"] for r in rows})}
    if not c.reports and c.extractive_reports:
        reports = extractive_reports(rows, b.entities, b.relations, _unit_entities(b))
        b.writer.write_table("reports", reports)
        values.update(reports=len(reports), reports_kind="extractive")
    if c.reports:
        reports, failures = community_reports(
            b.stage_llm(),
            rows,
            b.entities,
            b.relations,
            c.report_max_tokens,
            b.config.models.llm.parse_retries,
        )
        values.update(reports_kind="llm", parse_failures=failures)
        have = {r["community_id"] for r in reports}
        missing = [r for r in rows if r["community_id"] not in have]
        if missing and c.extractive_reports:  # a failed LLM report leaves no hole
            reports += extractive_reports(missing, b.entities, b.relations, _unit_entities(b))
            position = {r["community_id"]: i for i, r in enumerate(rows)}
            reports.sort(key=lambda r: position[r["community_id"]])
            values["extractive_for_failures"] = len(missing)
        b.writer.write_table("reports", reports)
        values["reports"] = len(reports)
    return values


def _unit_entities(b: Build) -> Iterator[tuple[str, list[str]]]:
    """Every knowledge unit's text with the entity ids it names, in table order."""
    named: dict[str, list[str]] = {}
    if b.unit_entity is not None:
        for unit, entity in zip(*(c.to_pylist() for c in b.unit_entity.columns), strict=True):
            named.setdefault(unit, []).append(entity)
    ids = iter(b.unit_ids.column("unit_id").to_pylist()) if b.unit_ids is not None else iter(())
    for texts in b.unit_texts():
        for text, unit in zip(texts, ids, strict=False):
            yield text, named.get(unit, [])


BUILD_COMMUNITIES = Stage(
    "communities",
    ("relations",),
    ("communities", "reports"),
    _communities,
    enabled=lambda cfg: cfg.communities.enabled,
    uses_llm=True,
)
