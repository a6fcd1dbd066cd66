"""Deleting conversation histories by filter, and erasing users: the one use case that spans every API."""
