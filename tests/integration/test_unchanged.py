"""What every LLM-free method retrieves, held against a recording: each method's top-5 passages
and a digest of the context it would send, for every demo question and for 30 MuSiQue dev
questions over their own index. A change meant to move no behaviour (a refactoring) must leave
this as it is; a change that means to move rankings re-records it on purpose:

    GRAPHRAG_RECORD_UNCHANGED=1 .venv/bin/python -m pytest tests/integration/test_unchanged.py

(docs/checks/capture.sh compares two versions more widely: indexes, SmolLM2 answers, reports.)
Vectors of the same texts differ in their last bits between CPUs, which can swap near-equal
passages: the test allows that for at most 3% of a corpus's (method, question) pairs."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from graphrag_engine.api import Engine
from graphrag_engine.errors import BadInputError
from graphrag_engine.methods import method_names, query_config
from tests.paths import REPO

if TYPE_CHECKING:  # the type only: the recording was made by the code before config/ existed
    from graphrag_engine.config.query import QueryConfig

RECORDING = Path(__file__).with_name("unchanged.json")
RECORD = os.environ.get("GRAPHRAG_RECORD_UNCHANGED") == "1"
CONFIGS = sorted(p.stem for p in (REPO / "configs" / "methods").glob("*.yaml"))
"""The shipped method configs, run beside the registered names (their LLM-free variants)."""
MOVED_SHARE = 0.03
LLM_FREE = {
    "rograg_dual_level_ner": (
        "rograg",
        {"stages": ["dual_level"], "check": "none", "keys": "ner", "analysis": False},
    ),
    "regraphrag_no_expansion": ("regraphrag", {"expansion": False, "edge_text": "relation"}),
    "pankrag_no_path": ("pankrag", {"plan": "direct", "scope": "specific"}),
    "lego_index": ("lego", {"graph": "index"}),
    "lightrag_hybrid_ner": ("lightrag", {"keywords": "ner", "mode": "hybrid"}),
    "clue_pooled_paths": ("clue", {"path_scoring": "pooled"}),
    "clue_mean_paths": ("clue", {"path_scoring": "mean"}),
}
"""The LLM-free settings of the methods whose defaults ask an LLM (as bench/llm_free.py runs
them), and Clue-RAG's other path scorings."""


def _llm_free(method: str, settings: dict) -> QueryConfig:
    cfg = query_config(method)
    for key, value in settings.items():
        setattr(cfg.options, key, value)
    return cfg


def _methods() -> list[tuple[str, str | QueryConfig]]:
    """(label, what --method takes) for every registered method, shipped config and LLM-free
    variant."""
    named: list[tuple[str, str | QueryConfig]] = [(name, name) for name in method_names()]
    named += [(label, _llm_free(m, kw)) for label, (m, kw) in LLM_FREE.items()]
    shipped = [
        (f"cfg_{stem}", str(REPO / "configs" / "methods" / f"{stem}.yaml")) for stem in CONFIGS
    ]
    return named + shipped


def _capture(index: Path, questions: Path | str, tmp: Path) -> dict[str, dict[str, list]]:
    """label -> qid -> [top-5 ids, sha256 of the context] for every method that ranks without
    an LLM on the index (one whose retrieval asks an LLM, or needs a part the index lacks, is
    left out)."""
    engine = Engine(index)
    out: dict[str, dict[str, list]] = {}
    for label, method in _methods():
        try:
            cfg = engine.config(method, retrieval_only=True)
            if cfg.method_llm_use():
                continue  # its retrieval asks an LLM (a shipped config may name one)
            run = engine.run(cfg, questions, tmp / label, label=label)
        except BadInputError:
            continue  # this method needs an LLM or an index part this index does not have
        out[label] = {
            row["qid"]: [
                row["retrieved_ids"][:5],
                hashlib.sha256("\n".join(row["context_text"]).encode()).hexdigest()[:16],
            ]
            for row in run.rows()
        }
    return out


@pytest.fixture(scope="module")
def captured(demo_index: Path, musique_subset: dict, tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("unchanged")
    return {
        "demo": _capture(demo_index, "demo", tmp / "demo"),
        "musique": _capture(musique_subset["index"], musique_subset["questions"], tmp / "mus"),
    }


def test_every_llm_free_method_retrieves_what_was_recorded(captured: dict) -> None:
    if RECORD:
        RECORDING.write_text(json.dumps(captured, indent=1, sort_keys=True) + "\n")
    recorded = json.loads(RECORDING.read_text())
    for corpus, methods in recorded.items():
        assert sorted(captured[corpus]) == sorted(methods), f"{corpus}: other methods ran"
        pairs = [(m, q) for m, rows in methods.items() for q in rows]
        moved = [
            f"{m} {q}: {captured[corpus][m].get(q)} (recorded {methods[m][q]})"
            for m, q in pairs
            if captured[corpus][m].get(q) != methods[m][q]
        ]
        assert len(moved) <= MOVED_SHARE * len(pairs), f"{corpus}: " + "\n".join(moved[:20])
    assert sum(len(rows) for m in recorded.values() for rows in m.values()) > 1000
