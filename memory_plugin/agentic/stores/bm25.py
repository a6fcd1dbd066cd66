"""The agentic store's BM25 mirror: the server's one embedded lexical engine (``memory_plugin.lexical_index``)."""

from memory_plugin.lexical_index import GATHERED, SEGMENT, Change, LexicalIndex, Segment, Shard, TermList

__all__ = ["GATHERED", "SEGMENT", "Change", "LexicalIndex", "Segment", "Shard", "TermList"]
