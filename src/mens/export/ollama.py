"""An Ollama `Modelfile` for an exported GGUF: FROM the file, the chat TEMPLATE in Ollama's Go
template syntax, one `PARAMETER stop` per end-of-turn token, and the SYSTEM prompt — so
`ollama create NAME -f DIR/Modelfile` works unedited.

Ollama cannot run a Jinja template, so the TEMPLATE is written for the formats mens knows
(ChatML, which every mens run without its own template uses). Any other template is left out:
Ollama then takes the chat template from the GGUF's `tokenizer.chat_template` for the families it
recognises, and the Modelfile says so in a comment.
"""

from __future__ import annotations

import os
from pathlib import Path

from mens.files import write_text_atomic

# Ollama's own ChatML (its template/chatml.gotmpl). No `.System` block: a template that ranges
# over `.Messages` gets the system messages among them (the Modelfile's SYSTEM is prepended as one
# when a request has none), and `.System` besides, so writing both put the system prompt in twice.
CHATML_GO_TEMPLATE = (
    "{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}"
    "<|im_start|>assistant\n"
)


def is_chatml(tokenizer) -> bool:
    """Whether the tokenizer's chat template renders ChatML (what CHATML_GO_TEMPLATE writes)."""
    try:
        text = tokenizer.apply_chat_template([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}],
                                             tokenize=False, add_generation_prompt=True)
    except Exception:  # noqa: BLE001 - any template failure means "not one we can translate"
        return False
    return text == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"


def default_system(tokenizer) -> str | None:
    """The system prompt a ChatML template writes when a chat has none (Qwen2.5's: "You are a
    helpful assistant."), which the model was trained with; None when it writes none. The Modelfile
    makes it the SYSTEM, which Ollama puts first when a request brings no system message of its
    own, as the template does."""
    try:
        text = tokenizer.apply_chat_template([{"role": "user", "content": "U"}], tokenize=False,
                                             add_generation_prompt=True)
    except Exception:  # noqa: BLE001 - as in is_chatml
        return None
    turn = "<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
    head, system = "<|im_start|>system\n", text[:-len(turn)] if text.endswith(turn) else ""
    if system.startswith(head) and system.endswith("<|im_end|>\n"):
        return system[len(head):-len("<|im_end|>\n")]
    return None


def _quote(text: str) -> str:
    return '"""' + text.replace('"""', '\\"\\"\\"') + '"""'


def modelfile(gguf_from: str, *, chatml: bool, stops: list[str], system: str | None) -> str:
    lines = ["# Written by `mens export --ollama`: ollama create NAME -f Modelfile", f"FROM {gguf_from}"]
    if chatml:
        lines.append(f"TEMPLATE {_quote(CHATML_GO_TEMPLATE)}")
    else:
        lines.append("# TEMPLATE: not ChatML; Ollama reads the chat template embedded in the GGUF")
    lines += [f'PARAMETER stop "{s}"' for s in stops]
    if system:
        lines.append(f"SYSTEM {_quote(system)}")
    return "\n".join(lines) + "\n"


def write_modelfile(out_dir: Path, gguf_path: Path, *, chatml: bool, stops: list[str],
                    system: str | None) -> Path:
    """DIR/Modelfile, its FROM relative to DIR (Ollama resolves it from the Modelfile's folder)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    rel = os.path.relpath(gguf_path.resolve(), out_dir.resolve())
    path = out_dir / "Modelfile"
    write_text_atomic(path, modelfile(rel if rel.startswith(".") else f"./{rel}", chatml=chatml,
                                      stops=stops, system=system))
    return path
