"""Dense retrieval: cosine top-k of query vectors against the chunk vectors of the index."""

from __future__ import annotations

import numpy as np

from graphrag_engine.kernels.similarity import cosine_matrix
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.ranking import ChunkRanking
from graphrag_engine.retrieve.vector_search import nearest


def dense_search(ctx: QueryContext, query_vectors: np.ndarray, k: int) -> ChunkRanking:
    """Top-k chunks of every query vector in one vector-search call."""
    scores, ids = nearest(ctx, "chunk_vectors", query_vectors, k)
    return ChunkRanking(ids, np.where(ids >= 0, scores, 0.0).astype(np.float32))


def dense_scores(ctx: QueryContext, query_vectors: np.ndarray) -> np.ndarray:
    """Full (B, n_chunks) cosine matrix, for methods that mix it with other scores."""
    return cosine_matrix(query_vectors, np.asarray(ctx.chunk_vectors))
