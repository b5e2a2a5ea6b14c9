"""Turning a run into something others load: `merge` (adapter folded into the base → HF model dir)."""
