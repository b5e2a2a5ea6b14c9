"""mens: turn a language's own code and docs into a fine-tuned, parser-gated code assistant."""

__version__ = "0.1.0"
