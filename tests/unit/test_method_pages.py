"""Every registered method has its page in docs/methods/ that names the code implementing it
(each path it names exists) and says how it deviates from its paper."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

import pytest

from graphrag_engine.methods import method_names
from tests.paths import REPO

PAGES = REPO / "docs" / "methods"


def test_every_registered_method_has_a_page_with_its_deviations() -> None:
    index = (PAGES / "README.md").read_text()
    for name in method_names():
        page = PAGES / f"{name}.md"
        assert page.exists(), f"docs/methods/{name}.md is missing"
        text = page.read_text()
        assert "## Deviations and why" in text, name
        assert f"({name}.md)" in index, f"docs/methods/README.md does not link {name}.md"
        paths = re.findall(r"`((?:graphrag_engine|configs|bench|tests)/[^`\s:]+)", text)
        assert paths, f"{name}.md names no file"
        for path in paths:
            assert (REPO / path.rstrip("/")).exists() or list(REPO.glob(path)), (name, path)


def test_every_method_page_carries_its_current_settings_table() -> None:
    """Each page holds the table written from its method's config (defaults beside the
    paper's values), current; the methods whose papers or code publish settings name them."""
    from graphrag_engine.config.settings_tables import (
        BEGIN,
        END,
        NOT_GIVEN,
        setting_rows,
        settings_table,
    )
    from graphrag_engine.methods import query_config

    for name in method_names():
        text = (PAGES / f"{name}.md").read_text()
        assert BEGIN in text and END in text, name
        assert settings_table(query_config(name).options) in text, (
            f"{name}.md: stale settings; run `.venv/bin/python -m graphrag_engine.config_docs`"
        )
    published = (
        "rograg", "lego", "regraphrag", "pankrag", "clue", "linearrag", "hipporag", "lightrag",
        "graphrag_local", "graphrag_global",
    )  # fmt: skip
    for name in published:
        rows = setting_rows(query_config(name).options)
        assert sum(paper != NOT_GIVEN for _, _, paper, _ in rows) >= 2, name


def test_a_paper_value_for_a_key_the_config_lacks_is_refused() -> None:
    from graphrag_engine.config.settings_tables import setting_rows

    @dataclass
    class Made:
        PAPER: ClassVar[dict[str, str]] = {"top_n": "5 (Table 2)"}
        top_k: int = 3
        """How many."""

    with pytest.raises(ValueError, match="Made.PAPER names no field: top_n"):
        setting_rows(Made())


CLAIM = re.compile(r"`([a-z_][a-z_.]*): ([^`]+)`")


def test_a_page_that_calls_a_setting_the_default_names_the_default() -> None:
    """Prose may not drift from the table: a sentence that names one of the method's settings
    as `key: value` and calls it the default must give the default the config holds (a
    conditional default, "default when ...", is left to the table)."""
    from graphrag_engine.config.settings_tables import BEGIN, END, setting_rows
    from graphrag_engine.methods import query_config

    checked = 0
    for name in method_names():
        text = (PAGES / f"{name}.md").read_text()
        head, rest = text.split(BEGIN, 1)
        prose = head + rest.split(END, 1)[1]
        options = query_config(name).options
        defaults = {key: value for key, value, _, _ in setting_rows(options)} if options else {}
        for part in re.split(r"\n\s*\n|\n- |\n\| ", prose):
            for sentence in re.split(r"(?<=[.;])\s+", " ".join(part.split())):
                claims = [(k, v) for k, v in CLAIM.findall(sentence) if k in defaults]
                if "default" not in sentence or "default when" in sentence or len(claims) != 1:
                    continue
                (key, value), checked = claims[0], checked + 1
                assert value == defaults[key], f"{name}.md: `{key}: {value}` ({sentence[:80]})"
    assert checked >= 5


def test_every_default_that_is_not_the_papers_is_stated_as_a_deviation() -> None:
    """A setting whose engine default differs from the value its paper gives is named, by its
    key, under the page's `## Deviations and why`; a method named after a paper runs that
    paper unless its page says where and why it does not."""
    from graphrag_engine.config.settings_tables import deviations
    from graphrag_engine.methods import query_config

    unstated = []
    for name in method_names():
        options = query_config(name).options
        if options is None:
            continue
        section = (PAGES / f"{name}.md").read_text().split("## Deviations and why", 1)[-1]
        for key, default, paper in deviations(options):
            if f"`{key}" not in section and f"`{key.rsplit('.', 1)[-1]}" not in section:
                unstated.append(f"{name}.{key}: {default}, the paper {paper}")
    assert not unstated, "defaults not stated as deviations: " + "; ".join(unstated)


def test_a_paper_value_is_read_as_the_value_it_opens_with() -> None:
    from graphrag_engine.config.settings_tables import paper_value

    assert paper_value("8,000 (GraphRAG's code)") == "8000"
    assert paper_value("text (Algorithm 3 line 13)") == "text"
    assert paper_value("none: igraph's PPR solver") == "none"
    assert paper_value("`vector`; by query type") == "vector"
