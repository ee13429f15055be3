"""The package's layering, checked on the source: dependencies point one way (cli/jobs ->
graphrag_engine -> graphrag_engine.kernels; inside it, methods -> retrieve -> models/store, index
-> models/store), kernels import nothing else of the package, no method folder imports another
method's folder, there is no import cycle between the package's folders, no file edits
`sys.path`, and imports sit at the top of modules unless a comment on the line says why not (an
optional heavy dependency)."""

from __future__ import annotations

import ast

import networkx as nx
import pytest

from tests.paths import REPO

PKG = "graphrag_engine"
FOLDERS = (
    "index",
    "retrieve",
    "methods",
    "query",
    "eval",
    "exec",
    "models",
    "store",
    "kernels",
    "config",
)
FORBIDDEN = {  # importer folder -> folders it must never import
    "graphrag_engine.kernels": {f"graphrag_engine.{f}" for f in FOLDERS if f != "kernels"}
    | {"graphrag_engine"},
    "graphrag_engine.models": {
        "graphrag_engine.query",
        "graphrag_engine.index",
        "graphrag_engine.retrieve",
        "graphrag_engine.methods",
        "graphrag_engine.eval",
        "graphrag_engine.exec",
    },
    "graphrag_engine.store": {
        "graphrag_engine.query",
        "graphrag_engine.index",
        "graphrag_engine.retrieve",
        "graphrag_engine.methods",
        "graphrag_engine.models",
    },
    "graphrag_engine.retrieve": {
        "graphrag_engine.query",
        "graphrag_engine.methods",
        "graphrag_engine.index",
        "graphrag_engine.eval",
        "graphrag_engine.exec",
    },
    "graphrag_engine.index": {
        "graphrag_engine.query",
        "graphrag_engine.retrieve",
        "graphrag_engine.methods",
        "graphrag_engine.eval",
    },
    "graphrag_engine.exec": {
        "graphrag_engine.query",
        "graphrag_engine.index",
        "graphrag_engine.retrieve",
        "graphrag_engine.methods",
    },
}
FORBIDDEN["graphrag_engine.methods"] = {"graphrag_engine.query"}
FORBIDDEN["graphrag_engine.config"] = {
    f"graphrag_engine.{f}" for f in FOLDERS if f not in ("config", "kernels")
}
LAZY_OK = {"graphrag_engine/cli/index_commands.py", "graphrag_engine/cli/query_commands.py"}
"""The thin front door imports each command's modules inside the command, so `--help` and
`info` start without loading torch."""


def _unit(module: str) -> str:
    """The folder a module belongs to: `graphrag_engine.retrieve.dense` ->
    `graphrag_engine.retrieve`; top-level modules (`graphrag_engine.config`) are their own unit
    and the package itself (its lazy `__init__`) is `graphrag_engine`."""
    return ".".join(module.split(".")[:2])


def _method_folder(module: str) -> str | None:
    """The method folder a module lies in (`graphrag_engine.methods.rograg.values` ->
    `graphrag_engine.methods.rograg`), or None outside one."""
    parts = module.split(".")
    if parts[:2] != [PKG, "methods"] or len(parts) < 3:
        return None
    folder = REPO.joinpath(*parts[:3])
    return ".".join(parts[:3]) if folder.is_dir() else None


def _imports() -> list[tuple[str, str, int, bool, str]]:
    """(importer module, imported module, line, at top level, line text) for every import of
    engine or kernels in engine/ and kernels/."""
    out = []
    for path in sorted(REPO.glob(f"{PKG}/**/*.py")):
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
                if name.split(".")[0] == PKG:
                    text = "\n".join(lines[node.lineno - 1 : node.end_lineno])
                    out.append((module, name, node.lineno, id(node) in top, text))
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
        if a != b and name != PKG:
            g.add_edge(a, b)
    cycles = list(nx.simple_cycles(g))
    assert not cycles, cycles


def test_no_import_circle_between_modules() -> None:
    """No module reaches itself through imports (type-only and in-function ones counted too;
    a package stands for its `__init__`)."""
    g = nx.DiGraph((m, name) for m, name, *_ in IMPORTS if m != name)
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
    tree = ast.parse("def f():\n    from graphrag_engine.methods import run\n")
    found = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert found and found[0].module == "graphrag_engine.methods" and found[0] not in tree.body
    assert _unit("graphrag_engine.retrieve.dense") == "graphrag_engine.retrieve"
    assert _unit("graphrag_engine.kernels.ppr") == "graphrag_engine.kernels"
    assert (
        _method_folder("graphrag_engine.methods.rograg.values") == "graphrag_engine.methods.rograg"
    )
    assert _method_folder("graphrag_engine.methods.base") is None


def test_no_method_folder_imports_another() -> None:
    """A method's folder owns its helpers; what two methods share lives in retrieve/."""
    bad = [
        f"{m}:{line} imports {name}"
        for m, name, line, _, _ in IMPORTS
        if _method_folder(m) and _method_folder(name) and _method_folder(m) != _method_folder(name)
    ]
    assert not bad, "\n".join(bad)


def test_method_folders_exist_and_retrieve_keeps_shared_operators() -> None:
    """The five methods with helpers of their own are folders; every retrieve/ module is used
    by something outside it (a retrieve module that one method alone uses belongs in its
    folder)."""
    folders = {p.name for p in (REPO / PKG / "methods").iterdir() if (p / "__init__.py").exists()}
    assert {"pankrag", "rograg", "regraphrag", "clue_rag", "lego"} <= folders
    folders_of_methods = {f"{PKG}.methods.{name}" for name in folders}
    users: dict[str, set[str]] = {}
    for m, name, _, _, _ in IMPORTS:
        if name.startswith(f"{PKG}.retrieve.") and _unit(m) != f"{PKG}.retrieve":
            users.setdefault(name, set()).add(_method_folder(m) or m)
    for path in sorted((REPO / PKG / "retrieve").glob("*.py")):
        if path.stem == "__init__":
            continue
        module = f"{PKG}.retrieve.{path.stem}"
        inside = any(n == module and _unit(m) == f"{PKG}.retrieve" for m, n, *_ in IMPORTS)
        method_users = {u for u in users.get(module, set()) if u.startswith(f"{PKG}.methods.")}
        folders = {u for u in method_users if u in folders_of_methods}
        alone = len(method_users) == 1 and folders == method_users and not inside
        assert not (alone and users[module] == method_users), (
            f"{module} serves only {method_users}: move it into that method's folder"
        )


def test_no_file_edits_sys_path() -> None:
    """The package, the jobs, the benches and the tests import by package name alone."""
    bad = [
        str(p.relative_to(REPO))
        for folder in (PKG, "bench", "jobs", "tests")
        for p in sorted((REPO / folder).rglob("*.py"))
        if "sys.path" in p.read_text() and p.name != "test_layering.py"
    ]
    assert not bad, bad


def test_only_the_command_line_prints() -> None:
    """The library reports through `logging` (the CLI shows it: cli/logs.py), so a user of
    `Engine` can capture or silence it; only cli/ and the docs writer print."""
    bad = []
    for path in sorted((REPO / PKG).rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith(f"{PKG}/cli/") or rel == f"{PKG}/config_docs.py":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print":
                bad.append(f"{rel}:{node.lineno}")
    assert not bad, bad
