"""Every command that writes an index into `--out` (index, index --add, reindex, import)
leaves the user's own entries there, even those named like the engine's (gen-*,
.staging-*), and still builds a readable index beside them."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphrag_engine.cli import main
from graphrag_engine.demo import corpus_path
from graphrag_engine.store import open_index

TEXT_ONLY = "graph:\n  enabled: false\n"
"""No graph stages: these tests are about the folder, not the models."""
MINE = {
    "gen-notes/keep.txt": "notes",
    ".staging-mine/keep.txt": "staged by the user",
    "gen-000001/mine.txt": "named like a generation",
}


def _seed(out: Path) -> None:
    for rel, text in MINE.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text)


def _kept(out: Path) -> None:
    for rel, text in MINE.items():
        assert (out / rel).read_text() == text, f"{rel} was removed or changed"
    assert open_index(out).rows("documents") > 0


@pytest.mark.parametrize("verb", ["index", "add", "reindex"])
def test_building_verbs_keep_the_users_entries(verb: str, tmp_path: Path) -> None:
    out, config = tmp_path / "u", tmp_path / "text.yaml"
    config.write_text(TEXT_ONLY)
    _seed(out)
    corpus = str(corpus_path())
    args = {
        "index": ["index", corpus],
        "add": ["index", corpus, "--add"],
        "reindex": ["reindex", corpus],
    }[verb]
    if verb != "index":  # the verb runs over an index built earlier into the same folder
        assert main(["index", corpus, "--out", str(out), "--config", str(config)]) == 0
    assert main([*args, "--out", str(out), "--config", str(config)]) == 0
    _kept(out)


def test_import_keeps_the_users_entries(shared_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "u"
    _seed(out)
    assert main(["import", str(shared_data / "graphrag_output"), "--out", str(out)]) == 0
    _kept(out)
