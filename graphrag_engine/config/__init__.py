"""Typed configuration: YAML files loaded into dataclasses and validated strictly (the index
config's sections, the query config, the one declaration of each setting's range)."""

from graphrag_engine.config.loader import load_config, top_level_scalar
from graphrag_engine.config.sections import (
    ChunkingConfig,
    CommunitiesConfig,
    EmbedderConfig,
    ExtractionConfig,
    GraphConfig,
    IndexConfig,
    IngestConfig,
    LLMConfig,
    ModelsConfig,
    RerankerConfig,
)
from graphrag_engine.config.yaml_files import compose_yaml

__all__ = [
    "ChunkingConfig",
    "CommunitiesConfig",
    "EmbedderConfig",
    "ExtractionConfig",
    "GraphConfig",
    "IndexConfig",
    "IngestConfig",
    "LLMConfig",
    "ModelsConfig",
    "RerankerConfig",
    "compose_yaml",
    "load_config",
    "top_level_scalar",
]
