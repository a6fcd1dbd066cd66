"""``query_string`` and ``simple_query_string``: Lucene's query syntax over the DSL's own clauses.

Both parsers work as Lucene's do: each clause gets an occurrence (must,
should, must not) from its prefix (``+``, ``-``, ``NOT``, ``!``) or from the
conjunction beside it (``AND``/``&&``/``+`` make both neighbours required, ``OR``,
``||`` or ``|`` make them optional); otherwise the ``default_operator`` decides.
A term on several fields is the best of them (``dis_max``) in ``query_string``
and their sum in ``simple_query_string``, as OpenSearch builds them.  Supported: terms,
``"phrases"`` (with ``~slop``), ``field:`` (``query_string``), groups,
``prefix*``, ``term~N`` (fuzzy), ``^boost``, and in ``query_string`` ranges
(``field:[a TO b]``, ``{a TO b}``, ``*`` for no bound, ``field:>=a``).  Fields
default to every text and keyword field of the index, as ``index.query.default_field: *``
does.  A ``query_string`` Lucene cannot parse (a parenthesis or range left open)
is the shard's 400, as on the node; ``simple_query_string`` never fails.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import re2

from memory_plugin.dsl.clauses import Bool, Clause, Disjunction, MatchAll, MatchNone, Pattern, Range
from memory_plugin.dsl.mapping import DATE, UNMAPPED
from memory_plugin.dsl.term_level import fuzzy_clause, whole_number
from memory_plugin.dsl.values import EPOCH_MILLIS, QueryParsingError, as_float, parse_date, query_object
from memory_plugin.errors import QueryShardFailure

TOKEN = re.compile(
    r'\s*(?:(?P<open>\()|(?P<close>\))|(?P<phrase>"(?:[^"\\]|\\.)*"?)|(?P<op>&&|\|\||AND\b|OR\b|NOT\b|[+\-!|])|'
    r"(?P<word>(?:[^\s()\"\\]|\\.)+))"
)
#: ``field:>=a`` and its kin: Lucene's one-sided ranges.
ONE_SIDED = re.compile(r"^(?P<op>>=|<=|>|<)(?P<bound>.+)$", re.S)
SUFFIX = re.compile(r"^(?P<body>.*?)(?:~(?P<fuzzy>\d*(?:\.\d+)?))?(?:\^(?P<boost>\d+(?:\.\d+)?))?$", re.S)

#: Bounds that keep a hostile query string cheap to parse and evaluate.
MAX_CLAUSES = 1024
MAX_DEPTH = 32


@dataclass
class Builders:
    """How a term, phrase, prefix or fuzzy term on one field becomes a clause (from ``parse``)."""

    fields: list[tuple[str, float]]
    kind_of: Callable[[str], str]
    term: Callable[[str, str, float], Clause]
    phrase: Callable[[str, str, float, int], Clause]


@dataclass(frozen=True)
class FuzzyOptions:
    """``fuzzy_prefix_length``, ``fuzzy_max_expansions`` and ``fuzzy_transpositions``: how a ``term~`` expands."""

    prefix_length: int = 0
    max_expansions: int = 50
    transpositions: bool = True


class _Parser:
    def __init__(
        self, text: str, simple: bool, default_and: bool, build: Builders, fuzzy: FuzzyOptions = FuzzyOptions()
    ) -> None:
        self.fuzzy = fuzzy
        self.text = text
        self.tokens = [(m.lastgroup or "", m.group(m.lastgroup or 0)) for m in TOKEN.finditer(text) if m.lastgroup]
        self.at = 0
        self.simple = simple
        self.default_and = default_and
        self.build = build
        self.count = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def group(self, depth: int) -> Clause:
        if depth > MAX_DEPTH:
            raise QueryParsingError("query string is nested too deeply")
        clauses: list[tuple[str, Clause]] = []
        conjunction: str | None = None
        while (token := self.peek()) is not None:
            kind, value = token
            if kind == "close":
                if depth == 0:
                    if not self.simple:
                        raise self.unparsable()
                    self.at += 1
                    continue
                break
            if kind == "op" and value in ("AND", "&&") or (self.simple and kind == "op" and value == "+" and clauses):
                conjunction = "and"
                self.at += 1
                continue
            if kind == "op" and value in ("OR", "||", "|"):
                conjunction = "or"
                self.at += 1
                continue
            occur = "must" if self.default_and else "should"
            if kind == "op" and value in ("NOT", "!", "-"):
                occur = "must_not"
                self.at += 1
            elif kind == "op" and value == "+":
                occur = "must"
                self.at += 1
            clause = self.primary(depth)
            if clause is None:
                continue
            if conjunction == "and":
                if clauses and clauses[-1][0] == "should":
                    clauses[-1] = ("must", clauses[-1][1])
                if occur == "should":
                    occur = "must"
            elif conjunction == "or" and occur == "must" and not self.simple:
                occur = "should"
            conjunction = None
            if self.simple and occur == "must_not":
                # Lucene's SimpleQueryParser negates inside its own clause: everything but the term
                occur = "must" if self.default_and else "should"
                clause = Bool(must=[MatchAll()], must_not=[clause])
            clauses.append((occur, clause))
        return combine(clauses)

    def primary(self, depth: int, field: str | None = None) -> Clause | None:
        token = self.peek()
        if token is None:
            return None
        kind, value = token
        self.at += 1
        self.count += 1
        if self.count > MAX_CLAUSES:
            raise QueryParsingError(f"query string has more than {MAX_CLAUSES} clauses")
        if kind == "open":
            inner = self.group(depth + 1)
            if self.peek() is not None and self.peek() == ("close", ")"):
                self.at += 1
            elif not self.simple:
                raise self.unparsable()
            return inner
        if kind == "phrase":
            body = value[1:-1] if value.endswith('"') and len(value) > 1 else value[1:]
            slop = 0
            nxt = self.peek()
            if nxt and nxt[0] == "word" and nxt[1].startswith("~"):
                self.at += 1
                slop = int(float(nxt[1][1:] or 0))
            return self.on_fields(field, lambda f, b: self.build.phrase(f, body.replace('\\"', '"'), b, slop))
        if kind != "word":
            return None
        if not self.simple and field is None and ":" in value and not value.startswith(":"):
            name, _, rest = value.partition(":")
            name = name.replace("\\", "")
            if rest:
                self.tokens.insert(self.at, ("word", rest))
            return self.primary(depth, field=name)
        if not self.simple and field is not None and value.startswith(("[", "{")):
            return self.range(field, value)
        if not self.simple and field is not None and (one_sided := ONE_SIDED.match(value)):
            if re.search(r"(?<!\\):", one_sided.group("bound")):
                raise self.unparsable()  # a term after ">" holds no ":" unescaped (a range's brackets may)
            op = {">": "gt", ">=": "gte", "<": "lt", "<=": "lte"}[one_sided.group("op")]
            return self.on_fields(field, lambda f, b: self._range(f, [(op, _unescaped(one_sided.group("bound")))], b))
        return self.word(value, field)

    def range(self, field: str, opening: str) -> Clause:
        """``[low TO high]``, either end ``{...}`` to leave it out, ``*`` for no bound (Lucene's range syntax)."""
        words = [opening[1:]]
        while (token := self.peek()) is not None and token[0] == "word" and not words[-1].endswith(("]", "}")):
            words.append(token[1])
            self.at += 1
        if len(words) != 3 or words[1] != "TO" or not words[2].endswith(("]", "}")) or len(words[2]) < 2:
            raise self.unparsable()
        low, high = _unescaped(words[0]), _unescaped(words[2][:-1])
        bounds = [] if low == "*" else [("gte" if opening[0] == "[" else "gt", low)]
        bounds += [] if high == "*" else [("lte" if words[2][-1] == "]" else "lt", high)]
        return self.on_fields(field, lambda f, b: self._range(f, bounds, b))

    def _range(self, path: str, bounds: list[tuple[str, str]], boost: float) -> Clause:
        """A date field reads a bound in its format (a date and time, epoch millis, or ``now`` math); another
        bound matches nothing, as the node answers ``[2020-01-01 TO *]`` on ``strict_date_time||epoch_millis``."""
        if self.build.kind_of(path) != DATE:
            return Range(path, bounds, boost)
        if not all(_date_bound(bound) for _, bound in bounds):
            return MatchNone()
        # epoch millis compare as a date, not as text
        return Range(path, [(op, int(b) if EPOCH_MILLIS.fullmatch(b.strip()) else b) for op, b in bounds], boost)

    def unparsable(self) -> QueryShardFailure:
        return QueryShardFailure(f"Failed to parse query [{self.text}]")

    def on_fields(self, field: str | None, make: Callable[[str, float], Clause]) -> Clause:
        targets = [(field, 1.0)] if field is not None else self.build.fields
        clauses = [make(f, b) for f, b in targets if self.build.kind_of(f) != UNMAPPED]
        clauses = [c for c in clauses if not isinstance(c, MatchNone)]
        if not clauses:
            return MatchNone()
        if len(clauses) == 1:
            return clauses[0]
        # query_string takes the best field (best_fields); simple_query_string adds them up (most_fields)
        return Bool(should=clauses) if self.simple else Disjunction(clauses=clauses)

    def word(self, value: str, field: str | None) -> Clause:
        parts = SUFFIX.match(value)
        assert parts is not None
        body = re.sub(r"\\(.)", r"\1", parts.group("body"))
        boost = as_float(parts.group("boost")) if parts.group("boost") else 1.0
        assert boost is not None
        if body == "*" and field is None:
            return MatchAll(boost=boost)
        if parts.group("fuzzy") is not None:
            edits = min(2, int(float(parts.group("fuzzy") or 2)))
            return self.on_fields(field, lambda f, b: self._fuzzy(f, body.lower(), edits, b * boost))
        if body.endswith("*") and "*" not in body[:-1] and "?" not in body:
            prefix = body[:-1].lower()
            return self.on_fields(field, lambda f, b: self._prefix(f, prefix, b * boost))
        return self.on_fields(field, lambda f, b: self.build.term(f, body, b * boost))

    def _fuzzy(self, path: str, term: str, edits: int, boost: float) -> Clause:
        options = self.fuzzy
        return fuzzy_clause(
            path,
            self.build.kind_of(path),
            term,
            edits,
            options.prefix_length,
            options.max_expansions,
            options.transpositions,
            boost,
        )

    def _prefix(self, path: str, prefix: str, boost: float) -> Clause:
        regex = re2.compile("(?s)" + re2.escape(prefix) + ".*")
        return Pattern(field=path, regex=regex, kind=self.build.kind_of(path), boost=boost)


def _date_bound(text: str) -> bool:
    text = text.strip()
    return (
        text.startswith("now") or bool(EPOCH_MILLIS.fullmatch(text)) or ("T" in text and parse_date(text) is not None)
    )


def _unescaped(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def combine(clauses: list[tuple[str, Clause]]) -> Clause:
    if not clauses:
        return MatchNone()
    if len(clauses) == 1 and clauses[0][0] != "must_not":
        return clauses[0][1]
    parts: dict[str, list[Clause]] = {"must": [], "should": [], "must_not": []}
    for occur, clause in clauses:
        parts[occur].append(clause)
    if not parts["must"] and not parts["should"]:
        parts["must"].append(MatchAll())
    return Bool(must=parts["must"], should=parts["should"], must_not=parts["must_not"])


QUERY_STRING_OPTIONS = frozenset(
    {
        "query", "default_field", "fields", "default_operator", "analyzer", "lenient", "boost", "_name",
        "analyze_wildcard", "allow_leading_wildcard", "fuzziness", "phrase_slop", "minimum_should_match",
        "tie_breaker", "type", "auto_generate_synonyms_phrase_query", "flags", "quote_field_suffix",
        "fuzzy_prefix_length", "fuzzy_max_expansions", "fuzzy_transpositions", "escape", "time_zone",
        "max_determinized_states", "enable_position_increments", "rewrite", "quote_analyzer",
    }
)  # fmt: skip


def parse_query_string(
    qname: str, body: Any, weighted: Callable[[str, Any], list[tuple[str, float]]], build: Builders
) -> Clause:
    body = query_object(qname, body, QUERY_STRING_OPTIONS)
    text = body.get("query")
    if not isinstance(text, str):
        raise QueryParsingError(f"[{qname}] must be provided with a [query]")
    if len(text) > 32768:
        raise QueryParsingError(f"[{qname}] query is longer than 32768 characters")
    operator = str(body.get("default_operator", "or")).lower()
    if operator not in ("or", "and"):
        raise QueryParsingError(f"[{qname}] query: unknown default_operator [{body.get('default_operator')}]")
    spec: Any = body.get("fields", body.get("default_field", "*"))
    build.fields = weighted(qname, spec)
    fuzzy = FuzzyOptions(
        whole_number(qname, "fuzzy_prefix_length", body.get("fuzzy_prefix_length"), 0),
        whole_number(qname, "fuzzy_max_expansions", body.get("fuzzy_max_expansions"), 50),
        bool(body.get("fuzzy_transpositions", True)),
    )
    clause = _Parser(text, qname == "simple_query_string", operator == "and", build, fuzzy).group(0)
    boost = as_float(body.get("boost", 1.0))
    if boost is None:
        raise QueryParsingError(f"[{qname}] query: [boost] must be a number")
    if boost != 1.0:
        return Bool(must=[clause], boost=boost)
    return clause
