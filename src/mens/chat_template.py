"""Chat templates and the ends of turns, once for every stage: ChatML for a tokenizer without a
template of its own, a `chat_template` setting (a known name or a .jinja file) with the special
tokens it writes, the generation prompt, and the ids a generation stops on.

Light at import: transformers loads inside the functions.
"""

from __future__ import annotations

from pathlib import Path

from mens.errors import MensError

# ChatML: the format a tokenizer without a chat template of its own is given, in training and after.
# Plain turns render as `<|im_start|>role\ncontent<|im_end|>\n`. Tool use is rendered as Qwen2.5's
# template does (Hermes style), with no default system prompt: `tools` as a `<tools>` block in the
# system turn, an assistant's `tool_calls` as `<tool_call>\n{"name": …, "arguments": {…}}\n</tool_call>`
# (arguments as an object, or as given when already a JSON string), and consecutive `tool` results
# as `<tool_response>` blocks in one user turn. mens.serve.tools parses calls in this format.
CHATML_TEMPLATE = (
    "{%- if tools %}{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] + '\\n\\n' }}{%- endif %}"
    "{{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n'"
    " + 'You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments'"
    " + ' within <tool_call></tool_call> XML tags:\\n<tool_call>\\n'"
    " + '{\"name\": <function-name>, \"arguments\": <args-json-object>}\\n</tool_call><|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'system' and loop.first and tools %}"
    "{%- elif message['role'] == 'assistant' and message.tool_calls %}{{- '<|im_start|>assistant' }}"
    "{%- if message['content'] %}{{- '\\n' + message['content'] }}{%- endif %}"
    "{%- for call in message.tool_calls %}{%- if call.function is defined %}{%- set call = call.function %}{%- endif %}"
    "{{- '\\n<tool_call>\\n{\"name\": \"' + call.name + '\", \"arguments\": ' }}"
    "{%- if call.arguments is string %}{{- call.arguments }}{%- else %}{{- call.arguments | tojson }}{%- endif %}"
    "{{- '}\\n</tool_call>' }}{%- endfor %}{{- '<|im_end|>\\n' }}"
    "{%- elif message['role'] == 'tool' %}"
    "{%- if loop.first or messages[loop.index0 - 1]['role'] != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + message['content'] + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1]['role'] != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- else %}{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endif %}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
# Tokens that end a turn in the chat formats mens meets (ChatML, GPT-2/Qwen, the VoxTokenizer).
END_OF_TURN_TOKENS = ("<|im_end|>", "<|endoftext|>", "[EOS]")


def ensure_chat_template(tokenizer) -> str:
    """Use the tokenizer's own chat template; give ChatML to one that has none. Returns which."""
    if getattr(tokenizer, "chat_template", None):
        return "template"
    tokenizer.chat_template = CHATML_TEMPLATE
    return "chatml"


# Chat templates a `chat_template` setting may name instead of giving a file.
KNOWN_TEMPLATES = {"chatml": CHATML_TEMPLATE}


def resolve_chat_template(setting: str, where: str = "chat_template") -> str:
    """A `chat_template` setting → the Jinja text: a known name (`chatml`) or a template file."""
    if setting in KNOWN_TEMPLATES:
        return KNOWN_TEMPLATES[setting]
    path = Path(setting).expanduser()
    if not path.is_file():
        raise MensError(f"unknown chat template {setting!r} (not a known name, no such file)", where,
                        f"use one of {', '.join(KNOWN_TEMPLATES)} or a path to a .jinja file")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MensError(f"cannot read the chat template: {type(exc).__name__}", str(path), "give a UTF-8 text file") \
            from None


def template_special_tokens(template: str) -> list[str]:
    """The `<|…|>` markers a template writes (ChatML's `<|im_start|>`, `<|im_end|>`, …), in order."""
    import re

    return list(dict.fromkeys(re.findall(r"<\|[A-Za-z0-9_]+\|>", template)))


def set_chat_template(tokenizer, setting: str, where: str = "chat_template") -> list[str]:
    """Give `tokenizer` the template a `chat_template` setting names, adding as special tokens
    the markers it writes that the vocabulary lacks (else `<|im_end|>` is split into pieces and
    generation never stops on it). Returns the tokens added; see fit_embeddings for the model."""
    template = resolve_chat_template(setting, where)
    vocab = tokenizer.get_vocab()
    missing = [t for t in template_special_tokens(template) if t not in vocab]
    if missing:
        tokenizer.add_special_tokens({"additional_special_tokens": missing}, replace_extra_special_tokens=False)
    tokenizer.chat_template = template
    return missing


def fit_embeddings(model, tokenizer) -> bool:
    """Grow the model's embeddings (and output layer) to the tokenizer's size when tokens were
    added, new rows at the mean of the old (transformers' mean resizing). True when it grew."""
    from transformers.utils import logging as hf_logging

    rows = model.get_input_embeddings().weight.shape[0]
    if len(tokenizer) <= rows:
        return False
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # two long notices that mean resizing is what it does, on every load
    try:
        model.resize_token_embeddings(len(tokenizer), mean_resizing=True)
    finally:
        hf_logging.set_verbosity(verbosity)
    return True


def chat_prompt(tokenizer, user: str, system: str | None = None) -> str:
    """The generation prompt in the model's chat template, or ChatML when it has none."""
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return text + "<|im_start|>assistant\n"


def stop_token_ids(model, tokenizer) -> list[int]:
    """The ids that end a generation: the model's generation config's EOS ids first, then the
    tokenizer's EOS and the end-of-turn tokens it knows (a chat turn ends at `<|im_end|>` even
    where the base model's EOS is another token)."""
    ids: list[int] = []
    gen = getattr(model, "generation_config", None) if model is not None else None
    if gen is not None and gen.eos_token_id is not None:
        ids += gen.eos_token_id if isinstance(gen.eos_token_id, list) else [gen.eos_token_id]
    ids.append(tokenizer.eos_token_id)
    for tok in END_OF_TURN_TOKENS:
        tid = tokenizer.convert_tokens_to_ids(tok)
        if isinstance(tid, int) and tid != tokenizer.unk_token_id:
            ids.append(tid)
    return list(dict.fromkeys(i for i in ids if i is not None))


def generation_config(model, tokenizer):
    """The model's generation config with `stop_token_ids` as its EOS ids and a pad id: what a
    saved model should stop on when loaded elsewhere."""
    from transformers import GenerationConfig

    gen = getattr(model, "generation_config", None) or GenerationConfig.from_model_config(model.config)
    gen.eos_token_id = stop_token_ids(model, tokenizer)
    if gen.pad_token_id is None:
        gen.pad_token_id = tokenizer.pad_token_id
    return gen
