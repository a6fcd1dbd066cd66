"""The memory stores: one interface (base), SQLite and OpenSearch behind it."""
