"""Methods: one small file each, registered by name with its config and answer prompt (see
base.py). This package imports them all, so the registry below knows every method."""

from __future__ import annotations

from pathlib import Path

from graphrag_engine.config import compose_yaml, load_config, top_level_scalar
from graphrag_engine.config.query import QueryConfig
from graphrag_engine.errors import ConfigError
from graphrag_engine.methods import (  # noqa: F401  (register them)
    baselines,
    clue_rag,
    drift,
    graphrag_global,
    graphrag_local,
    hipporag,
    ketrag,
    lazygraphrag,
    lego,
    lightrag,
    linearrag,
    pankrag,
    raptor,
    regraphrag,
    rograg,
    sirerag,
)
from graphrag_engine.methods.base import METHODS, MethodSpec


def method_names() -> list[str]:
    """Every registered method name, in registration order."""
    return list(METHODS)


def method_spec(name: str, where: str = "--method") -> MethodSpec:
    """The registered method `name`, or a ConfigError listing the known ones."""
    if name not in METHODS:
        raise ConfigError(
            f"{where}: unknown method {name!r}; registered methods: {', '.join(METHODS)} "
            "(`graphrag-engine methods` describes them)"
        )
    return METHODS[name]


def _sections(spec: MethodSpec) -> dict[str, type]:
    return {spec.name: spec.config} if spec.config is not None else {}


def query_config(name: str) -> QueryConfig:
    """The default query config of method `name` (its section with its defaults)."""
    spec = method_spec(name)
    return QueryConfig(method=name, options=spec.config() if spec.config else None)


def load_query_config(path: str | Path) -> QueryConfig:
    """A query config YAML: its `method:` resolved through the registry, the method's own
    section (under the method's name) built and validated by the method's config class."""
    node = compose_yaml(path)
    name, line = top_level_scalar(node, "method")
    where = f"{path}:{line}" if line else str(path)
    spec = method_spec(name if name is not None else QueryConfig.method, where)
    return load_config(path, QueryConfig, _sections(spec))
