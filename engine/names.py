"""Entity-name keys shared by indexing (entity resolution) and querying (exact matching)."""

from __future__ import annotations

import re
import unicodedata

_PUNCT = re.compile(r"[^\w\s-]")


def normalize_name(name: str) -> str:
    """Key under which surface forms merge: NFKC, case-folded, no leading article, no possessive."""
    s = unicodedata.normalize("NFKC", name).casefold().strip()
    s = re.sub(r"['\u2019]s\b", "", s)
    s = _PUNCT.sub(" ", s)
    s = re.sub(r"^(the|a|an)\s+", "", s.strip())
    return re.sub(r"\s+", " ", s).strip()
