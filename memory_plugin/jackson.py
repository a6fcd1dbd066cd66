"""Read request bodies as OpenSearch does: Jackson's acceptance and Jackson's error messages.

OpenSearch parses JSON with Jackson (streaming, over UTF-8 bytes).  A client that
sends a broken body gets Jackson's words back, with a line and a byte column, and
the exception name (``json_parse_exception``, ``json_e_o_f_exception``) as the error
type.  To answer the same, a body that ``json.loads`` rejects is read again by
this small pull lexer, which stops where Jackson stops and says what Jackson says.

Valid bodies never come here: the C parser stays the fast path.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Any, NoReturn

SOURCE = "REDACTED (`StreamReadFeature.INCLUDE_SOURCE_IN_LOCATION` disabled)"
#: Jackson's ``StreamReadConstraints`` default: longer numbers are refused.
MAX_NUMBER_LENGTH = 1000
VALID_VALUES = "(JSON String, Number, Array, Object or token 'null', 'true' or 'false')"


class Token(enum.Enum):
    START_OBJECT = "START_OBJECT"
    END_OBJECT = "END_OBJECT"
    START_ARRAY = "START_ARRAY"
    END_ARRAY = "END_ARRAY"
    FIELD_NAME = "FIELD_NAME"
    VALUE_STRING = "VALUE_STRING"
    VALUE_NUMBER = "VALUE_NUMBER"
    VALUE_BOOLEAN = "VALUE_BOOLEAN"
    VALUE_NULL = "VALUE_NULL"


class JsonSyntaxError(ValueError):
    """A body Jackson would refuse; ``kind`` is the OpenSearch error type."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass
class _Scope:
    kind: str  # "root", "object" or "array"
    start_line: int
    start_column: int
    entries: int = 0
    expecting_value: bool = False  # in an object: a field name was read, its value is next
    names: set[str] = field(default_factory=set)


#: Where a string's plain run ends: its closing quote, an escape, or a control character.
_STRING_SPECIAL = re.compile(rb'["\\\x00-\x1f]')
#: The escaped low half that, after an escaped high half, completes a UTF-16 pair.
_LOW_SURROGATE_ESCAPE = re.compile(rb"\\u([dD][c-fC-F][0-9a-fA-F]{2})")


def _describe(code: int) -> str:
    """Jackson's ``_getCharDesc``."""
    if code < 32 or code == 127:
        return f"(CTRL-CHAR, code {code})"
    if code > 255:
        return f"'{chr(code)}' (code {code} / 0x{code:x})"
    return f"'{chr(code)}' (code {code})"


def _identifier_part(byte: int) -> bool:
    return chr(byte).isalnum() or byte in (ord("_"), ord("$")) or byte >= 0x80


class Lexer:
    """Jackson's token stream over UTF-8 bytes, with its positions and its errors."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        self.line = 1
        self.line_start = 0
        self.scopes: list[_Scope] = [_Scope("root", 1, 1)]
        self.pending_string: int | None = None  # start of a string not yet read (Jackson reads them lazily)
        self.token: Token | None = None
        self.text = ""
        #: The name of the field whose value is the current token (Jackson's ``currentName``).
        self.name: str | None = None
        self.token_start = (1, 1)

    # -- positions and errors
    def _where(self, pos: int | None = None) -> str:
        at = self.pos if pos is None else pos
        return f"\n at [Source: {SOURCE}; line: {self.line}, column: {at - self.line_start + 1}]"

    def _fail(self, message: str, pos: int | None = None) -> JsonSyntaxError:
        return JsonSyntaxError("json_parse_exception", message + self._where(pos))

    def _eof(self, message: str) -> JsonSyntaxError:
        return JsonSyntaxError("json_e_o_f_exception", message + self._where())

    def _unexpected(self, pos: int, expecting: str) -> JsonSyntaxError:
        return self._fail(f"Unexpected character ({_describe(self._char_at(pos))}): {expecting}", pos)

    def _char_at(self, pos: int) -> int:
        """The code point at ``pos`` (decoding one UTF-8 sequence)."""
        byte = self.data[pos]
        if byte < 0x80:
            return byte
        for width in (2, 3, 4):
            try:
                return ord(self.data[pos : pos + width].decode("utf-8"))
            except UnicodeDecodeError:
                continue
        return byte

    # -- whitespace
    def _skip_space(self) -> int | None:
        data = self.data
        while self.pos < len(data):
            byte = data[self.pos]
            if byte == 0x0A:
                self.pos += 1
                self.line += 1
                self.line_start = self.pos
            elif byte in (0x20, 0x09, 0x0D):
                self.pos += 1
            else:
                return byte
        return None

    # -- the token stream
    def next_token(self) -> Token | None:
        if self.pending_string is not None:
            self._read_string(self.pending_string, in_name=False)
        scope = self.scopes[-1]
        byte = self._skip_space()
        if scope.kind == "object":
            return self._next_in_object(scope, byte)
        if scope.kind == "array":
            if byte is None:
                raise self._eof(
                    "Unexpected end-of-input: expected close marker for Array (start marker at "
                    f"[Source: {SOURCE}; line: {scope.start_line}, column: {scope.start_column}])"
                )
            if byte == ord("]"):
                return self._close("array")
            if byte == ord("}"):
                raise self._fail(
                    f"Unexpected close marker '}}': expected ']' (for Array starting at [Source: {SOURCE}; "
                    f"line: {scope.start_line}, column: {scope.start_column}])",
                )
            if scope.entries:
                if byte != ord(","):
                    raise self._unexpected(self.pos, "was expecting comma to separate Array entries")
                self.pos += 1
                byte = self._skip_space()
                if byte is None:
                    raise self._fail("Unexpected end-of-input within/between Array entries")
            scope.entries += 1
            return self._value(byte)
        # root
        if byte is None:
            self.token = None
            return None
        if scope.entries:
            return None  # Jackson stops after the first root value; the rest is never read
        scope.entries += 1
        return self._value(byte)

    def _next_in_object(self, scope: _Scope, byte: int | None) -> Token | None:
        if scope.expecting_value:
            if byte is None:
                raise self._eof("Unexpected end-of-input within/between Object entries")
            if byte != ord(":"):
                raise self._unexpected(self.pos, "was expecting a colon to separate field name and value")
            self.pos += 1
            byte = self._skip_space()
            if byte is None:
                raise self._eof("Unexpected end-of-input within/between Object entries")
            scope.expecting_value = False
            return self._value(byte)
        if byte is None:
            raise self._eof(
                "Unexpected end-of-input: expected close marker for Object (start marker at "
                f"[Source: {SOURCE}; line: {scope.start_line}, column: {scope.start_column}])"
            )
        if byte == ord("}"):
            return self._close("object")
        if byte == ord("]"):
            raise self._fail(
                f"Unexpected close marker ']': expected '}}' (for Object starting at [Source: {SOURCE}; "
                f"line: {scope.start_line}, column: {scope.start_column}])",
            )
        if scope.entries:
            if byte != ord(","):
                raise self._unexpected(self.pos, "was expecting comma to separate Object entries")
            self.pos += 1
            byte = self._skip_space()
            if byte is None:
                raise self._fail("Unexpected end-of-input within/between Object entries")
        if byte != ord('"'):
            raise self._unexpected(self.pos, "was expecting double-quote to start field name")
        self.pos += 1
        self.text = self._read_string(self.pos, in_name=True)
        self.name = self.text
        if self.text in scope.names:
            raise self._fail(f"Duplicate field '{self.text}'", self.pos)
        scope.names.add(self.text)
        scope.entries += 1
        scope.expecting_value = True
        self.token = Token.FIELD_NAME
        return self.token

    def _close(self, kind: str) -> Token:
        self.pos += 1
        self.scopes.pop()
        self.token = Token.END_ARRAY if kind == "array" else Token.END_OBJECT
        return self.token

    def _value(self, byte: int) -> Token:
        start = self.pos
        column = start - self.line_start + 1
        self.token_start = (self.line, column)
        if byte == ord("{"):
            self.pos += 1
            self.scopes.append(_Scope("object", self.line, column))
            self.token = Token.START_OBJECT
        elif byte == ord("["):
            self.pos += 1
            self.scopes.append(_Scope("array", self.line, column))
            self.token = Token.START_ARRAY
        elif byte == ord('"'):
            self.pos += 1
            self.pending_string = self.pos
            self.token = Token.VALUE_STRING
        elif byte == ord("}") or (byte == ord("]") and self.scopes[-1].kind == "array"):
            raise self._unexpected(start, "expected a value")
        elif byte == ord("+"):
            raise self._fail(
                "Unexpected character ('+' (code 43)) in numeric value: JSON spec does not allow numbers to have "
                "plus signs: enable `JsonReadFeature.ALLOW_LEADING_PLUS_SIGN_FOR_NUMBERS` to allow",
                start + 1,
            )
        elif byte == ord("-") or ord("0") <= byte <= ord("9"):
            self._read_number()
            self.token = Token.VALUE_NUMBER
        elif byte in (ord("t"), ord("f"), ord("n")):
            word = {ord("t"): "true", ord("f"): "false", ord("n"): "null"}[byte]
            self._match(word)
            self.text = word
            self.token = Token.VALUE_NULL if word == "null" else Token.VALUE_BOOLEAN
        elif byte == ord("N"):
            self._match_non_standard("NaN")
        elif byte == ord("I"):
            self._match_non_standard("Infinity")
        elif chr(byte).isalpha() or byte in (ord("_"), ord("$")):
            raise self._invalid_token("")
        else:
            raise self._unexpected(start, f"expected a valid value {VALID_VALUES}")
        assert self.token is not None
        return self.token

    # -- literals
    def _invalid_token(self, matched: str) -> JsonSyntaxError:
        """Jackson's ``_reportInvalidToken``: the token so far plus the identifier that follows."""
        word = matched
        data = self.data
        while self.pos < len(data):
            byte = data[self.pos]
            self.pos += 1
            if not _identifier_part(byte):
                break
            word += chr(byte)
            if len(word) >= 256:
                word += "..."
                break
        return self._fail(f"Unrecognized token '{word}': was expecting {VALID_VALUES}")

    def _match(self, word: str) -> None:
        data = self.data
        for i, char in enumerate(word):
            if self.pos >= len(data) or data[self.pos] != ord(char):
                raise self._invalid_token(word[:i])
            self.pos += 1
        if self.pos < len(data) and _identifier_part(data[self.pos]):
            raise self._invalid_token(word)

    def _match_non_standard(self, word: str) -> NoReturn:
        self._match(word)
        raise self._fail(f"Non-standard token '{word}': enable `JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS` to allow")

    # -- numbers
    def _digits(self) -> int:
        start = self.pos
        while self.pos < len(self.data) and 0x30 <= self.data[self.pos] <= 0x39:
            self.pos += 1
        return self.pos - start

    def _number_error(self, detail: str) -> JsonSyntaxError:
        if self.pos >= len(self.data):
            return self._eof(f"Unexpected end-of-input in a Number value: {detail}")
        return self._fail(f"Unexpected character ({_describe(self._char_at(self.pos))}) in numeric value: {detail}")

    def _read_number(self) -> None:
        data = self.data
        start = self.pos
        if data[self.pos] == ord("-"):
            self.pos += 1
            if self.pos < len(data) and data[self.pos] == ord("I"):
                self._match_non_standard_after_minus()
            if self.pos >= len(data) or not 0x30 <= data[self.pos] <= 0x39:
                raise self._number_error("expected digit (0-9) to follow minus sign, for valid numeric value")
        if data[self.pos] == ord("0") and self.pos + 1 < len(data) and 0x30 <= data[self.pos + 1] <= 0x39:
            self.pos += 1
            raise self._fail("Invalid numeric value: Leading zeroes not allowed")
        self._digits()
        if self.pos < len(data) and data[self.pos] == ord("."):
            self.pos += 1
            if not self._digits():
                raise self._number_error("Decimal point not followed by a digit")
        if self.pos < len(data) and data[self.pos] in (ord("e"), ord("E")):
            self.pos += 1
            if self.pos < len(data) and data[self.pos] in (ord("+"), ord("-")):
                self.pos += 1
            if not self._digits():
                raise self._number_error("Exponent indicator not followed by a digit")
        self.text = data[start : self.pos].decode("ascii")
        digits = sum(char.isdigit() for char in self.text.split("e")[0].split("E")[0])
        if digits > MAX_NUMBER_LENGTH:
            raise JsonSyntaxError(
                "stream_constraints_exception",
                f"Number value length ({digits}) exceeds the maximum allowed ({MAX_NUMBER_LENGTH}, from "
                "`StreamReadConstraints.getMaxNumberLength()`)",
            )

    def _match_non_standard_after_minus(self) -> NoReturn:
        self._match("Infinity")
        raise self._fail("Non-standard token '-Infinity': enable `JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS` to allow")

    # -- strings
    def _read_string(self, start: int, *, in_name: bool) -> str:
        self.pending_string = None
        self.pos = start
        data = self.data
        out: list[str] = []
        chunk = start
        while True:
            special = _STRING_SPECIAL.search(data, self.pos)
            if special is None:
                self.pos = len(data)
                raise self._eof(f"Unexpected end-of-input in {'FIELD_NAME' if in_name else 'VALUE_STRING'}")
            self.pos = special.start()
            byte = data[self.pos]
            if byte == ord('"'):
                out.append(self._utf8(chunk, self.pos))
                self.pos += 1
                self.text = "".join(out)
                return self.text
            if byte < 0x20:
                where = "name" if in_name else "string value"
                raise self._fail(
                    f"Illegal unquoted character ({_describe(byte)}): has to be escaped using backslash to be "
                    f"included in {where}"
                )
            if byte == ord("\\"):
                out.append(self._utf8(chunk, self.pos))
                out.append(self._escape())
                chunk = self.pos
                continue

    def _utf8(self, start: int, end: int) -> str:
        try:
            return self.data[start:end].decode("utf-8")
        except UnicodeDecodeError as error:
            at = start + error.start
            byte = self.data[at]
            kind = "start" if byte >= 0xF8 or 0x80 <= byte < 0xC0 or error.reason == "invalid start byte" else "middle"
            if kind == "middle":
                at += 1
                byte = self.data[at] if at < len(self.data) else byte
            raise self._fail(f"Invalid UTF-8 {kind} byte 0x{byte:02x}", at + 1) from None

    def _escape(self) -> str:
        data = self.data
        self.pos += 1
        if self.pos >= len(data):
            raise self._eof("Unexpected end-of-input in character escape sequence")
        byte = data[self.pos]
        self.pos += 1
        simple = {ord('"'): '"', ord("\\"): "\\", ord("/"): "/", ord("b"): "\b", ord("f"): "\f", ord("n"): "\n"}
        simple.update({ord("r"): "\r", ord("t"): "\t"})
        if byte in simple:
            return simple[byte]
        if byte != ord("u"):
            raise self._fail(f"Unrecognized character escape {_describe(self._char_at(self.pos - 1))}", self.pos - 1)
        value = 0
        for _ in range(4):
            if self.pos >= len(data):
                raise self._eof("Unexpected end-of-input in character escape sequence")
            digit = data[self.pos]
            self.pos += 1
            if chr(digit) not in "0123456789abcdefABCDEF":
                raise self._fail(
                    f"Unexpected character ({_describe(self._char_at(self.pos - 1))}): expected a hex-digit for "
                    "character escape sequence",
                    self.pos - 1,
                )
            value = value * 16 + int(chr(digit), 16)
        if 0xD800 <= value <= 0xDBFF:
            low = _LOW_SURROGATE_ESCAPE.match(data, self.pos)
            if low is not None:  # Java's UTF-16 string holds the pair as one character, and so must ours
                self.pos = low.end()
                return chr(0x10000 + ((value - 0xD800) << 10) + (int(low[1], 16) - 0xDC00))
        return chr(value)

    # -- values
    def string_value(self) -> str:
        """The text of the current VALUE_STRING (read now, as Jackson reads strings on demand)."""
        if self.pending_string is not None:
            return self._read_string(self.pending_string, in_name=False)
        return self.text

    def location(self) -> str:
        """Jackson's location of the parser now, as it ends an error message."""
        return self._where()

    def skip_children(self) -> None:
        if self.token not in (Token.START_OBJECT, Token.START_ARRAY):
            return
        depth = 1
        while depth:
            token = self.next_token()
            if token in (Token.START_OBJECT, Token.START_ARRAY):
                depth += 1
            elif token in (Token.END_OBJECT, Token.END_ARRAY):
                depth -= 1

    def read_value(self) -> Any:
        """The current value, read whole (objects as dicts, numbers as their JSON text's value)."""
        token = self.token
        if token is Token.START_OBJECT:
            result: dict[str, Any] = {}
            while self.next_token() is Token.FIELD_NAME:
                name = self.text
                self.next_token()
                result[name] = self.read_value()
            return result
        if token is Token.START_ARRAY:
            items = []
            while (item := self.next_token()) is not Token.END_ARRAY:
                assert item is not None
                items.append(self.read_value())
            return items
        if token is Token.VALUE_STRING:
            return self.string_value()
        if token is Token.VALUE_NUMBER:
            return float(self.text) if any(c in self.text for c in ".eE") else int(self.text)
        if token is Token.VALUE_BOOLEAN:
            return self.text == "true"
        return None


class DuplicateField(ValueError):
    """A key twice in one JSON object, which OpenSearch's parser refuses (strict duplicate detection)."""


def unique_fields(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``' ``object_pairs_hook``: the object, or ``DuplicateField`` naming the key seen twice
    (the lexer, reading the body again, then says where, as Jackson does)."""
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateField(key)
            seen.add(key)
    return value


def syntax_error(data: bytes) -> JsonSyntaxError | None:
    """The error Jackson raises on ``data`` read as one whole value, or None if it reads it."""
    lexer = Lexer(data)
    try:
        if lexer.next_token() is not None:
            lexer.skip_children()
            if lexer.token is Token.VALUE_STRING:
                lexer.string_value()
    except JsonSyntaxError as error:
        return error
    return None
