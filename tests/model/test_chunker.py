"""Chunking: <=480 tokens, exactly 64 tokens of overlap, spans of the original text covering it."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer

from embedder import TextChunk, chunk_text, ensure_default_model, text_tail

pytestmark = pytest.mark.model

SENTENCES = [
    "The quarterly report shows revenue grew by 12% while costs stayed flat.",
    "Der Kunde hat am Montag angerufen und nach dem Status seiner Bestellung gefragt.",
    "客户在周一打电话询问他的订单状态。",
    "Клиент позвонил в понедельник и спросил о статусе заказа.",
    "Supercalifragilisticexpialidocious antidisestablishmentarianism pneumonoultramicroscopic.",
    "Emoji 👨\u200d👩\u200d👧 and   repeated    spaces\n\nand new paragraphs.",
]


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return Tokenizer.from_file(str(ensure_default_model() / "tokenizer.json"))


def count(tok: Tokenizer, text: str) -> int:
    return len(tok.encode(text, add_special_tokens=False).ids)


def long_text(tok: Tokenizer, target: int = 2000) -> str:
    parts: list[str] = []
    i = 0
    while count(tok, " ".join(parts)) < target:
        parts.extend(SENTENCES[(i + k) % len(SENTENCES)] for k in range(10))
        i += 1
    return "  " + " ".join(parts) + "  \n"


def check_chunks(tok: Tokenizer, text: str, chunks: list[TextChunk], max_tokens: int, overlap: int) -> None:
    assert chunks[0].start == 0 and chunks[-1].end == len(text)
    for i, c in enumerate(chunks):
        assert c.index == i and c.total == len(chunks)
        assert c.text == text[c.start : c.end]
        assert count(tok, c.text) <= max_tokens
        assert c.token_end - c.token_start <= max_tokens
    for a, b in zip(chunks, chunks[1:]):
        assert a.token_end - b.token_start == overlap  # exactly `overlap` shared tokens
        # char spans overlap (or touch, without overlap), so nothing is lost between them
        assert b.start < a.end if overlap else b.start == a.end
        assert b.start > a.start and b.end > a.end
        # the shared span re-tokenises to about `overlap` tokens
        assert abs(count(tok, text[b.start : a.end]) - overlap) <= 2


def test_long_text_chunks(tokenizer: Tokenizer) -> None:
    text = long_text(tokenizer)
    n = count(tokenizer, text)
    assert n >= 2000
    chunks = chunk_text(tokenizer, text)
    assert len(chunks) >= 5
    check_chunks(tokenizer, text, chunks, 480, 64)
    assert chunks[-1].token_end == n


def test_other_budgets(tokenizer: Tokenizer) -> None:
    text = long_text(tokenizer, 700)
    chunks = chunk_text(tokenizer, text, max_tokens=100, overlap=10)
    check_chunks(tokenizer, text, chunks, 100, 10)
    chunks = chunk_text(tokenizer, text, max_tokens=50, overlap=0)
    check_chunks(tokenizer, text, chunks, 50, 0)


def test_cjk_without_spaces(tokenizer: Tokenizer) -> None:
    text = "客户在周一打电话询问他的订单状态。我们的团队正在处理这个问题，预计明天会有结果。" * 60
    chunks = chunk_text(tokenizer, text)
    assert len(chunks) > 1
    check_chunks(tokenizer, text, chunks, 480, 64)


def test_short_text_is_one_chunk(tokenizer: Tokenizer) -> None:
    (c,) = chunk_text(tokenizer, "Just a short note.")
    assert (c.index, c.total, c.text, c.start, c.end) == (0, 1, "Just a short note.", 0, 18)


def test_exactly_480_tokens_is_one_chunk(tokenizer: Tokenizer) -> None:
    text = " ".join(["word"] * 480)
    assert count(tokenizer, text) == 480
    assert len(chunk_text(tokenizer, text)) == 1
    assert len(chunk_text(tokenizer, text + " word")) == 2


@pytest.mark.parametrize("text", ["", "   ", "\n\t "])
def test_empty_and_whitespace_give_one_chunk_with_the_text(tokenizer: Tokenizer, text: str) -> None:
    (c,) = chunk_text(tokenizer, text)
    assert (c.index, c.total, c.text, c.start, c.end) == (0, 1, text, 0, len(text))


def test_accepts_an_embedder_like_object(tokenizer: Tokenizer) -> None:
    class HasTokenizer:
        def __init__(self, tok: Tokenizer) -> None:
            self.tokenizer = tok

    assert chunk_text(HasTokenizer(tokenizer), "hello") == chunk_text(tokenizer, "hello")
    with pytest.raises(TypeError):
        chunk_text(object(), "hello")
    with pytest.raises(ValueError):
        chunk_text(tokenizer, "hello", max_tokens=10, overlap=10)


@pytest.mark.parametrize("text", [*SENTENCES, "  x  " * 300, "a" + " " * 5000 + "b"])
@pytest.mark.parametrize("budget", [1, 8, 64])
def test_a_tail_is_the_texts_end_within_the_budget(tokenizer: Tokenizer, text: str, budget: int) -> None:
    tail = text_tail(tokenizer, text, budget)
    assert text.rstrip().endswith(tail) and (tail or budget == 1)
    assert count(tokenizer, tail) <= budget + 1  # a cut inside a word may get a fresh "▁"
    assert len(tail) <= 16 * budget
    if count(tokenizer, text) <= budget and len(text) <= 16 * budget:
        assert tail == text.strip()
    assert text_tail(tokenizer, text, 0) == ""
