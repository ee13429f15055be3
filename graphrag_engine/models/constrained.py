"""Grammar-constrained decoding for in-process transformers models.

A stage's JSON schema becomes, at every decoding step, the set of tokens that keep the answer a
valid prefix of some document of that schema (llguidance computes the set from the tokenizer's
vocabulary; about 0.1 ms a step here). Tokens outside the set get -inf logits; when the
document is complete only end-of-sequence stays allowed. The answer is therefore valid JSON of
the schema unless the token budget cuts it; it is still validated by the stage afterwards.

A batch's masks are filled on llguidance's thread pool (`LLExecutor`), one row per matcher, and
applied with a vectorised bit unpacking in torch on the scores' device: llguidance's own CPU
apply takes about 140 ms per step for SmolLM2's 49,152 tokens, the unpacking under 1 ms.
"""

from __future__ import annotations

import importlib.util
import json
import logging
from typing import Any

log = logging.getLogger(__name__)


def constrained_available() -> bool:
    """Whether llguidance (the grammar engine) is installed."""
    return importlib.util.find_spec("llguidance") is not None


class SchemaGrammar:
    """The llguidance view of one tokenizer, and the compiled grammars of the schemas it saw."""

    def __init__(self, hf_tokenizer: Any) -> None:
        import llguidance.hf  # optional dependency: only this backend path needs it

        self.tokenizer = llguidance.hf.from_tokenizer(hf_tokenizer)
        self.vocab_size = self.tokenizer.vocab_size
        self.executor = llguidance.LLExecutor()  # fills a batch's masks on a thread pool
        self._grammars: dict[str, str] = {}
        self.rejected: dict[str, str] = {}
        """Schemas the grammar engine refused (canonical JSON -> its error), each told once."""

    def grammar(self, schema: dict[str, Any]) -> str | None:
        """The compiled grammar of a JSON schema (compact JSON, no free whitespace); None when
        the grammar engine rejects the schema (said once on stderr, then remembered)."""
        import llguidance

        key = json.dumps(schema, sort_keys=True)
        if key in self.rejected:
            return None
        if key not in self._grammars:
            try:
                compiled = llguidance.LLMatcher.grammar_from_json_schema(
                    schema, defaults={"whitespace_flexible": False}
                )
                error = llguidance.LLMatcher.validate_grammar(compiled)
            except (ValueError, TypeError) as exc:
                compiled, error = "", str(exc) or type(exc).__name__
            if error:
                self.rejected[key] = error
                log.warning(
                    f"llguidance rejected a stage schema ({error[:200]}); answers to it are "
                    "decoded freely, then validated and re-asked"
                )
                return None
            self._grammars[key] = compiled
        return self._grammars[key]

    def processor(self, schema: dict[str, Any], rows: int, eos_token_id: int) -> SchemaMask | None:
        """A logits processor constraining `rows` sequences of one batch to the schema, or None
        when the schema was rejected."""
        compiled = self.grammar(schema)
        return None if compiled is None else SchemaMask(self, compiled, rows, eos_token_id)


class SchemaMask:
    """Masks every row's next-token logits to its grammar matcher's allowed tokens (a logits
    processor for `generate`; torch is imported by the backend that calls it)."""

    def __init__(self, grammar: SchemaGrammar, compiled: str, rows: int, eos_token_id: int) -> None:
        import llguidance
        import llguidance.torch

        self._fill = llguidance.torch.fill_next_token_bitmask_par
        self._executor = grammar.executor
        self.matchers = [llguidance.LLMatcher(grammar.tokenizer, compiled) for _ in range(rows)]
        errors = {m.get_error() for m in self.matchers if m.is_error()}
        if errors:
            raise ValueError(f"schema rejected by the grammar engine: {errors.pop()}")
        self.bitmask = llguidance.torch.allocate_token_bitmask(rows, grammar.vocab_size)
        self.vocab_size = grammar.vocab_size
        self.eos = eos_token_id
        self.started = False

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        """Advance each matcher by the token just chosen, then mask the next step."""
        if self.started:
            for row, matcher in enumerate(self.matchers):
                if not matcher.is_stopped():
                    matcher.consume_token(int(input_ids[row, -1]))
        self.started = True
        self._fill(self._executor, [(m, row) for row, m in enumerate(self.matchers)], self.bitmask)
        return apply_bitmask(scores, self.bitmask, self.vocab_size, self.eos)


def apply_bitmask(scores: Any, bitmask: Any, vocab_size: int, eos: int) -> Any:
    """Scores with -inf wherever the packed bitmask (int32 words, bit i of word w = token
    32 w + i) disallows a token; a row with nothing allowed keeps only end-of-sequence."""
    import torch

    device = scores.device  # unpacked where the scores are: a GPU batch moves 4 bytes per
    bitmask = bitmask.to(device)  # 32 tokens to the device, not one bool per token
    shifts = torch.arange(32, dtype=torch.int32, device=device)
    bits = ((bitmask.unsqueeze(-1) >> shifts) & 1).reshape(bitmask.shape[0], -1).bool()
    width = min(vocab_size, scores.shape[1])
    allowed = torch.zeros(scores.shape, dtype=torch.bool, device=device)  # padded columns: never
    allowed[:, :width] = bits[:, :width]
    allowed[~allowed.any(dim=1), eos] = True  # a matcher in error ends its row
    return scores.masked_fill(~allowed, float("-inf"))
