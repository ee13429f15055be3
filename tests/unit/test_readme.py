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
