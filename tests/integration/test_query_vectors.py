"""Question vectors embedded elsewhere (the Ray query job's pipeline) are what `encode_queries`
returns for those texts, without loading the embedder; other texts are embedded as before; a
vector of another model than the index's is refused; a text is embedded once per run."""

from __future__ import annotations

import numpy as np
import pytest

from graphrag_engine.errors import BadInputError
from graphrag_engine.methods import query_config
from graphrag_engine.models.embed import query_encoder
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.store import open_index


def test_preset_vectors_answer_without_the_embedder(demo_index, tmp_path) -> None:
    index = open_index(demo_index)
    built = index.manifest["models"]["embedder"]
    texts = ["Who founded the city?", "Which river runs through it?"]
    given = np.eye(2, 384, dtype=np.float32)

    ctx = QueryContext(index, query_config("naive"), tmp_path / "a")
    ctx.preset_query_vectors(texts, given, built)
    assert np.array_equal(ctx.encode_queries(texts[::-1]), given[::-1])
    assert "embedder" not in ctx.__dict__  # nothing loaded for texts it was given

    other = "When was the bridge built?"
    mixed = ctx.encode_queries([texts[0], other, texts[0]])
    reference = QueryContext(index, query_config("naive"), tmp_path / "b").encode_queries([other])
    assert np.array_equal(mixed[[0, 2]], given[[0, 0]])
    np.testing.assert_allclose(mixed[1], reference[0], atol=1e-6)

    with pytest.raises(BadInputError, match="embedded with"):
        ctx.preset_query_vectors(texts, given, "sentence-transformers:another-model")


def test_a_text_is_embedded_once_per_run(demo_index, tmp_path) -> None:
    """Steps that ask again for a text (a subquery that is its question) get the vector the
    run embedded first, without a call to the embedder; a new text is embedded alone."""
    ctx = QueryContext(open_index(demo_index), query_config("naive"), tmp_path)
    first = ctx.encode_queries(["Who founded the city?", "Who founded the city?"])
    assert np.array_equal(first[0], first[1])
    calls = []

    class Counted:  # the run's own embedder, its calls written down
        def encode(self, texts: list[str]) -> np.ndarray:
            calls.append(list(texts))
            return query_encoder(real)(texts)

    real, ctx.__dict__["embedder"] = ctx.embedder, Counted()
    again = ctx.encode_queries(["When was the bridge built?", "Who founded the city?"])
    assert calls == [["When was the bridge built?"]]
    assert np.array_equal(again[1], first[0])
