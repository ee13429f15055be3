"""Every registered method has its page in docs/methods/ that names the code implementing it
(each path it names exists) and says how it deviates from its paper."""

from __future__ import annotations

import re

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
