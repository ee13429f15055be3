"""The built-in demo corpus: an invented domain, so no model can answer from memory."""

from __future__ import annotations

from pathlib import Path

DEMO_DIR = Path(__file__).resolve().parent


def corpus_path() -> Path:
    """JSONL of the demo documents (id, title, text)."""
    return DEMO_DIR / "corpus.jsonl"


def questions_path() -> Path:
    """JSONL of the demo questions with gold answers and gold supporting document ids."""
    return DEMO_DIR / "questions.jsonl"
