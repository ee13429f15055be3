"""Community reports without an LLM: each Leiden community's title, summary and findings are
taken from the corpus itself, so global search and PankRAG's abstract steps run on an
LLM-free index.

    title     <- the community's three most central entities (weighted degree inside it)
    summary   <- its best sentences: those naming the most of its members, central ones first
    findings  <- its strongest inner relations, each with a sentence naming both ends
    rating    <- the community's inner relation weight, scaled to 0-10 within its level

The sentences are the index's knowledge units, streamed once for every community together.
The report is stored in the `reports` table like an LLM report; its text starts with
`Kind: extractive` and the build's stats say how many were written. An LLM report, when
`communities.reports` asks for one, replaces it.
"""

from __future__ import annotations

import heapq
import itertools
from collections import defaultdict
from collections.abc import Iterable

SUMMARY_SENTENCES = 3
"""Sentences of a report's summary."""
FINDINGS = 5
"""Inner relations a report lists."""
SENTENCE_CHARS = 400
"""A quoted sentence is cut to this many characters."""
KIND_LINE = "Kind: extractive (sentences from the corpus; no LLM)"


def _inner_relations(communities: list[dict], relations: list[dict]) -> list[list[dict]]:
    """Per community, the relations with both ends inside it (one pass over the relations:
    an entity belongs to one community per level)."""
    of_entity: dict[str, set[int]] = defaultdict(set)
    for i, c in enumerate(communities):
        for e in c["entity_ids"]:
            of_entity[e].add(i)
    inner: list[list[dict]] = [[] for _ in communities]
    for r in relations:
        for i in of_entity.get(r["src"], set()) & of_entity.get(r["dst"], set()):
            inner[i].append(r)
    return inner


def extractive_reports(
    communities: list[dict],
    entities: list[dict],
    relations: list[dict],
    unit_entities: Iterable[tuple[str, list[str]]],
) -> list[dict]:
    """Report rows (community_id, title, summary, rating, full_text) for every community, from
    `unit_entities`: each sentence with the entity ids it names, in corpus order."""
    name = {e["entity_id"]: e["name"] for e in entities}
    of_entity: dict[str, list[int]] = defaultdict(list)
    for i, c in enumerate(communities):
        for e in c["entity_ids"]:
            of_entity[e].append(i)
    degree: list[dict[str, float]] = []  # each member's weighted degree inside its community
    top_relations: list[list[dict]] = []
    wanted: set[tuple[str, str]] = set()  # the pairs whose sentence a finding quotes
    for c, inner in zip(communities, _inner_relations(communities, relations), strict=True):
        deg = dict.fromkeys(c["entity_ids"], 0.0)
        for r in inner:
            deg[r["src"]] += float(r["weight"])
            deg[r["dst"]] += float(r["weight"])
        degree.append(deg)
        inner.sort(key=lambda r: (-float(r["weight"]), name[r["src"]], name[r["dst"]]))
        top_relations.append(inner[:FINDINGS])
        wanted.update(tuple(sorted((r["src"], r["dst"]))) for r in inner[:FINDINGS])
    best: list[list[tuple]] = [[] for _ in communities]  # min-heaps of (score, -order, text)
    pair_sentence: dict[tuple[str, str], str] = {}
    for order, (text, ents) in enumerate(unit_entities):
        ents = sorted(set(ents))
        hit: dict[int, list[str]] = defaultdict(list)
        for e in ents:
            for i in of_entity.get(e, ()):
                hit[i].append(e)
        for i, named in hit.items():
            score = (len(named), sum(degree[i][e] for e in named))
            item = (score, -order, text)
            if len(best[i]) < SUMMARY_SENTENCES:
                heapq.heappush(best[i], item)
            elif item > best[i][0]:
                heapq.heapreplace(best[i], item)
        if len(ents) > 1:
            for pair in itertools.combinations(ents, 2):
                if pair in wanted and pair not in pair_sentence:
                    pair_sentence[pair] = text
    levels: dict[int, float] = defaultdict(float)
    weight = [sum(degree[i].values()) / 2 for i in range(len(communities))]
    for i, c in enumerate(communities):
        levels[c["level"]] = max(levels[c["level"]], weight[i])
    rows = []
    for i, c in enumerate(communities):
        central = sorted(c["entity_ids"], key=lambda e: (-degree[i][e], name[e]))
        title = _title([name[e] for e in central[:3]], len(central))
        sentences = [_cut(t) for _, _, t in sorted(best[i], key=lambda x: -x[1])]  # corpus order
        summary = " ".join(sentences) or f"{title}: no sentence names these entities."
        findings = []
        for r in top_relations[i]:
            line = f"{name[r['src']]} and {name[r['dst']]} (weight {float(r['weight']):g})"
            quote = pair_sentence.get(tuple(sorted((r["src"], r["dst"]))))
            findings.append(f"{line}: {_cut(quote)}" if quote else line)
        top = levels[c["level"]]
        rating = round(10.0 * weight[i] / top, 2) if top > 0 else 0.0
        text = [KIND_LINE, f"Members: {', '.join(name[e] for e in central[:20])}"]
        text += [f"Summary: {summary}"]
        if findings:
            text += ["Findings:", *(f"- {f}" for f in findings)]
        rows.append(
            {
                "community_id": c["community_id"],
                "title": title,
                "summary": summary,
                "rating": rating,
                "full_text": "\n".join(text),
            }
        )
    return rows


def _title(names: list[str], size: int) -> str:
    """'A, B and C' (+ 'and N more')."""
    if not names:
        return "empty community"
    head = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    return head if size <= len(names) else f"{head} (+{size - len(names)} more)"


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SENTENCE_CHARS else text[: SENTENCE_CHARS - 3].rstrip() + "..."
