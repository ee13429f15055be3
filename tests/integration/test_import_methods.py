"""Every registered method over Microsoft GraphRAG's output imported into an index
(../shared/data/graphrag_output: GraphRAG 3.1.2 over *A Christmas Carol*): each runs and reads
GraphRAG's text; global search maps GraphRAG's reports; DRIFT primes on GraphRAG's reports and
follows up with local search over GraphRAG's entities, checked by hand with a fault-injection
server (named as such: it says planted answers)."""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from graphrag_engine.eval.datasets import Question
from graphrag_engine.importers import import_index
from graphrag_engine.store import open_index
from tests.fault_server import FaultInjector
from tests.graphrag_import import BUILT_ONLY, no_vectors, rows_of

BOOK_QUESTIONS = [
    Question("marley", "Who was Jacob Marley and why does his ghost visit Scrooge?", ["Marley"]),
    Question("themes", "What are the main themes of the story?", []),
]
"""Questions about *A Christmas Carol*, written for the import test (the output has none)."""


def _on_the_server(cfg, name: str, server) -> None:
    """Point a method's own LLM stages at the session's llama.cpp server, as the demo runs it
    but without re-asks: what an import could break is a stage reading its tables, not the
    re-ask of a SmolLM2 answer that did not parse (re-asks: test_models_local.py)."""
    from graphrag_engine.cli.demo import SETTINGS, WINDOWS

    cfg.models.llm.backend, cfg.models.llm.model = "openai", server.alias
    cfg.models.llm.base_url, cfg.models.llm.max_failed_share = server.url, 1.0
    cfg.models.llm.context_window = 2048  # a slot's window; contexts shrink to fit
    cfg.generation.max_context_tokens = WINDOWS.get(name, 512)  # the demo's windows
    cfg.generation.enabled = False
    for key, value in SETTINGS.get(name, {}).items():
        setattr(cfg.options, key, value)
    cfg.models.llm.parse_retries = 0


def test_every_method_runs_on_the_graphrag_import(graphrag_import, tmp_path, llama_server) -> None:
    """Every registered method but global search (next test) over the GraphRAG import: each
    runs, each LLM-free one ranks the book's chunks and reads GraphRAG's text, LLM stages answered by the session's llama.cpp server (SmolLM2,
    failures recorded); local search's and LightRAG's contexts hold GraphRAG's entity
    descriptions."""
    from graphrag_engine import Engine
    from graphrag_engine.cli.demo import SETTINGS
    from graphrag_engine.methods import METHODS, query_config

    described = [d for d in rows_of(graphrag_import, "entities", "description") if d]
    imported_texts = [
        t[:60]
        for t in described
        + rows_of(graphrag_import, "chunks", "text")
        + rows_of(graphrag_import, "relations", "description")
        if t
    ]
    engine = Engine(graphrag_import)
    contexts = {}
    for name in METHODS:
        if name in ("none", "graphrag_global", *BUILT_ONLY):
            continue  # the trees are built by `index` from chunk vectors; GraphRAG has none
        cfg = query_config(name)
        for key, value in SETTINGS.get(name, {}).items():  # the demo's (LEGO on the index)
            setattr(cfg.options, key, value)
        qs = BOOK_QUESTIONS
        if cfg.method_llm_use():
            _on_the_server(cfg, name, llama_server)
            qs = BOOK_QUESTIONS[:1]  # its LLM stages read the question; one is enough
        cfg.generation.enabled = False
        if name == "regraphrag":
            cfg.options.perspectives, cfg.options.sub_queries = 2, 1
        rows = engine.run(cfg, qs, tmp_path / name).rows()
        assert [r["qid"] for r in rows] == [q.qid for q in qs], name
        contexts[name] = "\n".join(rows[0]["context_text"])
        if not cfg.method_llm_use():  # SmolLM2's stages may leave a method nothing to rank
            assert rows[0]["retrieved_chunk_ids"], name
            # what it read is GraphRAG's: a text unit, an entity's or a relation's description
            assert any(t in contexts[name] for t in imported_texts), name
    for name in ("graphrag_local", "lightrag"):
        assert sum(d[:80] in contexts[name] for d in described) >= 1, name
    assert "Marley" in contexts["naive"]


def test_global_search_maps_graphrag_reports(
    graphrag_import, graphrag_output, tmp_path, llama_server
) -> None:
    """Global search's map batches over the import hold GraphRAG's reports (their findings),
    each within its token budget even where one GPT report alone is longer; and global search
    runs end to end with SmolLM2 over an import of two of GraphRAG's top-level communities."""
    from graphrag_engine import Engine
    from graphrag_engine.methods import query_config
    from graphrag_engine.methods.graphrag_global import _batches
    from graphrag_engine.retrieve.communities import communities
    from graphrag_engine.retrieve.context import QueryContext

    cfg = query_config("graphrag_global")
    _on_the_server(cfg, "graphrag_global", llama_server)
    cfg.options.map_max_tokens = 64  # a map answer (300 by default) is read, not judged, here
    ctx = QueryContext(open_index(graphrag_import), cfg, tmp_path / "ctx")
    comms = communities(ctx, need_reports=True)
    batches = _batches(ctx, comms, comms.reported_at(cfg.options.community_level), cfg.options)
    budget = ctx.scaled(cfg.options.batch_tokens)
    assert max(ctx.count_tokens(batches)) <= budget + 8  # joins between reports
    findings = [
        f["summary"]
        for r in pq.read_table(graphrag_output / "community_reports.parquet").to_pylist()
        for f in r["findings"]
    ]
    mapped = "\n".join(batches)
    assert sum(f in mapped for f in findings) >= 10

    few = tmp_path / "few"
    shutil.copytree(graphrag_output, few)
    top = pq.read_table(few / "communities.parquet")
    keep = top.filter(pc.equal(top["level"], 0)).slice(0, 2)
    keep = keep.set_column(
        keep.schema.get_field_index("children"), "children",
        pa.array([[] for _ in range(keep.num_rows)], keep.schema.field("children").type),
    )  # fmt: skip
    pq.write_table(keep, few / "communities.parquet")
    reports = pq.read_table(few / "community_reports.parquet")
    wanted = pc.is_in(reports["community"], value_set=keep["community"])
    pq.write_table(reports.filter(wanted), few / "community_reports.parquet")
    import_index(few, tmp_path / "few-index", no_vectors())
    run = Engine(tmp_path / "few-index").run(cfg, BOOK_QUESTIONS[1:], tmp_path / "global")
    row = run.rows()[0]
    assert row["qid"] == "themes" and row["extras"]["reports"] == 2
    assert row["extras"]["map_prompts"] >= 1 and row["tokens"].get("global_map", 0) > 0


def _say(value: object) -> str:
    return "say:" + json.dumps(value)


def test_drift_primes_on_graphrag_reports_and_follows_up_on_its_entities(
    graphrag_import, graphrag_output, tmp_path
) -> None:
    """DRIFT over the import, its answers planted: the HyDE template and the primer's reports
    are GraphRAG's own (the primer's the two nearest the hypothetical answer, cut to their
    budgets), the follow-ups run local search over GraphRAG's entity descriptions and text
    units, a follow-up both primer folds raise is asked once, and the reduce gives the answer."""
    from graphrag_engine.methods import query_config
    from graphrag_engine.methods.drift import drift
    from graphrag_engine.models.openai_llm import HTTPSettings, OpenAICompatLLM
    from graphrag_engine.retrieve.context import QueryContext
    from graphrag_engine.retrieve.types import StageClock

    ghost = "Why does Marley's ghost visit Scrooge?"
    chains = "What do Marley's chains stand for?"
    plan = [
        _say({"answer": "# Marley and Scrooge\n\nMarley, Scrooge's late partner, returns."}),
        _say({"intermediate_answer": "Marley was Scrooge's partner.", "score": 70,
              "follow_up_queries": [ghost, chains]}),
        _say({"intermediate_answer": "His ghost warns Scrooge.", "score": 50,
              "follow_up_queries": [ghost]}),
        _say({"response": "To warn him of his fate.", "score": 80, "follow_up_queries": []}),
        _say({"response": "The greed of his life.", "score": 60, "follow_up_queries": []}),
        "say:Jacob Marley was Scrooge's partner; his ghost comes to warn him.",  # the reduce
    ]  # fmt: skip
    cfg = query_config("drift")
    cfg.models.llm.backend, cfg.models.llm.parse_retries = "openai", 0
    cfg.generation.max_context_tokens = 4096
    o = cfg.options
    o.k_followups, o.primer_folds, o.n_depth = 2, 2, 1
    o.hyde_template_tokens = 120  # GraphRAG's reports are longer: the template is cut
    o.local_text_unit_prop = 0.5  # GraphRAG's 0.9 (and 0.1 for reports) leave entities none
    with FaultInjector(plan) as fault:
        backend = OpenAICompatLLM("fault", HTTPSettings(base_url=fault.url, concurrency=1))
        ctx = QueryContext(open_index(graphrag_import), cfg, tmp_path, llm_backend=backend)
        r = drift(ctx, [Question("marley", "Who was Jacob Marley?", [])], StageClock())
        assert not fault.plan  # every planted answer was asked for, no more
        sent = ["\n".join(m["content"] for m in q["body"]["messages"]) for q in fault.requests]
    hyde, primers, locals_, reduce = sent[0], sent[1:3], sent[3:5], sent[5]
    reports = pq.read_table(graphrag_output / "community_reports.parquet").to_pylist()
    titles = [x["title"] for x in reports]
    shown = hyde.split("Example report:\n", 1)[1].rstrip().removesuffix("JSON:").rstrip()
    (report,) = [x for x in reports if x["title"] == shown.split("\n", 1)[0]]  # GraphRAG's
    whole, cut = ctx.count_tokens([report["full_content_json"], shown])
    budget = ctx.scaled(o.hyde_template_tokens)
    assert cut <= budget + 4 and whole > 2 * budget  # cut to its budget (the cut text,
    # tokenized again, can end in a token or two more)
    held = [{t for t in titles if t in p} for p in primers]
    assert all(held) and held[0] != held[1]  # a report a fold, the two nearest
    described = [d[:60] for d in rows_of(graphrag_import, "entities", "description") if d]
    units = [t[:60] for t in rows_of(graphrag_import, "chunks", "text") if t]
    for query, prompt in zip([ghost, chains], locals_, strict=True):
        assert "Follow-up query: " + query in prompt
        assert any(d in prompt for d in described)
        assert any(u in prompt for u in units)
    assert "To warn him of his fate." in reduce and "The greed of his life." in reduce
    e = r.extras[0]
    assert e["reports"] == 2 and e["asked"] == [2] and e["depth"] == 1 and e["failures"] == 0
    assert r.contexts[0].preset_answer.startswith("Jacob Marley was Scrooge's partner")
