"""The method registry and the answer stage's seams: every method is reachable by name with its
own config section, a method registered from outside the engine runs end to end without
touching anything central, preset answers skip generation, and whole sections are never cut."""

from __future__ import annotations

import pytest

from graphrag_engine.errors import ConfigError
from graphrag_engine.methods import METHODS, load_query_config, method_names, query_config
from tests.paths import REPO

BUILT_IN = {"none", "naive", "bm25", "hyde", "hipporag", "clue", "lego"}


def test_every_built_in_method_is_registered_and_listed(run_cli) -> None:
    assert BUILT_IN <= set(method_names())
    res = run_cli("methods")
    assert res.returncode == 0
    listed = {line.split()[0] for line in res.stdout.splitlines()}
    assert listed == set(method_names())
    help_text = run_cli("query", "--help").stdout
    assert all(name in help_text for name in BUILT_IN)
    bad = run_cli("query", "none", "demo", "--method", "nope", "--out", "/tmp/never")
    assert bad.returncode == 2 and "lego" in bad.stderr and "hipporag" in bad.stderr


def test_a_method_section_is_its_own_config(tmp_path) -> None:
    off = "generation:\n  enabled: false\n"
    assert query_config("clue").options.depth == 3 and query_config("bm25").options is None
    own = tmp_path / "ok.yaml"
    own.write_text("method: clue\nclue:\n  depth: 2\n" + off)
    assert load_query_config(own).options.depth == 2
    other = tmp_path / "other.yaml"
    other.write_text("method: lego\nclue:\n  depth: 2\n")
    with pytest.raises(ConfigError, match=r"other.yaml:2: unknown key 'clue'"):
        load_query_config(other)
    bad = tmp_path / "bad.yaml"
    bad.write_text("method: clue\nclue:\n  depth: 0\n" + off)
    with pytest.raises(ConfigError, match=r"bad.yaml:3: key 'clue.depth' must be >= 1"):
        load_query_config(bad)
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("retrieval:\n  top_k: 3\nmethod: nope\n")
    with pytest.raises(ConfigError, match=r"unknown.yaml:3: unknown method 'nope'"):
        load_query_config(unknown)


def test_every_shipped_query_config_loads() -> None:

    root = REPO / "configs"
    files = sorted([*root.glob("methods/*.yaml"), *root.glob("lego/**/*.yaml")])
    assert len(files) >= 45
    for f in files:
        cfg = load_query_config(f)
        assert cfg.method in METHODS, f
        spec = METHODS[cfg.method]
        assert (cfg.options is None) == (spec.config is None), f
