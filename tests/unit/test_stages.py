"""The structured-stage registry: every stage declared once beside its prompt, its default
settings those of the config that owns it, and the bench and forecasts reading it."""

from __future__ import annotations

import ast

from graphrag_engine.config import CommunitiesConfig, ExtractionConfig, GraphConfig
from graphrag_engine.config.tree_section import TreeConfig
from graphrag_engine.methods.drift import DRIFTConfig
from graphrag_engine.methods.graphrag_global import GraphRAGGlobalConfig
from graphrag_engine.methods.pankrag import PankRAGConfig
from graphrag_engine.methods.regraphrag import ReGraphRAGConfig
from graphrag_engine.methods.rograg import ROGRAGConfig
from graphrag_engine.models.structured import Schema
from graphrag_engine.stages import stage, stages_page, structured_stages
from tests.paths import REPO

NAMES = {
    "units", "extract", "extract_gleaning", "extract_loop_check", "community_report",
    "keywords", "perspectives", "pankrag_plan", "pankrag_rewrite", "rograg_analysis", "logic_form", "verify", "global_rate",
    "global_map", "tree_summary", "drift_hyde", "drift_primer", "drift_local",
    "lazy_refine", "lazy_relevance", "lazy_claims", "judge_pairwise", "ragas_statements", "ragas_support", "ragas_useful",
}  # fmt: skip


def test_every_stage_is_registered_with_a_schema_a_budget_and_its_owner() -> None:
    stages = structured_stages()
    assert set(stages) == NAMES
    for s in stages.values():
        assert isinstance(s.schema(), Schema) and s.max_tokens() > 0, s.name
        assert s.owner.startswith("graphrag_engine.") and s.about, s.name


def test_default_settings_are_the_owning_configs_defaults() -> None:
    rg = ReGraphRAGConfig()
    assert stage("perspectives").settings == {"m": rg.perspectives, "n": rg.sub_queries}
    assert stage("pankrag_plan").settings["max_steps"] == PankRAGConfig().max_steps
    assert stage("logic_form").settings["max_steps"] == ROGRAGConfig().max_steps
    assert stage("global_map").max_tokens() == GraphRAGGlobalConfig().map_max_tokens
    assert stage("units").max_tokens() == GraphConfig().unit_max_tokens
    assert stage("extract").max_tokens() == ExtractionConfig().max_tokens
    assert tuple(ExtractionConfig().entity_types) == stage("extract").settings["entity_types"]
    assert stage("community_report").max_tokens() == CommunitiesConfig().report_max_tokens
    assert stage("tree_summary").settings["summary_tokens"] == TreeConfig().summary_tokens
    drift = DRIFTConfig()
    assert stage("drift_hyde").max_tokens() == drift.hyde_max_tokens
    assert stage("drift_primer").max_tokens() == drift.primer_max_tokens
    assert stage("drift_local").max_tokens() == drift.local_max_answer_tokens
    assert stage("drift_local").settings["followups"] == drift.followups


def test_settings_reach_schema_and_budget_and_unknown_ones_are_refused() -> None:
    plan = stage("pankrag_plan")
    assert plan.max_tokens(max_steps=2) < plan.max_tokens()
    assert plan.schema(max_steps=2).json_schema != plan.schema().json_schema
    try:
        plan.max_tokens(steps=2)
    except TypeError as exc:
        assert "steps" in str(exc)
    else:
        raise AssertionError("an unknown setting was accepted")


def test_prompts_carry_the_schema_format_line() -> None:
    prompt = stage("extract").prompt("Ada Lovelace met Babbage.", ("person",))
    assert prompt[0]["role"] == "user" and "Ada Lovelace" in prompt[0]["content"]
    assert stage("extract").schema(entity_types=("person",)).describe() in prompt[0]["content"]
    glean = stage("extract_gleaning").prompt(prompt)
    assert glean[:1] == prompt and glean[-1]["role"] == "user"


def test_the_forecast_reads_the_registry_not_private_prompts() -> None:
    """The index forecast imports no prompt or schema of the modules that own the stages."""
    for rel in ("graphrag_engine/index/forecast.py",):
        tree = ast.parse((REPO / rel).read_text())
        names = [
            (node.module, a.name)
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module
            for a in node.names
        ]
        private = [
            f"{m}.{n}"
            for m, n in names
            if m.startswith("graphrag_engine.")
            and ("PROMPT" in n or n.endswith("_prompt") or n.endswith("_schema"))
        ]
        assert not private, (rel, private)


def test_the_stages_page_is_current() -> None:
    page = (REPO / "docs" / "structured-stages.md").read_text()
    assert page == stages_page()
    assert all(f"`{n}`" in page for n in NAMES)
