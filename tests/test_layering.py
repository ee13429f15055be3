"""The engine's layering, checked on the source: dependencies point one way (cli/jobs -> engine
-> kernels; inside engine, methods -> retrieve -> models/store, index -> models/store), there is
no import cycle between engine's folders, and imports sit at the top of modules unless a
comment on the line says why not (an optional heavy dependency)."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

REPO = Path(__file__).resolve().parents[1]

FORBIDDEN = {  # importer folder -> folders it must never import
    "kernels": {"engine"},
    "engine.models": {
        "engine.index",
        "engine.retrieve",
        "engine.methods",
        "engine.eval",
        "engine.exec",
    },
    "engine.store": {"engine.index", "engine.retrieve", "engine.methods", "engine.models"},
    "engine.retrieve": {"engine.methods", "engine.index", "engine.eval", "engine.exec"},
    "engine.index": {"engine.retrieve", "engine.methods", "engine.eval"},
    "engine.exec": {"engine.index", "engine.retrieve", "engine.methods"},
}
LAZY_OK = {"engine/cli.py"}
"""The thin front door imports each command's modules inside the command, so `--help` and
`info` start without loading torch."""


def _unit(module: str) -> str:
    """The folder a module belongs to: `engine.retrieve.dense` -> `engine.retrieve`;
    top-level modules (`engine.config`) are their own unit."""
    parts = module.split(".")
    if parts[0] == "kernels":
        return "kernels"
    return ".".join(parts[:2])


def _imports() -> list[tuple[str, str, int, bool, str]]:
    """(importer module, imported module, line, at top level, line text) for every import of
    engine or kernels in engine/ and kernels/."""
    out = []
    for path in sorted([*REPO.glob("engine/**/*.py"), *REPO.glob("kernels/**/*.py")]):
        rel = path.relative_to(REPO)
        module = ".".join(rel.with_suffix("").parts).removesuffix(".__init__")
        source = path.read_text()
        lines = source.splitlines()
        tree = ast.parse(source)
        top = {id(n) for n in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                if name.split(".")[0] in ("engine", "kernels"):
                    out.append((module, name, node.lineno, id(node) in top, lines[node.lineno - 1]))
    return out


IMPORTS = _imports()


@pytest.mark.parametrize("importer", sorted(FORBIDDEN))
def test_no_upward_imports(importer: str) -> None:
    bad = [
        f"{m}:{line} imports {name}"
        for m, name, line, _, _ in IMPORTS
        if _unit(m) == importer and _unit(name) in FORBIDDEN[importer]
    ]
    assert not bad, "\n".join(bad)


def test_no_cycles_between_engine_folders() -> None:
    g = nx.DiGraph()
    for m, name, _, _, _ in IMPORTS:
        a, b = _unit(m), _unit(name)
        if a != b and name != "engine":
            g.add_edge(a, b)
    cycles = list(nx.simple_cycles(g))
    assert not cycles, cycles


def test_imports_at_the_top_unless_the_line_says_why() -> None:
    bad = [
        f"{m}:{line}: {text.strip()}"
        for m, _, line, top, text in IMPORTS
        if not top and "#" not in text and m.replace(".", "/") + ".py" not in LAZY_OK
    ]
    assert not bad, "\n".join(bad)


def test_the_checker_sees_a_violation(tmp_path) -> None:
    """The walk above finds imports nested in functions and classes, not only top-level ones."""
    tree = ast.parse("def f():\n    from engine.methods import run\n")
    found = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert found and found[0].module == "engine.methods" and found[0] not in tree.body
    assert _unit("engine.retrieve.dense") == "engine.retrieve" and _unit("kernels.ppr") == "kernels"
