"""Configs: YAML into typed objects; unknown keys and wrong types rejected with file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphrag_engine.config import IndexConfig, load_config
from graphrag_engine.errors import ConfigError
from tests.paths import REPO


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cfg.yaml"
    path.write_text(text)
    return path


def test_shipped_config_loads_and_equals_defaults() -> None:
    cfg = load_config(REPO / "configs" / "index.yaml")
    assert isinstance(cfg, IndexConfig)
    assert cfg == IndexConfig()
    assert cfg.config_hash() == IndexConfig().config_hash()


def test_values_are_typed(tmp_path: Path) -> None:
    cfg = load_config(
        write(
            tmp_path,
            "chunking:\n  chunk_tokens: 64\n  overlap_tokens: 8\ningest:\n  text_field: body\n",
        )
    )
    assert cfg.chunking.chunk_tokens == 64 and cfg.chunking.overlap_tokens == 8
    assert cfg.ingest.text_field == "body"
    assert cfg.config_hash() != IndexConfig().config_hash()


def test_unknown_key_names_key_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "chunking:\n  chunk_tokens: 64\n  chunk_tokenz: 3\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    msg = str(err.value)
    assert f"{path}:3" in msg and "chunking.chunk_tokenz" in msg and "chunk_tokens" in msg


def test_unknown_top_level_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cfg.yaml:1: unknown key 'chunkin'"):
        load_config(write(tmp_path, "chunkin: {}\n"))


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        (
            "chunking:\n  chunk_tokens: lots\n",
            r":2: key 'chunking.chunk_tokens' must be int, got str",
        ),
        ("chunking:\n  chunk_tokens: 1.5\n", r"must be int, got float"),
        ("ingest:\n  skip_bad: 1\n", r"key 'ingest.skip_bad' must be bool, got int"),
        ("executor: spark\n", r"key 'executor' must be one of 'local', 'ray', got 'spark'"),
        ("chunking: [1, 2]\n", r"chunking must be a mapping"),
        (
            "chunking:\n  chunk_tokens: 100\n  overlap_tokens: 100\n",
            r"overlap_tokens must be in \[0, chunk_tokens\)",
        ),
        ("chunking: {chunk_tokens: 64\n", r"not valid YAML"),
    ],
)
def test_bad_values_rejected(tmp_path: Path, text: str, pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        load_config(write(tmp_path, text))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")


def test_llm_yaml_writes_a_section_that_loads_back(tmp_path: Path) -> None:
    from graphrag_engine.models import llm_yaml

    section = llm_yaml(backend="transformers", batch_size=16, device="cpu")
    cfg = load_config(write(tmp_path, "graph:\n  alpha: 0.5\n" + section))
    assert (cfg.models.llm.backend, cfg.models.llm.batch_size) == ("transformers", 16)
    assert cfg.graph.alpha == 0.5
    with pytest.raises(ConfigError, match="no key 'batchsize'"):
        llm_yaml(backend="transformers", batchsize=16)


def test_a_key_given_twice_is_refused_with_its_line(tmp_path) -> None:
    """YAML keeps the last of two equal keys without a word; the config loader refuses."""
    cfg = tmp_path / "index.yaml"
    cfg.write_text("graph:\n  alpha: 0\n  embed: true\n  alpha: 0.5\n")
    with pytest.raises(ConfigError, match=r"index.yaml:4: key 'alpha' is given twice .*line 2"):
        load_config(cfg, IndexConfig)
    cfg.write_text("graph:\n  alpha: 0\nmodels:\n  llm:\n    backend: none\n")
    assert load_config(cfg, IndexConfig).graph.alpha == 0
