"""Entity-name keys shared by indexing (entity resolution) and querying (exact matching), the
texts chunks, entities and relations are embedded from, and the context lines they become
(whose token counts the index stores)."""

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


def relation_text(src_name: str, dst_name: str, description: str | None) -> str:
    """What a relation's vector embeds: "src - dst", then ": description" when it has one."""
    return f"{src_name} - {dst_name}" + (f": {description}" if description else "")


def entity_text(name: str, description: str | None) -> str:
    """What an entity's vector embeds: its name, then ": description" when it has one."""
    return f"{name}: {description}" if description else name


def titled_chunk(title: str | None, text: str) -> str:
    """What a chunk's vector embeds: its document's title above its text (title when present)."""
    return f"{title}\n{text}" if title else text


def entity_line(name: str, kind: str, description: str) -> str:
    """An entity as a context line: its name, "(type)" and ": description" where it has them."""
    kind = f" ({kind})" if kind else ""
    desc = f": {description}" if description else ""
    return f"{name}{kind}{desc}"


def relation_line(src_name: str, dst_name: str, description: str, keywords: str) -> str:
    """A relation as a context line: its ends, ": description" and " [keywords]"."""
    desc = f": {description}" if description else ""
    kw = f" [{keywords}]" if keywords else ""
    return f"{src_name} -- {dst_name}{desc}{kw}"


VECTOR_TABLE_KINDS = {
    "chunk_vectors": "chunks",
    "unit_vectors": "units",
    "entity_vectors": "entities",
    "relation_vectors": "relations",
}
"""What each vector table holds, as progress lines and the embedding cache name it."""
