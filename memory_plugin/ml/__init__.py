"""ML Commons' model, connector, task and predict APIs: the setup users do around memory."""
