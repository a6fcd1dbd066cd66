"""Where models, connectors, model groups and tasks live: SQLite in the data folder, or an OpenSearch index."""
