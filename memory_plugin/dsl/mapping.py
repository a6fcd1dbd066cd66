"""Field types, as the ml-commons 2.19 memory indices map them (``GET .plugins-ml-memory-*/_mapping``).

A query on a ``text`` field analyses (``match``) or compares with analysed
tokens (``term``); on a ``keyword`` field it compares whole values.  With no
mapping (``None``), a field is *dynamic*: strings are both analysed text for
full-text queries and whole values for term-level ones, as before mappings
were known here.
"""

from __future__ import annotations

from collections.abc import Mapping

TEXT = "text"
KEYWORD = "keyword"
DATE = "date"
LONG = "long"
FLAT_OBJECT = "flat_object"
DYNAMIC = "dynamic"
#: A field the index does not map: nothing matches a query on it.
UNMAPPED = "unmapped"

Fields = Mapping[str, str]

META_FIELDS: Fields = {
    "name": TEXT,
    "application_type": KEYWORD,
    "user": KEYWORD,
    "create_time": DATE,
    "updated_time": DATE,
    "additional_info": FLAT_OBJECT,
}

MESSAGE_FIELDS: Fields = {
    "input": TEXT,
    "prompt_template": TEXT,
    "response": TEXT,
    "memory_id": KEYWORD,
    "origin": KEYWORD,
    "parent_message_id": KEYWORD,
    "create_time": DATE,
    "trace_number": LONG,
    "additional_info": FLAT_OBJECT,
}


def field_kind(fields: Fields | None, path: str) -> str:
    """The type of ``path``; a path inside a ``flat_object`` is one of its keyword leaves."""
    if fields is None:
        return DYNAMIC
    kind = fields.get(path)
    if kind is not None:
        return kind
    head = path.split(".", 1)[0]
    if fields.get(head) == FLAT_OBJECT:
        return FLAT_OBJECT
    return UNMAPPED


def text_field_data(path: str) -> str:
    """OpenSearch's refusal to sort or aggregate on an analysed text field."""
    return (
        "Text fields are not optimised for operations that require per-document field data like aggregations "
        "and sorting, so these operations are disabled by default. Please use a keyword field instead. "
        f"Alternatively, set fielddata=true on [{path}] in order to load field data by uninverting the inverted "
        "index. Note that this can use significant memory."
    )
