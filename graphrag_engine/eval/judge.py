"""LLM-as-judge: pairwise answer comparison and RAGAS-style context metrics.

Pairwise: every pair of runs is judged on every shared question in both answer orders, on
ReGraphRAG's criteria (comprehensiveness, diversity, empowerment, overall) and PankRAG's added
ones (logicality, relevance, coherence). Win rates are computed per order and averaged over the
two orders, so a judge's position bias cancels; ties and unparsable verdicts are counted.

RAGAS-style: faithfulness (the answer's statements supported by the retrieved context),
context recall (reference-answer sentences attributable to the context) and context precision
(average precision of the context passages judged useful for the reference answer).

Every stage is one batched, cached LLM call over all prompts; answers that do not parse are
re-asked and then recorded as failures (NaN), never guessed.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

from graphrag_engine.models.base import GenParams
from graphrag_engine.models.stages import structured_stage
from graphrag_engine.models.structured import (
    ParseError,
    Schema,
    generate_structured,
)

CRITERIA = {
    "comprehensiveness": "how much detail the answer gives to cover every aspect of the question",
    "diversity": "how varied the perspectives and insights the answer offers are",
    "empowerment": "how well the answer helps the reader understand the topic and judge it",
    "logicality": "how logically consistent and well reasoned the answer is",
    "relevance": "how closely the answer keeps to what the question asks",
    "coherence": "how well organised and easy to follow the answer is",
    "overall": "which answer is better when all of the above are weighed together",
}

_WINNER = {"enum": ["Answer 1", "Answer 2", "Tie"]}
VERDICT_SCHEMA = {
    "type": "object",
    "properties": {
        c: {
            "type": "object",
            "properties": {"winner": _WINNER, "reason": {"type": "string", "maxLength": 60}},
            "required": ["winner", "reason"],
            "additionalProperties": False,
        }
        for c in CRITERIA
    },
    "required": list(CRITERIA),
    "additionalProperties": False,
}

PAIRWISE_PROMPT = """You compare two answers to the same question.

Question: {question}

Answer 1: {answer1}

Answer 2: {answer2}

For each criterion below, decide which answer is better: "Answer 1", "Answer 2" or "Tie".
{criteria}

Reply with one JSON object of this form and nothing else:
{format}"""

SHORT_VERDICT_TOKENS = 16
"""The completion budget of a yes/no verdict (RAGAS context precision)."""


def pairwise_prompt(question: str, answer1: str, answer2: str) -> str:
    """The judge's prompt for one ordered pair of answers to one question."""
    criteria = "\n".join(f"- {c}: {d}" for c, d in CRITERIA.items())
    return PAIRWISE_PROMPT.format(
        question=question,
        answer1=answer1,
        answer2=answer2,
        criteria=criteria,
        format=VERDICT.describe(),
    )


def _winner(value: Any) -> str | None:
    text = value.get("winner", value.get("Winner")) if isinstance(value, dict) else value
    if not isinstance(text, str):
        return None
    t = text.strip().lower()
    if "tie" in t or "equal" in t:
        return "tie"
    if t.endswith("1") or t in ("a", "first"):
        return "1"
    if t.endswith("2") or t in ("b", "second"):
        return "2"
    return None


def _verdicts(obj: dict) -> dict[str, str | None]:
    lower = {str(k).strip().lower(): v for k, v in obj.items()}
    out = {c: _winner(lower.get(c)) for c in CRITERIA}
    if out["overall"] is None:
        raise ParseError("no overall winner in the verdict")
    return out


VERDICT = Schema(VERDICT_SCHEMA, _verdicts)
"""The pairwise judge's answer: a winner and a short reason per criterion."""

JUDGE_STAGE = structured_stage(
    "judge_pairwise",
    about="the pairwise judge's verdict on two answers to one question, per criterion",
    prompt=pairwise_prompt,
    schema=VERDICT,
    max_tokens=lambda budget: budget,
    budget=400,
)


def pairwise_judge(
    llm,
    runs: list[tuple[str, dict, list[dict]]],
    limit: int | None = None,
    max_tokens: int = 400,
    retries: int = 2,
) -> list[dict[str, Any]]:
    """Verdict rows (qid, run_a, run_b, order, criterion, verdict in a|b|tie|unparsable) for
    every pair of runs on their shared answered questions, both orders, one batched call."""
    jobs, prompts = [], []
    for (la, _, ra), (lb, _, rb) in combinations(runs, 2):
        by_b = {r["qid"]: r for r in rb}
        shared = [r for r in ra if r["qid"] in by_b and r["answer"] and by_b[r["qid"]]["answer"]]
        for r in shared[:limit]:
            a, b = r["answer"], by_b[r["qid"]]["answer"]
            for order, (x, y) in (("ab", (a, b)), ("ba", (b, a))):
                jobs.append((r["qid"], la, lb, order))
                prompts.append(JUDGE_STAGE.prompt(r["question"], x, y))
    if not prompts:
        return []
    res = generate_structured(
        llm,
        prompts,
        JUDGE_STAGE.schema(),
        GenParams(max_tokens=JUDGE_STAGE.max_tokens(budget=max_tokens)),
        "judge_pairwise",
        retries,
    )
    rows = []
    for (qid, la, lb, order), s in zip(jobs, res.results, strict=True):
        for c in CRITERIA:
            v = s.value.get(c) if s.ok else None
            if v is None:
                verdict = "unparsable"
            elif v == "tie":
                verdict = "tie"
            else:
                first_is_a = order == "ab"
                verdict = "a" if (v == "1") == first_is_a else "b"
            rows.append(
                {
                    "qid": qid,
                    "run_a": la,
                    "run_b": lb,
                    "order": order,
                    "criterion": c,
                    "verdict": verdict,
                }
            )
    return rows


POSITION_BIAS_LIMIT = 0.9
"""A comparison whose decided verdicts go to one shown position (first or second) more often
than this is uninformative: its win rates say how the judge reads slots, not answers."""


def win_rates(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (pair, criterion): win rates of a and b and the tie rate, each averaged over the two
    answer orders (shares among parsed verdicts of that order); the judge's position bias: the
    share of decided verdicts won by the answer shown first, and the share of questions whose
    two orders name the same winner (a judge that always picks one slot scores 1.0 and 0.0 and
    its win rates are exactly 50/50); whether the comparison is informative (its position
    bias, the larger of the first- and second-shown shares, at most POSITION_BIAS_LIMIT);
    plus unparsable counts."""
    out = []
    keys = sorted(
        {(r["run_a"], r["run_b"], r["criterion"]) for r in rows},
        key=lambda k: (k[0], k[1], list(CRITERIA).index(k[2])),
    )
    for a, b, c in keys:
        sel = [r for r in rows if (r["run_a"], r["run_b"], r["criterion"]) == (a, b, c)]
        shares = {"a": [], "b": [], "tie": []}
        for order in ("ab", "ba"):
            parsed = [
                r["verdict"] for r in sel if r["order"] == order and r["verdict"] != "unparsable"
            ]
            for k in shares:
                if parsed:
                    shares[k].append(parsed.count(k) / len(parsed))
        mean = {k: (sum(v) / len(v) if v else float("nan")) for k, v in shares.items()}
        decided = [r for r in sel if r["verdict"] in ("a", "b")]
        first = sum((r["order"] == "ab") == (r["verdict"] == "a") for r in decided)
        by_qid: dict[str, dict[str, str]] = {}
        for r in sel:
            by_qid.setdefault(r["qid"], {})[r["order"]] = r["verdict"]
        both = [
            v
            for v in by_qid.values()
            if "unparsable" not in (v.get("ab", "unparsable"), v.get("ba", "unparsable"))
        ]
        first_share = first / len(decided) if decided else float("nan")
        bias = max(first_share, 1 - first_share) if decided else float("nan")
        out.append(
            {
                "run_a": a,
                "run_b": b,
                "criterion": c,
                "position_bias": bias,
                "informative": bool(decided) and bias <= POSITION_BIAS_LIMIT,
                "win_a": mean["a"],
                "win_b": mean["b"],
                "tie": mean["tie"],
                "first_shown": first_share,
                "consistent": sum(v["ab"] == v["ba"] for v in both) / len(both)
                if both
                else float("nan"),
                "judged": sum(r["verdict"] != "unparsable" for r in sel),
                "unparsable": sum(r["verdict"] == "unparsable" for r in sel),
            }
        )
    return out


def win_rate_table(rows: list[dict[str, Any]]) -> list[str]:
    """Markdown lines of the pairwise win-rate table."""
    lines = [
        "## LLM judge: pairwise win rates (averaged over both answer orders)",
        "",
        '"first shown": decided verdicts won by the answer shown first (0.5 = no position bias);'
        ' "consistent": questions whose two orders name the same winner. A comparison whose'
        f" verdicts go to one shown position more than {POSITION_BIAS_LIMIT:.0%} of the time is"
        " marked uninformative: its win rates measure the judge's slot preference, not the"
        " answers.",
        "",
        "| run A | run B | criterion | A wins | B wins | ties | first shown | consistent | judged"
        " | unparsable |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for w in win_rates(rows):
        pct = lambda x: "–" if x != x else f"{100 * x:.1f}%"  # noqa: E731
        wins = (
            (pct(w["win_a"]), pct(w["win_b"]))
            if w["informative"]
            else (f"uninformative (position bias {pct(w['position_bias'])})", "–")
        )
        lines.append(
            f"| {w['run_a']} | {w['run_b']} | {w['criterion']} | {wins[0]} | "
            f"{wins[1]} | {pct(w['tie'])} | {pct(w['first_shown'])} | "
            f"{pct(w['consistent'])} | {w['judged']} | {w['unparsable']} |"
        )
    return lines
