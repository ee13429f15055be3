"""LLM triple extraction (the entity/relation prompt family of LightRAG and ReGraphRAG), with
gleaning rounds and ROGRAG's loop NER, every round one batched call over all pending chunks.

Each chunk's answer is a list of delimited records:
    ("entity"<|>NAME<|>TYPE<|>DESCRIPTION)
    ("relationship"<|>SOURCE<|>TARGET<|>DESCRIPTION<|>KEYWORDS<|>STRENGTH)
    ("content_keywords"<|>KEYWORDS)
Loop NER: `trial` asks the model whether entities were missed and continues only on YES;
`base` continues first and then asks; both stop after `max_rounds` continuations.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.models import LLM, GenParams
from engine.models.structured import ParseError, parse_delimited

TD, RD, CD = "<|>", "##", "<|COMPLETE|>"

EXTRACT_PROMPT = """Task: read the text and list its entities and the relationships between them.
Entity types to look for: {types}.

Write one record per entity:
("entity"{td}NAME{td}TYPE{td}one-sentence description from the text)
and one record per pair of related entities:
("relationship"{td}SOURCE NAME{td}TARGET NAME{td}how they are related{td}a few keywords{td}strength from 1 to 10)
and finally one record with the main keywords of the text:
("content_keywords"{td}keywords, separated by commas)
Separate records with {rd} and finish with {cd}. Use only facts stated in the text.

Text:
{text}

Records:"""

CONTINUE_PROMPT = f"Some entities or relationships were missed. Add only the missing ones below, in the same format, and finish with {CD}."
ASK_PROMPT = "Were any entities of the listed types still missed? Answer YES or NO only."


@dataclass
class ChunkExtraction:
    """What the model found in one chunk, over all rounds."""

    entities: list[tuple[str, str, str]] = field(default_factory=list)  # name, type, description
    relations: list[tuple[str, str, str, str, float]] = field(default_factory=list)
    keywords: list[str] = field(default_factory=list)
    failures: int = 0
    rounds: int = 0


def _absorb(found: ChunkExtraction, text: str) -> bool:
    """Add the records of one answer; False when nothing parsed."""
    try:
        records = parse_delimited(text, TD, RD, CD).records
    except ParseError:
        return False
    for r in records:
        kind = r[0].lower()
        if kind == "entity" and len(r) >= 3 and r[1]:
            found.entities.append((r[1], r[2].upper() or "UNKNOWN", r[3] if len(r) > 3 else ""))
        elif kind == "relationship" and len(r) >= 4 and r[1] and r[2]:
            try:
                strength = float(r[5]) if len(r) > 5 else 1.0
            except ValueError:
                strength = 1.0
            found.relations.append((r[1], r[2], r[3], r[4] if len(r) > 4 else "", strength))
        elif kind == "content_keywords" and len(r) >= 2:
            found.keywords.extend(k.strip() for k in r[1].split(",") if k.strip())
    return True


def extract_triples(
    llm: LLM,
    texts: list[str],
    entity_types: list[str],
    gleaning: int = 1,
    loop: str = "none",
    max_rounds: int = 2,
    max_tokens: int = 512,
) -> list[ChunkExtraction]:
    """Entities and relations of every text: a first round, then gleaning or loop-NER rounds."""
    params = GenParams(max_tokens=max_tokens)
    ask_params = GenParams(max_tokens=3)
    results = [ChunkExtraction() for _ in texts]
    convs = [
        [
            {
                "role": "user",
                "content": EXTRACT_PROMPT.format(
                    types=", ".join(entity_types), text=t, td=TD, rd=RD, cd=CD
                ),
            }
        ]
        for t in texts
    ]
    pending = list(range(len(texts)))

    def extract_round(idx: list[int]) -> None:
        answers = llm.generate([convs[i] for i in idx], params, stage="extract")
        for i, a in zip(idx, answers, strict=True):
            convs[i] = convs[i] + [{"role": "assistant", "content": a.text}]
            results[i].rounds += 1
            if not _absorb(results[i], a.text):
                results[i].failures += 1

    def ask(idx: list[int]) -> list[int]:
        """Chunks whose model says entities were missed."""
        prompts = [convs[i] + [{"role": "user", "content": ASK_PROMPT}] for i in idx]
        answers = llm.generate(prompts, ask_params, stage="extract_loop_check")
        return [
            i for i, a in zip(idx, answers, strict=True) if a.text.strip().upper().startswith("YES")
        ]

    def cont(idx: list[int]) -> None:
        for i in idx:
            convs[i] = convs[i] + [{"role": "user", "content": CONTINUE_PROMPT}]
        extract_round(idx)

    extract_round(pending)
    if loop == "none":
        for _ in range(gleaning):
            cont(pending)
    elif loop == "trial":  # ask first, continue only where the model says YES
        for _ in range(max_rounds):
            pending = ask(pending)
            if not pending:
                break
            cont(pending)
    elif loop == "base":  # continue first, then ask whether to go on
        for _ in range(max_rounds):
            if not pending:
                break
            cont(pending)
            pending = ask(pending)
    else:
        raise ValueError(f"loop must be 'none', 'trial' or 'base', got {loop!r}")
    return results


SUMMARY_PROMPT = """Several descriptions of the same entity were collected from different passages.
Write one concise description of "{name}" that keeps every distinct fact and adds nothing.

Descriptions:
{descriptions}

Description:"""


def summarize_descriptions(
    llm: LLM, entities: list[dict], above: int, max_tokens: int = 256
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
            done += 1
    return done
