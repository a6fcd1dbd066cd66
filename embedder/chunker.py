"""Token-budgeted chunking (spec: at most 480 tokens per chunk, 64 tokens of overlap).

Tokens are counted with the embedding model's own tokenizer, without the
`passage: ` prefix and without special tokens. Chunks are spans of the
ORIGINAL text (``text[start:end]``), cut at token offsets and never
detokenised, so what is stored is exactly what the user sent.

Edge cases, decided:

* Empty or whitespace-only text gives one chunk holding the text as is
  (index 0, total 1), so every record has at least one chunk. The HTTP layer
  rejects empty records anyway.
* Consecutive chunks share exactly `overlap` tokens of the full text's
  tokenisation. Chunk i covers tokens [token_start, token_end); the next one
  starts at token_end - overlap.
* A cut falls where the next token's offset starts, so the whitespace that a
  Metaspace token carries stays with that token; the first chunk starts at 0
  and the last ends at len(text), so the chunks cover the whole text.
* Re-tokenising a span can differ slightly from the slice it came from (a cut
  inside a word gets a fresh "▁"), so each span is re-counted and shrunk until
  it fits the budget; the budget is a hard limit on what gets embedded.
* Chunks are bounded by characters too (`max_chars`, 16 per token of the
  budget, far above any natural text): the tokenizer folds whitespace runs
  away, so one word, a million spaces and another word are only two tokens.
  Such a span is cut between its tokens; a single token whose span is still
  too long (its whitespace run, or an unknown-script run the tokenizer reads
  as one piece) loses its leading and trailing whitespace, then its tail.
  Only there do chunks not cover the whole text; a chunk cut short by
  characters overlaps the next by at most a quarter of its tokens.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import Any

from tokenizers import Tokenizer


@dataclass(frozen=True)
class TextChunk:
    index: int
    total: int
    text: str
    start: int  # char offset into the original text
    end: int  # exclusive char offset
    token_start: int = 0  # token range in the full text's tokenisation
    token_end: int = 0


def _tokenizer(obj: Any) -> Tokenizer:
    tok = obj if isinstance(obj, Tokenizer) else getattr(obj, "tokenizer", None)
    if not isinstance(tok, Tokenizer):
        raise TypeError("chunk_text needs a tokenizers.Tokenizer or an object with a .tokenizer")
    if tok.truncation is not None or tok.padding is not None:
        tok = Tokenizer.from_str(tok.to_str())
        tok.no_truncation()
        tok.no_padding()
    return tok


#: The character budget of a chunk, per token of its token budget.
CHARS_PER_TOKEN = 16


def chunk_text(
    tokenizer_or_embedder: Any, text: str, max_tokens: int = 480, overlap: int = 64, max_chars: int | None = None
) -> list[TextChunk]:
    """Split `text` into spans of at most `max_tokens` tokens overlapping by `overlap` tokens."""
    if not 0 <= overlap < max_tokens:
        raise ValueError("need 0 <= overlap < max_tokens")
    max_chars = max_chars or CHARS_PER_TOKEN * max_tokens
    tok = _tokenizer(tokenizer_or_embedder)
    offsets = tok.encode(text, add_special_tokens=False).offsets
    n = len(offsets)
    if n <= max_tokens and (len(text) <= max_chars or n <= 1 and not text.strip()):
        return [TextChunk(0, 1, text, 0, len(text), 0, n)]

    # cut[j]: char position where token j begins, made monotonic (suffix minimum);
    # a leading "▁" token of Metaspace reports the next char's offsets.
    cut = [0] * (n + 1)
    cut[n] = len(text)
    for j in range(n - 1, -1, -1):
        cut[j] = min(offsets[j][0], cut[j + 1])
    cut[0] = 0
    # ends[j]: char position where token j ends, made monotonic (prefix maximum);
    # a span's characters are counted to its last token's end, without the
    # whitespace that follows it.
    ends = [0] * n
    for j in range(n):
        ends[j] = max(offsets[j][1], ends[j - 1] if j else 0)

    def count(a: int, b: int) -> int:
        return len(tok.encode(text[a:b], add_special_tokens=False).ids)

    spans: list[tuple[int, int]] = []
    s = 0
    while True:
        e = min(s + max_tokens, n)
        # The character budget: the tokens that end within reach, but at least one.
        e = min(e, max(s + 1, bisect_right(ends, cut[s] + max_chars, s)))
        while e > s + overlap + 1 and count(cut[s], cut[e]) > max_tokens:
            e -= 1
        spans.append((s, e))
        if e >= n:
            break
        s = max(e - overlap, e - (e - s) // 4)
    total = len(spans)
    chunks = []
    for i, (s, e) in enumerate(spans):
        start, end = _within(text, cut[s], cut[e], max_chars)
        chunks.append(TextChunk(i, total, text[start:end], start, end, s, e))
    return chunks


def _within(text: str, start: int, end: int, max_chars: int) -> tuple[int, int]:
    """The span, or for a one-token span over the budget, its core: no edge whitespace, at most `max_chars`."""
    if end - start <= max_chars:
        return start, end
    span = text[start:end]
    start += len(span) - len(span.lstrip())
    end -= len(span) - len(span.rstrip())
    return start, min(end, start + max_chars)


def token_count(tokenizer_or_embedder: Any, text: str) -> int:
    """How many tokens `text` is, as a chunk's budget counts them (no special tokens, no prefix)."""
    return len(_tokenizer(tokenizer_or_embedder).encode(text, add_special_tokens=False).ids)


def text_tail(tokenizer_or_embedder: Any, text: str, max_tokens: int) -> str:
    """The end of `text` that holds its last `max_tokens` tokens (and at most `CHARS_PER_TOKEN` characters
    each), cut where a token begins: the context a chunk is embedded with."""
    if max_tokens <= 0:
        return ""
    offsets = _tokenizer(tokenizer_or_embedder).encode(text, add_special_tokens=False).offsets
    start = offsets[-max_tokens][0] if len(offsets) > max_tokens else 0
    start = max(start, len(text) - CHARS_PER_TOKEN * max_tokens)
    return text[start:].strip()
