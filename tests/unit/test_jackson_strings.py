"""The Jackson-style lexer reads escaped strings as Java holds them: a UTF-16 pair is one character."""

from __future__ import annotations

import json

import pytest

from memory_plugin.jackson import JsonSyntaxError, Lexer, Token


def read(raw: bytes) -> str:
    lexer = Lexer(raw)
    assert lexer.next_token() is Token.VALUE_STRING
    return lexer.string_value()


@pytest.mark.parametrize(
    "text",
    [
        "rock on \U0001f918",
        "\U0001f918",
        "\U00010000\U0010ffff",
        "lone \ud83e high",
        "lone \udd18 low",
        "at the end \ud83e",
        "reversed \udd18\ud83e",
        "high then pair \ud83e\ud83e\udd18",
        "high, then not low \ud83ex\udd18",
    ],
)
def test_escaped_strings_read_as_json_reads_them(text: str) -> None:
    raw = json.dumps(text).encode()  # every non-ASCII character escaped, pairs as two escapes
    assert read(raw) == json.loads(raw)


def test_a_pair_in_upper_case_hex_and_in_a_field_name_is_one_character() -> None:
    assert read(b'"\\uD83E\\uDD18"') == "\U0001f918"
    lexer = Lexer(b'{"k\\ud83e\\udd18": 1}')
    assert lexer.next_token() is Token.START_OBJECT
    assert lexer.next_token() is Token.FIELD_NAME and lexer.text == "k\U0001f918"


def test_a_low_half_after_a_bad_escape_letter_is_still_a_syntax_error() -> None:
    with pytest.raises(JsonSyntaxError, match="Unrecognized character escape 'U'"):
        read(b'"\\ud83e\\UDD18"')
