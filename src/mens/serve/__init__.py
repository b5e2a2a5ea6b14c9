"""Serving: an OpenAI-compatible HTTP API (app.py) over a batching generation engine (engine.py),
with optional grammar-constrained decoding (grammar.py)."""
