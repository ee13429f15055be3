"""`graphrag-engine query` on real data: the baselines agree with reference implementations,
runs resume after a kill, and results hold everything eval needs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.paths import REPO


@pytest.mark.parametrize("path", sorted((REPO / "configs" / "methods").glob("*.yaml")))
def test_method_configs_load(path: Path) -> None:
    from graphrag_engine.methods import load_query_config

    cfg = load_query_config(path)
    # clue_no_*.yaml are ablations of clue, lightrag_ner.yaml a variant of lightrag
    assert path.stem == cfg.method or path.stem.startswith(cfg.method + "_")
