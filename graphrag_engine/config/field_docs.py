"""What a config dataclass says about its fields: each field's docstring (or the comment on its
line), read from the source, and a value as one line of YAML; the config references and the
method pages' settings tables are written from them."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
from functools import cache
from typing import Any

import yaml


@cache
def field_docs(cls: type) -> dict[str, str]:
    """Field name -> its docstring (or the comment on its line), for one dataclass; a field a
    subclass does not declare again keeps its base class's docstring."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if dataclasses.is_dataclass(klass) and klass is not object:
            docs.update(_own_field_docs(klass))
    return docs


def _own_field_docs(cls: type) -> dict[str, str]:
    source = textwrap.dedent(inspect.getsource(cls))
    lines = source.splitlines()
    body = ast.parse(source).body[0].body
    docs = {}
    for i, node in enumerate(body):
        if not isinstance(node, ast.AnnAssign) or not isinstance(node.target, ast.Name):
            continue
        nxt = body[i + 1] if i + 1 < len(body) else None
        if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant):
            docs[node.target.id] = " ".join(str(nxt.value.value).split())
        elif "#" in lines[node.end_lineno - 1]:
            docs[node.target.id] = lines[node.end_lineno - 1].split("#", 1)[1].strip()
    return docs


def scalar(value: Any) -> str:
    """A value as one line of YAML."""
    return (
        yaml.safe_dump(value, default_flow_style=True, width=10_000).strip().removesuffix("\n...")
    )
