"""mens rl (GRPO) and mens dpo: train on the language's own verdict (docs/rl.md)."""
