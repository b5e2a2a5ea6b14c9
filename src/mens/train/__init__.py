"""Fine-tuning: QLoRA / LoRA / full on any HF causal LM, or a small model from scratch.

Light on purpose: importing `mens.train` pulls in nothing heavy; the modules do, when used.
"""
