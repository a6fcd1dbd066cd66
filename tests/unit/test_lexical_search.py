"""The lexical engine's top k (block-max MaxScore over segments) against scoring every posting of every doc."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from memory_plugin import lexical_index
from memory_plugin.lexical_index import SEGMENT, Change, LexicalIndex
from memory_plugin.lexical_search import K1, B

OWNERS = [("alice", "a"), ("bob", "b")]


Counted = dict[int, tuple["Counter[int]", int, tuple[str, str]]]


def counted(index: LexicalIndex, docs: dict[int, tuple[list[str], tuple[str, str]]]) -> Counted:
    """Each live doc's term counts, length and owner, counted once for every query that follows."""
    return {
        seq: (Counter(index.vocabulary[token] for token in tokens), len(tokens), whose)
        for seq, (tokens, whose) in docs.items()
    }


def brute_force(
    index: LexicalIndex, docs: Counted, owner: tuple[str, str], words: list[str], allowed: np.ndarray | None
) -> list[tuple[int, float]]:
    """Every live doc of ``owner`` scored term by term in the query's order, with the engine's arithmetic."""
    weights: dict[int, float] = {}
    for word in words:
        term = index.vocabulary.get(word)
        if term is not None:
            weights[term] = weights.get(term, 0.0) + index.weight(index.rows, int(index.df[term]))
    avgdl = index.tokens / index.rows
    wanted = None if allowed is None else set(allowed.tolist())
    scored = []
    for seq, (counts, length, whose) in docs.items():
        if whose != owner or wanted is not None and seq not in wanted:
            continue
        score = 0.0
        for term, weight in weights.items():
            tf = float(counts.get(term, 0))
            if tf:
                norm = K1 * (1.0 - B + B * float(length) / avgdl)
                score += weight * ((tf * (K1 + 1.0)) / (tf + norm))
        if score > 0.0:
            scored.append((seq, score))
    scored.sort(key=lambda found: (-found[1], found[0]))
    return scored


@pytest.mark.parametrize(
    "idf", ["lucene", pytest.param("fts5", marks=pytest.mark.slow)]
)  # the same engine, its other idf
@pytest.mark.parametrize("every_postings", [0, 1 << 40], ids=["segments skipped", "every posting scored"])
def test_the_top_k_is_every_posting_scored_to_the_bit(
    idf: str, every_postings: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same docs, same order (ties by seq) and the same scores to the last bit: each doc's terms are added in the
    query's order from 0 with the same float operations in both, so no tolerance is needed, and none is given.
    Several segments and a tail, two owners, deletes and replacements, filters of every size, k from 1 to all;
    both ways of the planner (``EVERY_POSTINGS``)."""
    monkeypatch.setattr(lexical_index, "EVERY_POSTINGS", every_postings)
    rng = np.random.default_rng(48)
    index = LexicalIndex(idf)  # type: ignore[arg-type]
    docs: dict[int, tuple[list[str], tuple[str, str]]] = {}

    def write(seq: int) -> Change:
        # Zipf-drawn words: a few in most docs (long postings, tiny idf), most rare; lengths vary a lot
        tokens = [f"w{rank}" for rank in np.minimum(rng.zipf(1.2, int(rng.integers(1, 40))), 3000)]
        owner = OWNERS[int(rng.integers(0, 2))]
        docs[seq] = (tokens, owner)
        return Change(seq, tokens, "c1", owner)

    index.apply([write(seq) for seq in range(1, SEGMENT * 6 + 300)])
    gone = rng.choice(np.arange(1, SEGMENT * 6), 700, replace=False).tolist()
    index.apply([Change(seq, None) for seq in gone])
    for seq in gone:
        docs.pop(seq)
    index.apply([write(seq) for seq in rng.choice(list(docs), 200, replace=False).tolist()])  # replaced in place
    index.apply([write(seq) for seq in range(SEGMENT * 7, SEGMENT * 7 + 500)])  # a segment frozen, a tail again
    every = np.asarray(sorted(docs), dtype=np.int64)
    checked, counts = 0, counted(index, docs)
    for _ in range(40):
        words = [f"w{rank}" for rank in np.minimum(rng.zipf(1.3, int(rng.integers(1, 7))), 3500)]
        if rng.random() < 0.2:
            words.append(words[0])  # a repeated word weighs twice
        share = rng.choice([0.0, 0.01, 0.3, 1.0])
        allowed = None if share == 0.0 else np.sort(rng.choice(every, max(1, int(len(every) * share)), replace=False))
        for owner in OWNERS:
            every_doc = brute_force(index, counts, owner, words, allowed)
            for k in (1, 10, 100, 10_000):
                got = index.search("c1", owner, words, k, allowed)
                assert got == every_doc[:k], (words, owner, k, share)
                checked += len(got)
    assert checked > 10_000
