"""OpenSearch's ``standard`` analyzer, as the real node's ``_analyze`` answers.

Lucene's StandardTokenizer follows the Unicode word-break rules (UAX #29), and
the ``regex`` package implements the same rules for ``\\b`` under ``WORD``.  A
segment becomes a token when it holds a letter, digit, mark or emoji; runs of
Thai, Lao, Khmer and Myanmar stay one token (Lucene has no dictionary for them
in this tokenizer); tokens longer than 255 characters are split, as Lucene's
``max_token_length`` splits them.  Lowercasing is Java's per code point
``Character.toLowerCase``: no final sigma, and ``İ`` becomes a plain ``i``.

``tests/unit/test_analysis.py`` holds the real node's answers for many hard
strings (CJK, emoji sequences, apostrophes, numbers, URLs, Thai).
"""

from __future__ import annotations

from functools import lru_cache

import regex

#: Lucene's ``StandardAnalyzer.DEFAULT_MAX_TOKEN_LENGTH``.
MAX_TOKEN_LENGTH = 255

_BOUNDARY = regex.compile(r"\b", regex.WORD | regex.V1)
_WORDY = regex.compile(r"[\p{L}\p{Nd}\p{Nl}\p{M}\p{Extended_Pictographic}\p{Emoji_Presentation}]", regex.V1)
_SOUTHEAST_ASIAN = regex.compile(r"[\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}]", regex.V1)


def java_lower(text: str) -> str:
    """``Character.toLowerCase`` on every code point (Python's ``lower`` applies the final-sigma rule)."""
    text = text.replace("\u0130", "i")
    if "\u03a3" in text:
        return "".join(ch.lower() for ch in text)
    return text.lower()


def _segments(text: str) -> list[str]:
    """Word segments in order, Southeast Asian runs joined."""
    words: list[str] = []
    joinable = False
    for segment in _BOUNDARY.split(text):
        if not segment or not _WORDY.search(segment):
            joinable = False
            continue
        southeast_asian = _SOUTHEAST_ASIAN.match(segment) is not None
        if southeast_asian and joinable:
            words[-1] += segment
        else:
            words.append(segment)
        joinable = southeast_asian and _SOUTHEAST_ASIAN.match(segment[-1]) is not None
    return words


def _tokens(text: str) -> tuple[str, ...]:
    tokens: list[str] = []
    for word in _segments(text):
        word = java_lower(word)
        while len(word) > MAX_TOKEN_LENGTH:
            tokens.append(word[:MAX_TOKEN_LENGTH])
            word = word[MAX_TOKEN_LENGTH:]
        tokens.append(word)
    return tuple(tokens)


#: UAX #29 restricted to ASCII: letters, digits and ``_`` form words; ``'`` and ``.`` join two letters
#: or two digits, ``:`` two letters, ``,`` and ``;`` two digits.  Ten times faster than the general rules.
_ASCII_WORD = regex.compile(
    r"[A-Za-z0-9_]+(?:(?:(?<=[A-Za-z])['.:](?=[A-Za-z])|(?<=[0-9])['.,;](?=[0-9]))[A-Za-z0-9_]+)*"
)
_ALNUM = regex.compile(r"[A-Za-z0-9]")


def _ascii_tokens(text: str) -> tuple[str, ...]:
    tokens: list[str] = []
    for word in _ASCII_WORD.findall(text):
        if not _ALNUM.search(word):
            continue
        word = word.lower()
        while len(word) > MAX_TOKEN_LENGTH:
            tokens.append(word[:MAX_TOKEN_LENGTH])
            word = word[MAX_TOKEN_LENGTH:]
        tokens.append(word)
    return tuple(tokens)


def _any_tokens(text: str) -> tuple[str, ...]:
    return _ascii_tokens(text) if text.isascii() else _tokens(text)


#: Names, queries and messages are analysed again by every search over them: short ones are kept.
_cached_tokens = lru_cache(maxsize=65536)(_any_tokens)


def analyze(text: str) -> list[str]:
    """The tokens the ``standard`` analyzer makes of ``text``, at consecutive positions."""
    return list(_cached_tokens(text) if len(text) <= 1024 else _any_tokens(text))


def analyze_with_offsets(text: str) -> list[tuple[str, int, int]]:
    """Tokens with the character span each came from (for highlighting)."""
    spans: list[tuple[str, int, int]] = []
    start = 0
    joinable = False
    for segment in _BOUNDARY.split(text):
        end = start + len(segment)
        if segment and _WORDY.search(segment):
            southeast_asian = _SOUTHEAST_ASIAN.match(segment) is not None
            if southeast_asian and joinable:
                spans[-1] = (spans[-1][0] + segment, spans[-1][1], end)
            else:
                spans.append((segment, start, end))
            joinable = southeast_asian and _SOUTHEAST_ASIAN.match(segment[-1]) is not None
        else:
            joinable = False
        start = end
    out: list[tuple[str, int, int]] = []
    for word, begin, _ in spans:
        word = java_lower(word)
        while len(word) > MAX_TOKEN_LENGTH:
            out.append((word[:MAX_TOKEN_LENGTH], begin, begin + MAX_TOKEN_LENGTH))
            word, begin = word[MAX_TOKEN_LENGTH:], begin + MAX_TOKEN_LENGTH
        out.append((word, begin, begin + len(word)))
    return out
