"""Term-level queries: whole values, ranges, patterns and edit distances, compared unanalysed."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import re2

from memory_plugin.dates import OUT_OF_RANGE, DateError
from memory_plugin.dsl.clauses import Clause, Exists, Fuzzy, Ids, MatchNone, Pattern, Range, Term, TermScore
from memory_plugin.dsl.mapping import DYNAMIC, TEXT, UNMAPPED
from memory_plugin.dsl.parse_context import check_options, kind_of
from memory_plugin.dsl.values import (
    DATE_SHAPED,
    QueryParsingError,
    as_float,
    check_scalar,
    checked_date,
    is_number,
    parse_boost,
    query_object,
    single_field,
    token_name,
)
from memory_plugin.errors import ParseFailure, QueryShardFailure

#: ``index.max_terms_count``: the most values one ``terms`` query may hold.
MAX_TERMS_COUNT = 65536


#: An ``AUTO:low,high`` bound: ASCII digits that fit an int (``"٣"`` or 5000 digits are no distance).
_DISTANCE = re.compile(r"[0-9]{1,9}")


def fuzziness(qname: str, value: Any, term: str) -> int:
    """``fuzziness`` as a maximum number of edits for ``term``: 0-2, or ``AUTO[:low,high]`` by length."""
    text = str(value).strip() if not isinstance(value, bool) else ""
    if text.upper().startswith("AUTO"):
        low, high = 3, 6
        if text[4:]:
            bounds = text[5:].split(",") if text[4] == ":" else []
            if len(bounds) != 2 or not all(_DISTANCE.fullmatch(b.strip()) for b in bounds):
                raise ParseFailure("failed to find low and high distance values")
            low, high = int(bounds[0]), int(bounds[1])
        length = len(term)
        return 0 if length < low else 1 if length < high else 2
    number = as_float(text)
    if number is None or number < 0:
        raise QueryParsingError(f"[{qname}] query: invalid [fuzziness] value [{value}]")
    return min(2, int(number))


#: The most terms a fuzzy clause expands to here, whatever ``max_expansions`` asks: Lucene's clause limit.
MAX_EXPANSIONS = 1024
_WHOLE_NUMBER = re.compile(r"[+-]?[0-9]{1,19}")


def whole_number(qname: str, name: str, value: Any, default: int) -> int:
    """An integer option as ``parser.intValue()`` reads it, sign and all (the builder checks its range), clamped
    to Java's ``int``; anything else is a parsing error naming it."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | str) or not _WHOLE_NUMBER.fullmatch(str(value).strip()):
        raise QueryParsingError(f"[{qname}] query: [{name}] must be an integer, found [{value}]")
    return max(-(2**31), min(int(str(value).strip()), 2**31 - 1))


def parse_term(body: Any) -> Clause:
    fname, value, extra = single_field("term", body)
    opts: Mapping[str, Any] = value if isinstance(value, Mapping) else {"value": value}
    check_options("term", opts)
    if "value" not in opts:
        raise QueryParsingError("[term] query malformed, no [value] specified")
    if opts["value"] is None:
        raise QueryParsingError("value cannot be null")
    wanted = check_scalar("term", opts["value"])
    boost = parse_boost(
        "term", opts.get("boost", extra.get("boost", 1.0)), lambda: {"term": {fname: {"value": wanted, "boost": 1.0}}}
    )
    case_insensitive = bool(opts.get("case_insensitive", False))
    kind = kind_of(fname)
    if kind == TEXT and not case_insensitive:
        return TermScore(field=fname, kind=TEXT, term=str(wanted), boost=boost)
    if kind == TEXT:
        regex = re2.compile("(?is)" + re2.escape(str(wanted)))
        return Pattern(field=fname, regex=regex, kind=TEXT, boost=boost)
    return Term(
        field=fname,
        values=[wanted],
        kind=kind,
        case_insensitive=case_insensitive,
        constant=case_insensitive or kind == DYNAMIC,
        boost=boost,
    )


def parse_terms(body: Any) -> Clause:
    body = query_object("terms", body)
    fields = [k for k in body if k not in ("boost", "_name")]
    if not fields:
        raise QueryParsingError("[terms] query malformed, no field specified")
    if len(fields) > 1:
        raise QueryParsingError(
            f"[terms] query does not support multiple fields, found [{fields[0]}] and [{fields[1]}]"
        )
    fname = fields[0]
    values = body[fname]
    if not isinstance(values, list | tuple):
        raise QueryParsingError(f"[terms] query does not support [{fname}]")
    for v in values:
        if v is None:
            raise QueryParsingError("No value specified for terms query")
        check_scalar("terms", v)
    if len(values) > MAX_TERMS_COUNT:
        too_many = (
            f"The number of terms [{len(values)}] used in the Terms Query request has exceeded the allowed maximum "
            f"of [{MAX_TERMS_COUNT}]. This maximum can be set by changing the [index.max_terms_count] index level "
            "setting."
        )
        raise QueryShardFailure(f"failed to create query: {too_many}", because=too_many)
    return Term(
        field=fname, values=list(values), kind=kind_of(fname), boost=parse_boost("terms", body.get("boost", 1.0))
    )


def parse_range(body: Any) -> Clause:
    fname, opts, extra = single_field("range", body)
    if not isinstance(opts, Mapping):
        raise QueryParsingError(f"[range] query does not support [{fname}]")
    check_options("range", opts)
    bounds: list[tuple[str, Any]] = []
    for op in ("gt", "gte", "lt", "lte"):
        if op in opts and opts[op] is not None:
            bounds.append((op, check_range_bound(opts[op])))
    include_lower = bool(opts.get("include_lower", True))
    include_upper = bool(opts.get("include_upper", True))
    if opts.get("from") is not None:
        bounds.append(("gte" if include_lower else "gt", check_range_bound(opts["from"])))
    if opts.get("to") is not None:
        bounds.append(("lte" if include_upper else "lt", check_range_bound(opts["to"])))
    return Range(field=fname, bounds=bounds, boost=parse_boost("range", opts.get("boost", extra.get("boost", 1.0))))


def check_range_bound(value: Any) -> Any:
    if isinstance(value, Mapping | list | tuple):
        raise QueryParsingError(f"[range] query does not support value of type [{token_name(value)}]")
    if isinstance(value, str) and DATE_SHAPED.match(value):
        try:
            checked_date(value)
        except DateError as error:
            detail = f": {error}" if OUT_OF_RANGE in str(error) else ""
            raise QueryParsingError(f"failed to parse date field [{value}]{detail}") from None
    if is_number(value) and as_float(value) is None:
        raise QueryParsingError(f"[range] query: bound [{value}] must be a finite number within a double's range")
    return value


def parse_exists(body: Any) -> Clause:
    body = query_object("exists", body, ("field", "boost", "_name"))
    fname = body.get("field")
    if not isinstance(fname, str) or not fname:
        raise QueryParsingError("[exists] must be provided with a [field]")
    return Exists(field=fname, kind=kind_of(fname), boost=parse_boost("exists", body.get("boost", 1.0)))


def pattern_clause(qname: str, body: Any, translate: Callable[[str], str]) -> Clause:
    """``prefix``/``wildcard`` compiled for RE2: matching takes time linear in the text, whatever the pattern."""
    fname, value, extra = single_field(qname, body)
    opts: Mapping[str, Any] = value if isinstance(value, Mapping) else {"value": value}
    check_options(qname, opts)
    raw = opts.get("value", opts.get("wildcard") if qname == "wildcard" else None)
    if raw is None:
        raise QueryParsingError(f"[{qname}] query malformed, no [value] specified")
    raw = str(check_scalar(qname, raw))
    flags = "(?is)" if opts.get("case_insensitive") else "(?s)"
    try:
        regex = re2.compile(flags + translate(raw))
    except re2.error:
        raise QueryParsingError(f"[{qname}] query: the pattern is too large to evaluate") from None
    boost = parse_boost(qname, opts.get("boost", extra.get("boost", 1.0)))
    return Pattern(field=fname, regex=regex, kind=kind_of(fname), boost=boost)


def wildcard_regex(pattern: str) -> str:
    """A Lucene wildcard (``*``, ``?``, ``\\`` escapes) as an RE2 pattern; runs of ``*`` collapse to one."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(re2.escape(pattern[i + 1]))
            i += 2
            continue
        if ch == "*":
            if not out or out[-1] != ".*":
                out.append(".*")
        else:
            out.append("." if ch == "?" else re2.escape(ch))
        i += 1
    return "".join(out)


def parse_prefix(body: Any) -> Clause:
    return pattern_clause("prefix", body, lambda p: re2.escape(p) + ".*")


def parse_wildcard(body: Any) -> Clause:
    return pattern_clause("wildcard", body, wildcard_regex)


def parse_regexp(body: Any) -> Clause:
    """Lucene's regular expressions share RE2's core syntax; RE2 keeps matching linear in the text."""
    return pattern_clause("regexp", body, lambda p: p)


def parse_ids(body: Any) -> Clause:
    body = query_object("ids", body, ("values", "boost", "_name", "type"))
    values = body.get("values", [])
    if not isinstance(values, list | tuple):
        raise QueryParsingError("[ids] query malformed, [values] must be an array")
    for v in values:
        if isinstance(v, Mapping | list | tuple) or v is None:
            raise QueryParsingError("[ids] query malformed, values must be strings")
    return Ids(values=frozenset(str(v) for v in values), boost=parse_boost("ids", body.get("boost", 1.0)))


def parse_fuzzy(body: Any) -> Clause:
    fname, value, extra = single_field("fuzzy", body)
    opts: Mapping[str, Any] = value if isinstance(value, Mapping) else {"value": value}
    for k in opts:
        if k not in {
            "value",
            "fuzziness",
            "prefix_length",
            "max_expansions",
            "transpositions",
            "rewrite",
            "boost",
            "_name",
        }:
            raise QueryParsingError(f"[fuzzy] query does not support [{k}]")
    if opts.get("value") is None:
        raise QueryParsingError("[fuzzy] query malformed, no [value] specified")
    term = str(check_scalar("fuzzy", opts["value"]))
    prefix_length = whole_number("fuzzy", "prefix_length", opts.get("prefix_length"), 0)
    max_expansions = whole_number("fuzzy", "max_expansions", opts.get("max_expansions"), 50)
    kind = kind_of(fname)
    if kind == UNMAPPED:
        return MatchNone()
    return fuzzy_clause(
        fname,
        kind,
        term,
        fuzziness("fuzzy", opts.get("fuzziness", "AUTO"), term),
        prefix_length,
        max_expansions,
        bool(opts.get("transpositions", True)),
        parse_boost("fuzzy", opts.get("boost", extra.get("boost", 1.0))),
    )


def fuzzy_clause(
    field: str,
    kind: str,
    term: str,
    max_edits: int,
    prefix_length: int,
    max_expansions: int,
    transpositions: bool,
    boost: float,
) -> Fuzzy:
    """Lucene's FuzzyQuery on a mapped field, refusing what it refuses when the shard builds it, in its order
    (``fuzzy``, and a ``term~`` of ``query_string`` with its ``fuzzy_*`` options)."""
    for refused, why in (
        (prefix_length < 0, "prefixLength cannot be negative."),
        (max_expansions <= 0, "maxExpansions must be positive."),
    ):
        if refused:
            raise QueryShardFailure(f"failed to create query: {why}", because=why)
    return Fuzzy(
        field=field,
        kind=TEXT if kind == DYNAMIC else kind,
        term=term,
        max_edits=max_edits,
        prefix_length=prefix_length,
        max_expansions=min(max_expansions, MAX_EXPANSIONS),
        transpositions=transpositions,
        boost=boost,
    )
