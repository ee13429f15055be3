"""LLM triple extraction (the entity/relation prompt family of LightRAG and ReGraphRAG), with
gleaning rounds and ROGRAG's loop NER, every round one batched structured call over all
pending chunks.

Each round's answer is one JSON object (the `triple_schema` of the configured entity types,
constrained where the backend can):
    {"entities": [{"name", "type", "description"}],
     "relationships": [{"source", "target", "description", "keywords", "strength"}],
     "content_keywords": [...]}
An answer that does not validate is re-asked, then counted as a failed round; nothing of it is
kept. Loop NER: `trial` asks the model whether entities were missed and continues only on yes;
`base` continues first and then asks; both stop after `max_rounds` continuations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from graphrag_engine.config import ExtractionConfig
from graphrag_engine.index.build import Build, Stage
from graphrag_engine.models import LLM, GenParams
from graphrag_engine.models.stages import structured_stage
from graphrag_engine.models.structured import Schema, generate_structured, json_object

EXTRACT_PROMPT = """Task: read the text and list its entities and the relationships between them.
Entity types: {types}.

For every entity give its name, its type and a one-sentence description from the text; for
every pair of related entities give both names, how they are related, a few keywords and a
strength from 1 to 10; then the main keywords of the text. Use only facts stated in the text.
Reply with one JSON object of this form and nothing else:
{format}

Text:
{text}

JSON:"""

CONTINUE_PROMPT = """Some entities or relationships were missed. Reply with a JSON object of the
same form holding only the missing ones (empty lists when nothing was missed)."""
ASK_PROMPT = """Were any entities of the listed types still missed? Reply with one JSON object
of this form and nothing else: {format}"""

_NAME = {"type": "string", "minLength": 1, "maxLength": 60}
DESCRIPTION_MAX_CHARS = 100
"""Longest description the extraction schema allows (entities and relations)."""
SUMMARY_MAX_TOKENS = 256
"""Completion budget of one description summary."""
_TEXT = {"type": "string", "maxLength": DESCRIPTION_MAX_CHARS}


def triple_schema(entity_types: list[str] | tuple[str, ...]) -> Schema[dict]:
    """The extraction answer for these entity types (built once per type set); lists bounded so
    that a constrained answer fits about 800 tokens (8 entities, 8 relationships, 4 keywords)."""
    return _triple_schema(tuple(sorted({t.upper() for t in entity_types} | {"OTHER"})))


@lru_cache(maxsize=16)
def _triple_schema(types: tuple[str, ...]) -> Schema[dict]:
    entity = json_object({"name": _NAME, "type": {"enum": list(types)}, "description": _TEXT})
    relation = json_object(
        {
            "source": _NAME,
            "target": _NAME,
            "description": _TEXT,
            "keywords": {"type": "string", "maxLength": 40},
            "strength": {"type": "integer", "minimum": 1, "maximum": 10},
        }
    )
    keys = {"type": "string", "minLength": 1, "maxLength": 30}
    return Schema(
        json_object(
            {
                "entities": {"type": "array", "items": entity, "maxItems": 8},
                "relationships": {"type": "array", "items": relation, "maxItems": 8},
                "content_keywords": {"type": "array", "items": keys, "maxItems": 4},
            }
        )
    )


LOOP_CHECK = Schema(
    json_object({"missed": {"enum": ["yes", "no"]}}), lambda v: v["missed"] == "yes"
)
"""Loop NER's verdict: were entities still missed?"""


@dataclass
class ChunkExtraction:
    """What the model found in one chunk, over all rounds."""

    entities: list[tuple[str, str, str]] = field(default_factory=list)  # name, type, description
    relations: list[tuple[str, str, str, str, float]] = field(default_factory=list)
    keywords: list[str] = field(default_factory=list)
    failures: int = 0
    rounds: int = 0


def absorb(found: ChunkExtraction, answer: dict) -> None:
    """Add the records of one validated answer (names stripped; empty names skipped)."""
    for e in answer["entities"]:
        if e["name"].strip():
            found.entities.append((e["name"].strip(), e["type"], e["description"].strip()))
    for r in answer["relationships"]:
        src, dst = r["source"].strip(), r["target"].strip()
        if src and dst:
            found.relations.append(
                (src, dst, r["description"].strip(), r["keywords"].strip(), float(r["strength"]))
            )
    found.keywords.extend(k.strip() for k in answer["content_keywords"] if k.strip())


def extract_triples(
    llm: LLM,
    texts: list[str],
    entity_types: list[str],
    gleaning: int = 1,
    loop: str = "none",
    max_rounds: int = 2,
    max_tokens: int = 1024,
    retries: int = 1,
) -> list[ChunkExtraction]:
    """Entities and relations of every text: a first round, then gleaning or loop-NER rounds."""
    if loop not in ("none", "trial", "base"):
        raise ValueError(f"loop must be 'none', 'trial' or 'base', got {loop!r}")
    schema = EXTRACT_STAGE.schema(entity_types=tuple(entity_types))
    params = GenParams(max_tokens=EXTRACT_STAGE.max_tokens(budget=max_tokens))
    results = [ChunkExtraction() for _ in texts]
    convs = [EXTRACT_STAGE.prompt(t, entity_types) for t in texts]
    pending = list(range(len(texts)))

    def extract_round(idx: list[int]) -> None:
        run = generate_structured(
            llm, [convs[i] for i in idx], schema, params, stage="extract", retries=retries
        )
        for i, res in zip(idx, run.results, strict=True):
            convs[i] = convs[i] + [{"role": "assistant", "content": res.raw}]
            results[i].rounds += 1
            if res.ok:
                absorb(results[i], res.value)
            else:
                results[i].failures += 1

    def ask(idx: list[int]) -> list[int]:
        """Chunks whose model says entities were missed (an unusable verdict stops the chunk)."""
        run = generate_structured(
            llm,
            [LOOP_CHECK_STAGE.prompt(convs[i]) for i in idx],
            LOOP_CHECK_STAGE.schema(),
            GenParams(max_tokens=LOOP_CHECK_STAGE.max_tokens()),
            stage="extract_loop_check",
            retries=retries,
        )
        return [i for i, res in zip(idx, run.results, strict=True) if res.ok and res.value]

    def cont(idx: list[int]) -> None:
        for i in idx:
            convs[i] = GLEANING_STAGE.prompt(convs[i])
        extract_round(idx)

    extract_round(pending)
    if loop == "none":
        for _ in range(gleaning):
            cont(pending)
    elif loop == "trial":  # ask first, continue only where the model says yes
        for _ in range(max_rounds):
            pending = ask(pending)
            if not pending:
                break
            cont(pending)
    else:  # base: continue first, then ask whether to go on
        for _ in range(max_rounds):
            if not pending:
                break
            cont(pending)
            pending = ask(pending)
    return results


def extract_configured(llm: LLM, texts: list[str], x: ExtractionConfig) -> list[ChunkExtraction]:
    """`extract_triples` as an index config's `extraction` section sets it."""
    return extract_triples(
        llm, texts, x.entity_types, x.gleaning, x.loop, x.max_rounds, x.max_tokens, x.retries
    )


def extraction_prompt(text: str, entity_types: list[str]) -> str:
    """The first-round extraction prompt of one text."""
    fmt = triple_schema(entity_types).describe()
    return EXTRACT_PROMPT.format(types=", ".join(entity_types), format=fmt, text=text)


DEFAULT_TYPES = tuple(ExtractionConfig().entity_types)
EXTRACT_STAGE = structured_stage(
    "extract",
    about="entities and relations of a chunk: the first round of LLM extraction",
    prompt=lambda text, entity_types: [
        {"role": "user", "content": extraction_prompt(text, list(entity_types))}
    ],
    schema=lambda entity_types, **_: triple_schema(entity_types),
    max_tokens=lambda budget, **_: budget,
    entity_types=DEFAULT_TYPES,
    budget=1024,
)
GLEANING_STAGE = structured_stage(
    "extract_gleaning",
    about="a further extraction round continuing a chunk's conversation (gleaning, loop NER)",
    prompt=lambda conversation: [*conversation, {"role": "user", "content": CONTINUE_PROMPT}],
    schema=lambda entity_types, **_: triple_schema(entity_types),
    max_tokens=lambda budget, **_: budget,
    entity_types=DEFAULT_TYPES,
    budget=1024,
)
LOOP_CHECK_STAGE = structured_stage(
    "extract_loop_check",
    about="loop NER's verdict on a chunk's conversation: were entities still missed",
    prompt=lambda conversation: [
        *conversation,
        {"role": "user", "content": ASK_PROMPT.format(format=LOOP_CHECK.describe())},
    ],
    schema=LOOP_CHECK,
    max_tokens=8,
)


SUMMARY_PROMPT = """Several descriptions of the same entity were collected from different passages.
Write one concise description of "{name}" that keeps every distinct fact and adds nothing.

Descriptions:
{descriptions}

Description:"""


def summarize_descriptions(
    llm: LLM, entities: list[dict], above: int, max_tokens: int = SUMMARY_MAX_TOKENS
) -> int:
    """Replace joined descriptions longer than `above` characters by an LLM summary (one batched
    call); an empty answer keeps the joined text. Returns how many were summarised."""
    long = [e for e in entities if e["description"] and len(e["description"]) > above]
    if not long:
        return 0
    prompts = [SUMMARY_PROMPT.format(name=e["name"], descriptions=e["description"]) for e in long]
    answers = llm.generate(
        prompts, GenParams(max_tokens=max_tokens), stage="summarize_descriptions"
    )
    done = 0
    for e, a in zip(long, answers, strict=True):
        if a.text.strip():
            e["description"] = a.text.strip()
            e["sentence_units"] = []  # the summary describes it now: its vector embeds that
            done += 1
    return done


def _extract(b: Build) -> dict[str, Any]:
    """LLM triple extraction of every chunk, or of the skeleton's chunks where KET-RAG's
    skeleton is built (gleaning or loop NER rounds)."""
    pairs = list(b.chunks.pairs())
    if b.core_chunks is not None:
        pairs = [pairs[i] for i in b.core_chunks.tolist()]
    found = extract_configured(b.stage_llm(), [text for _, text in pairs], b.config.extraction)
    b.extracted = [(cid, f) for (cid, _), f in zip(pairs, found, strict=True)]
    return {
        "items": len(found),
        "entities": sum(len(f.entities) for f in found),
        "relations": sum(len(f.relations) for f in found),
        "rounds": sum(f.rounds for f in found),
        "parse_failures": sum(f.failures for f in found),
    }


BUILD_EXTRACT = Stage(
    "extract",
    ("chunks",),
    (),
    _extract,
    enabled=lambda cfg: cfg.extraction.enabled,
    uses_llm=True,
)
