"""Evaluation of a trained model: held-out bench, gates, model card and HTML report."""
