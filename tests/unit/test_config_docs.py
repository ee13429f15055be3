"""Every config key is documented: configs/index.yaml and configs/reference/<method>.yaml are
written from the config dataclasses (a field without a docstring cannot be written), are
current, and load back to the defaults they claim."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from graphrag_engine.config import IndexConfig, load_config
from graphrag_engine.config_docs import main, reference_query_config, references, section_lines
from graphrag_engine.methods import load_query_config, method_names


def test_reference_configs_are_current() -> None:
    assert main(["--check"]) == 0, (
        "run `.venv/bin/python -m graphrag_engine.config_docs` and commit"
    )


def test_every_registered_method_has_a_reference_that_loads_to_its_defaults() -> None:
    paths = {p.stem: p for p in references() if p.parent.name == "reference"}
    assert set(paths) == set(method_names())
    for name, path in paths.items():
        assert load_query_config(path).to_dict() == reference_query_config(name).to_dict()
    index = next(p for p in references() if p.name == "index.yaml")
    assert load_config(index).to_dict() == IndexConfig().to_dict()


def test_every_key_of_every_section_is_in_the_files() -> None:
    text = "\n".join(references().values())
    for section in ("ingest", "chunking", "graph", "extraction", "communities", "models"):
        assert f"\n{section}:" in text
    for key in ("read_timeout_s", "gpu_memory_utilization", "expand_low_keys", "beam_width"):
        assert f" {key}: " in text


def test_a_field_without_a_docstring_cannot_be_written() -> None:
    @dataclass
    class Undocumented:
        """A section."""

        documented: int = 1
        """Says what it is."""
        bare: int = 2

    with pytest.raises(ValueError, match="Undocumented.bare has no docstring"):
        section_lines(Undocumented())


def test_every_shipped_index_config_loads() -> None:
    """configs/index*.yaml (the reference and the papers' settings) load and validate; the
    Clue-RAG paper config sets the paper's alpha = 1 with an LLM to write the units."""
    from tests.paths import REPO

    paths = sorted((REPO / "configs").glob("index*.yaml"))
    assert len(paths) >= 2
    loaded = {p.name: load_config(p) for p in paths}
    clue = loaded["index-clue-paper.yaml"]
    assert clue.graph.alpha == 1.0 and clue.models.llm.backend != "none"
