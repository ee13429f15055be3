"""The unit tier's guard in child processes (on PYTHONPATH while a unit test runs): importing
a model, server or cluster library fails, so a CLI run that would load one fails the test."""

import blocker  # noqa: F401  (importing it installs the import blocker)
