"""Reading a YAML config file into its node tree, with line numbers kept and every way it can
be unreadable (missing, a folder, not UTF-8, not YAML, a key given twice) one ConfigError that
names the file and line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from graphrag_engine.errors import ConfigError


def compose_yaml(path: str | Path) -> yaml.Node | None:
    """The YAML node tree of a config file (line numbers kept), or a ConfigError naming it."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a folder; give the YAML config file inside it") from None
    except PermissionError:
        raise ConfigError(f"{path}: cannot read the config file (permission denied)") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason}); save it as UTF-8") from None
    try:
        node = yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}{line}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
    _refuse_duplicate_keys(path, node)
    return node


def _refuse_duplicate_keys(path: Path, node: yaml.Node | None) -> None:
    """A key given twice in one mapping is a ConfigError at its second line (YAML would keep
    the last one silently)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for k, v in n.value:
                if isinstance(k, yaml.ScalarNode):
                    line = k.start_mark.line + 1
                    if k.value in seen:
                        raise ConfigError(
                            f"{path}:{line}: key {k.value!r} is given twice in one section "
                            f"(first on line {seen[k.value]}); keep one"
                        )
                    seen[k.value] = line
                stack.append(v)
        elif isinstance(n, yaml.SequenceNode):
            stack.extend(n.value)
