"""The README's two set-up commands are exactly what .ci/run runs."""

from __future__ import annotations

import re

from tests.paths import REPO


def test_ci_runs_the_readme_commands() -> None:
    readme = (REPO / "README.md").read_text()
    setup = readme.split("## Set-up: two commands", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```bash\n(.+?)\n```", setup, flags=re.S)
    assert len(commands) == 2, "the set-up section shows exactly two commands"
    ci_lines = (REPO / ".ci" / "run").read_text().splitlines()
    install, test = commands
    assert install in ci_lines
    assert test in ci_lines
    assert "graphrag-engine demo" in install and "pytest" in test
    assert "CMAKE_ARGS" not in install, "the first command compiles nothing"


def test_readme_is_a_front_door() -> None:
    """At most about 300 lines, no dates, commit hashes or issue numbers (history lives in
    CHANGELOG.md), and every page it links to exists."""
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", readme), "a date: put history in CHANGELOG.md"
    assert not re.search(r"\bcommit [0-9a-f]{7}", readme), "a commit hash: keep it in docs/"
    assert not re.search(r"\bissues? \d+", readme, flags=re.I), "an issue number"
    links = re.findall(r"\]\(([^)#][^)]*)\)", readme)
    local = [link for link in links if not link.startswith("http")]
    assert len(local) >= 10
    for link in local:
        assert (REPO / link).exists(), f"README links to {link}, which does not exist"


def test_readme_methods_table_lists_every_method() -> None:
    """The README's methods table has a row for every registered method."""
    from graphrag_engine.methods import method_names  # why: registers every method on import

    readme = (REPO / "README.md").read_text()
    for name in method_names():
        assert f"| `{name}` |" in readme, f"README's methods table lacks {name}"


def test_the_demo_excerpt_is_the_demo_of_today() -> None:
    """The README's demo excerpt is `bench.demo`'s kept output (bench.tables writes it; the
    bench package test checks it is current), run with the command set-up 1 ends with, and its
    table has the demo's current columns and a row for every method the demo runs."""
    from bench.headline import DEMO_END, DEMO_START
    from graphrag_engine.cli.demo import LLM_WORK, TABLE_HEADER
    from graphrag_engine.methods import method_names  # why: registers every method on import

    readme = (REPO / "README.md").read_text()
    excerpt = readme.split(DEMO_START, 1)[1].split(DEMO_END, 1)[0]
    lines = excerpt.splitlines()
    command = next(line for line in lines if line.startswith("$ "))
    assert command.removeprefix("$ .venv/bin/") in readme.split("```bash\n", 2)[1].split("\n")[0]
    assert TABLE_HEADER in lines, "the demo's table columns changed: run python -m bench.demo"
    table = lines[lines.index(TABLE_HEADER) + 1 :]
    rows = {line.split()[0] for line in table[: table.index("")]}
    assert rows == set(method_names()) - {"none"}, "the demo's methods changed: run bench.demo"
    assert any(line.startswith(LLM_WORK) for line in lines), "no LLM work line: run bench.demo"
