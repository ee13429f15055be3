"""Settings and names a careful user can get wrong are refused up front: every numeric setting
outside its documented range (file:line, exit 2), and run labels that are not safe file names."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from graphrag_engine.api import _check_label
from graphrag_engine.cli import main
from graphrag_engine.config import IndexConfig, load_config
from graphrag_engine.errors import BadInputError, ConfigError
from graphrag_engine.methods import METHODS, load_query_config, query_config
from graphrag_engine.setting_ranges import BOUND, INTERVAL, range_of, within


def numeric_keys(obj, prefix: str = "") -> list[tuple[str, str]]:
    """(dotted key, range) of every numeric field of config dataclass `obj`, nested; a
    method's own section under the method's name."""
    keys = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            name = obj.method if f.metadata.get("section") else f.name
            keys += numeric_keys(value, f"{prefix}{name}.")
        elif (spec := range_of(type(obj), f.name)) and spec != "any":
            keys.append((prefix + f.name, spec))
    return keys


def outside(spec: str) -> float:
    """A number just outside range `spec`."""
    if m := INTERVAL.fullmatch(spec):
        return float(m[2]) if m[1] == "(" else float(m[2]) - 1
    m = BOUND.fullmatch(spec)
    return float(m[2]) if m[1] == ">" else float(m[2]) - 1


def as_yaml(dotted: str, value: float, head: str = "") -> tuple[str, int]:
    """A YAML text setting `dotted` to `value`, and the line the value is on."""
    parts = dotted.split(".")
    lines = head.splitlines() + [f"{'  ' * i}{p}:" for i, p in enumerate(parts[:-1])]
    number = int(value) if value == int(value) else value
    lines.append(f"{'  ' * (len(parts) - 1)}{parts[-1]}: {number}")
    return "\n".join(lines) + "\n", len(lines)


INDEX_KEYS = numeric_keys(IndexConfig())
QUERY_KEYS = sorted(
    {(name, key, spec) for name in METHODS for key, spec in numeric_keys(query_config(name))}
)


def test_every_numeric_setting_has_a_range_that_its_default_meets() -> None:
    for key, spec in INDEX_KEYS:
        value = IndexConfig()
        for part in key.split("."):
            value = getattr(value, part)
        assert value is None or within(value, spec), (key, spec, value)
    assert len(INDEX_KEYS) > 30 and len(QUERY_KEYS) > 100


@pytest.mark.parametrize(("key", "spec"), INDEX_KEYS, ids=[k for k, _ in INDEX_KEYS])
def test_an_index_setting_out_of_range_is_refused_at_its_line(tmp_path: Path, key, spec) -> None:
    text, line = as_yaml(key, outside(spec))
    path = tmp_path / "index.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(path, IndexConfig)
    assert f"{path}:{line}: key '{key}' must be {spec}" in str(err.value)


@pytest.mark.parametrize(
    ("method", "key", "spec"), QUERY_KEYS, ids=[f"{m}:{k}" for m, k, _ in QUERY_KEYS]
)
def test_a_query_setting_out_of_range_is_refused_at_its_line(tmp_path: Path, method, key, spec):
    text, line = as_yaml(key, outside(spec), head=f"method: {method}")
    path = tmp_path / "q.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_query_config(path)
    assert f"{path}:{line}: key '{key}' must be {spec}" in str(err.value)


def test_settings_from_the_issue_exit_2_with_file_and_line(tmp_path: Path, capsys) -> None:
    """concurrency 0, a negative answer length, timeout, gleaning, budget or re-ask count."""
    cases = {
        "models:\n  llm:\n    concurrency: 0\n": "models.llm.concurrency' must be >= 1",
        "generation:\n  max_tokens: -5\n": "generation.max_tokens' must be >= 1",
        "models:\n  llm:\n    read_timeout_s: -1.0\n": "read_timeout_s' must be > 0",
        "models:\n  llm:\n    max_retries: -2\n": "max_retries' must be >= 0",
        "generation:\n  max_context_tokens: 0\n": "max_context_tokens' must be >= 1",
        "lightrag:\n  entity_tokens: -100\n": "lightrag.entity_tokens' must be >= 0",
    }
    for body, message in cases.items():
        cfg = tmp_path / "m.yaml"
        cfg.write_text("method: lightrag\n" + body)
        args = [
            "query",
            "none",
            "demo",
            "--method",
            str(cfg),
            "--out",
            str(tmp_path / "r"),
        ]
        assert main(args) == 2
        err = capsys.readouterr().err
        assert f"{cfg}:" in err and message in err, err
    for body in ("extraction:\n  gleaning: -1\n", "graph:\n  unit_max_tokens: 0\n"):
        cfg = tmp_path / "i.yaml"
        cfg.write_text(body)
        assert main(["index", "--demo", "--out", str(tmp_path / "idx"), "--config", str(cfg)]) == 2
        assert f"{cfg}:" in capsys.readouterr().err
        assert not (tmp_path / "idx").exists()


def test_a_config_built_in_code_is_checked_too() -> None:
    cfg = query_config("bm25")
    cfg.batch_size = 0
    with pytest.raises(ConfigError, match="batch_size must be >= 1, got 0"):
        cfg.validate("bm25")
    cfg = query_config("rograg")
    cfg.options.floor = 2.0
    with pytest.raises(ConfigError, match=r"rograg.floor must be \[-1, 1\], got 2.0"):
        cfg.validate("rograg")


@pytest.mark.parametrize("label", ["bm25", "bm25 full", "rograg-28k", "a.b_c+d", "x" * 64])
def test_safe_labels_are_kept(label: str) -> None:
    assert _check_label(label) == label


@pytest.mark.parametrize(
    "label", ["..", ".", "", " a", "a ", "x/y", "a|b", "a\nb", "a\tb", "x" * 65, "../up", "-rf"]
)
def test_labels_that_are_no_safe_file_name_are_refused(label: str) -> None:
    with pytest.raises(BadInputError, match="--label"):
        _check_label(label)
