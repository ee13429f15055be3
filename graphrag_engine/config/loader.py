"""Loading YAML into the config dataclasses: an unknown key, a value of the wrong type or a
number outside its range (config/ranges.py) is rejected with the file, the line and the dotted
key, so a typo never silently falls back to a default."""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml

from graphrag_engine.config.ranges import out_of_range
from graphrag_engine.config.sections import IndexConfig
from graphrag_engine.config.yaml_files import compose_yaml
from graphrag_engine.errors import ConfigError

T = TypeVar("T")


def load_config(
    path: str | Path | None,
    cls: type[T] = IndexConfig,  # type: ignore[assignment]
    sections: dict[str, type] | None = None,
) -> T:
    """Load a YAML file into `cls`, or return the defaults when `path` is None. `sections`
    maps a top-level YAML key to the dataclass of `cls`'s section field (a method's options)."""
    if path is None:
        obj = cls()
        if hasattr(obj, "validate"):
            obj.validate("<defaults>")
        return obj
    node = compose_yaml(path)
    obj = _build(cls, node, str(path), "", sections)
    if hasattr(obj, "validate"):
        obj.validate(str(path))
    return obj


def top_level_scalar(node: yaml.Node | None, key: str) -> tuple[Any, str | None]:
    """The value of a top-level scalar key and its line ("file:line" is the caller's), or
    (None, None) when the key is absent."""
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if k.value == key and isinstance(v, yaml.ScalarNode):
                return _scalar(v), str(v.start_mark.line + 1)
    return None, None


def _where(file: str, node: yaml.Node | None) -> str:
    return f"{file}:{node.start_mark.line + 1}" if node is not None else file


def _build(
    cls: type,
    node: yaml.Node | None,
    file: str,
    prefix: str,
    sections: dict[str, type] | None = None,
) -> Any:
    """Turn a YAML mapping node into dataclass `cls`, checking every key and type. A key of
    `sections` fills `cls`'s section field (metadata `section`) with that key's dataclass;
    a section absent from the file gets that dataclass's defaults."""
    sections = sections or {}
    all_fields = dataclasses.fields(cls)
    section_field = next((f.name for f in all_fields if f.metadata.get("section")), None)
    fields = {f.name: f for f in all_fields if not f.metadata.get("section")}
    values: dict[str, Any] = {}
    if section_field is not None and len(sections) == 1:
        values[section_field] = next(iter(sections.values()))()
    if node is None or (isinstance(node, yaml.ScalarNode) and node.tag.endswith(":null")):
        return cls(**values)
    if not isinstance(node, yaml.MappingNode):
        what = prefix.rstrip(".") or "the top level"
        raise ConfigError(f"{_where(file, node)}: {what} must be a mapping of keys to values")
    hints = typing.get_type_hints(cls)
    for key_node, value_node in node.value:
        key = key_node.value
        dotted = f"{prefix}{key}"
        if key in sections and section_field is not None:
            values[section_field] = _build(sections[key], value_node, file, dotted + ".")
            continue
        if key not in fields:
            known = ", ".join(sorted([*fields, *sections]))
            raise ConfigError(
                f"{_where(file, key_node)}: unknown key '{dotted}' (known keys: {known})"
            )
        values[key] = _convert(hints[key], value_node, file, dotted)
        if spec := out_of_range(cls, key, values[key]):
            raise ConfigError(
                f"{_where(file, value_node)}: key '{dotted}' must be {spec}, got {values[key]}"
            )
    return cls(**values)


def _convert(tp: Any, node: yaml.Node, file: str, dotted: str) -> Any:
    """Convert one YAML node to type `tp` or raise a ConfigError naming the key."""
    where = _where(file, node)
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        return _build(tp, node, file, dotted + ".")
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if type(None) in args and isinstance(node, yaml.ScalarNode) and node.tag.endswith(":null"):
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(arg, node, file, dotted)
            except ConfigError:
                continue
        raise ConfigError(f"{where}: key '{dotted}' must be {_type_name(tp)}")
    if origin is list:
        if not isinstance(node, yaml.SequenceNode):
            raise ConfigError(f"{where}: key '{dotted}' must be a list, got {_describe(node)}")
        (item_tp,) = typing.get_args(tp) or (Any,)
        return [_convert(item_tp, n, file, f"{dotted}[{i}]") for i, n in enumerate(node.value)]
    if origin is dict:
        if not isinstance(node, yaml.MappingNode):
            raise ConfigError(f"{where}: key '{dotted}' must be a mapping, got {_describe(node)}")
        _, val_tp = typing.get_args(tp) or (str, Any)
        return {k.value: _convert(val_tp, v, file, f"{dotted}.{k.value}") for k, v in node.value}
    if origin is Literal:
        allowed = typing.get_args(tp)
        value = _scalar(node)
        if value not in allowed:
            choices = ", ".join(repr(a) for a in allowed)
            raise ConfigError(f"{where}: key '{dotted}' must be one of {choices}, got {value!r}")
        return value
    if tp is Any:
        return yaml.safe_load(yaml.serialize(node))
    if not isinstance(node, yaml.ScalarNode):
        raise ConfigError(
            f"{where}: key '{dotted}' must be {_type_name(tp)}, got {_describe(node)}"
        )
    value = _scalar(node)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp in (str, int, float, bool) and (type(value) is not tp):
        raise ConfigError(
            f"{where}: key '{dotted}' must be {_type_name(tp)}, got {_describe(node)} {node.value!r}"
        )
    return value


def _scalar(node: yaml.Node) -> Any:
    return yaml.safe_load(yaml.serialize(node))


def _describe(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    value = _scalar(node)
    return "null" if value is None else type(value).__name__


def _type_name(tp: Any) -> str:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    return getattr(tp, "__name__", str(tp))
