"""Grammar-constrained decoding on the transformers backend: the token mask matches the grammar
engine's own reference apply, and SmolLM2 answers schema prompts with schema-valid JSON."""

from __future__ import annotations

import json

import pytest

from graphrag_engine.models.base import GenParams
from graphrag_engine.retrieve.keywords import KEYWORD_PROMPT, KEYWORD_SCHEMA, KEYWORDS

QUESTIONS = [
    "Who founded the company that makes the iPhone?",
    "What river flows through the capital of France?",
    "Which year did the author of Hamlet die?",
    "Where was the director of Jaws born?",
    "What is the population of the largest city in Australia?",
]


def _valid_keywords(text: str) -> bool:
    """Whether an answer is exactly a KEYWORD_SCHEMA document (stdlib json, schema by hand)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return False
    if not isinstance(value, dict) or set(value) != set(KEYWORD_SCHEMA["required"]):
        return False
    return all(
        isinstance(v, list) and 1 <= len(v) <= 4 and all(isinstance(k, str) and k for k in v)
        for v in value.values()
    )


def test_unpacked_mask_equals_llguidance_reference() -> None:
    """The torch bit unpacking masks exactly the logits llguidance's reference apply masks."""
    import llguidance.torch
    import torch

    from graphrag_engine.models.constrained import apply_bitmask

    gen = torch.Generator().manual_seed(0)
    rows, vocab = 3, 1000
    bitmask = torch.randint(-(2**31), 2**31 - 1, (rows, (vocab + 31) // 32), generator=gen)
    bitmask = bitmask.to(torch.int32)
    scores = torch.randn(rows, vocab, generator=gen)
    reference = scores.clone()
    llguidance.torch.apply_token_bitmask_inplace(reference, bitmask)
    ours = apply_bitmask(scores, bitmask, vocab, eos=0)
    assert torch.equal(torch.isinf(ours), torch.isinf(reference))
    assert torch.equal(ours[~torch.isinf(ours)], reference[~torch.isinf(reference)])


@pytest.mark.slow
def test_smollm2_constrained_answers_are_schema_valid(smollm) -> None:
    """Every constrained SmolLM2 keyword answer is a valid document of the schema, and the
    backend's id names the mode (free and constrained answers never share a cache key)."""
    assert smollm.grammar is not None and smollm.model_id.endswith("+llguidance")
    prompts = [KEYWORD_PROMPT.format(question=q, format=KEYWORDS.describe()) for q in QUESTIONS]
    params = GenParams(max_tokens=160, json_schema=KEYWORD_SCHEMA)
    answers = smollm.generate(prompts, params)
    assert all(_valid_keywords(a.text) for a in answers), [a.text for a in answers]
    assert all(a.finish_reason == "stop" for a in answers)
    # batched == one prompt at a time under the grammar (greedy decoding)
    alone = [smollm.generate([p], params)[0].text for p in prompts[:2]]
    assert alone == [a.text for a in answers[:2]]


@pytest.mark.slow
def test_keyword_stage_through_a_real_llama_cpp_server_is_schema_decoded(llama_server) -> None:
    """The openai backend sends the stage schema in the strongest response_format the real
    llama.cpp server accepts; every answer validates and the ledger counts schema decoding."""
    from graphrag_engine.models import LLM
    from graphrag_engine.models.openai_llm import HTTPSettings, OpenAICompatLLM
    from graphrag_engine.models.structured import generate_structured

    backend = OpenAICompatLLM(
        llama_server.alias, HTTPSettings(base_url=llama_server.url, concurrency=2)
    )
    llm = LLM(backend)
    prompts = [KEYWORD_PROMPT.format(question=q, format=KEYWORDS.describe()) for q in QUESTIONS]
    run = generate_structured(llm, prompts, KEYWORDS, GenParams(max_tokens=160), "keywords", 1)
    assert run.failures == 0 and all(_valid_keywords(r.raw) for r in run.results)
    assert backend.decoding in ("json_schema", "json_object_schema"), backend.refusals
    usage = llm.ledger.get("keywords", backend.model_id)
    assert usage.schema_decoded == usage.calls == len(QUESTIONS) and usage.free_decoded == 0


@pytest.mark.slow
def test_smollm2_logic_forms_under_the_grammar_keep_every_operator_shape(smollm) -> None:
    """Decoded under the logic-form grammar, SmolLM2's plans keep each operator's arity and
    fields, which its plans broke when the grammar let any operator take any inputs (a
    compare at step 1 reading nothing): every answer parses under the stage's own rules."""
    from graphrag_engine.methods.rograg.logic_forms import logic_form_schema
    from graphrag_engine.methods.rograg.method import logic_form_max_tokens, logic_form_prompt

    schema = logic_form_schema(3)
    prompts = [logic_form_prompt(q, 3) for q in QUESTIONS[:3]]
    params = GenParams(max_tokens=logic_form_max_tokens(3), json_schema=schema.json_schema)
    answers = smollm.generate(prompts, params)
    assert all(a.finish_reason == "stop" for a in answers), [a.text for a in answers]
    forms = [schema.parse(a.text) for a in answers]  # ParseError fails the test
    assert all(f.steps[0].operator == "retrieve" for f in forms)
