"""What a training set must not teach: obvious credentials and destructive shell commands.

    safety_flags(text) -> list[str]       # pattern names found in one text
    row_flags(pair) -> list[str]          # "<pattern> in <field>" over every turn of a row

Scanned everywhere a row holds text — the prompt (or instruction), the response, the system
prompt and every message of a conversation — because a secret in a prompt is trained on just
the same. `corpus validate` quarantines flagged rows (reason `unsafe`), `corpus eval` counts them
(`safety_rejections`), and examples/gates.yaml blocks a corpus with any.

The patterns are narrow on purpose: a key-shaped literal or a known token prefix, never a
variable named `password` or a placeholder (`"<your-password>"`, `"changeme"`, `${TOKEN}`).
"""

from __future__ import annotations

import re

from mens.records import Pair

SAFETY_PATTERNS = {
    "private_key": re.compile(r"-----BEGIN (?:RSA |EC |DSA |OPENSSH |PGP )?PRIVATE KEY"),
    "aws_access_key": re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    "github_token": re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,}\b"),
    "slack_token": re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    "api_key": re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{32,}"),
    "hardcoded_secret": re.compile(
        r"(?i)\b(?:password|passwd|secret|api[_-]?key|access[_-]?token|auth[_-]?token)\b\s*[:=]\s*"
        r"[\"'](?!(?:x+|\*+|changeme|your[_-]?\w*|<[^>]*>|\$\{?\w+\}?)[\"'])[^\"'\s]{12,}[\"']"),
    "rm_rf_root": re.compile(r"\brm\s+(?:-[a-zA-Z]*[rR][a-zA-Z]*f?[a-zA-Z]*\s+|-[a-zA-Z]*f[a-zA-Z]*\s+-[rR]\s+)"
                             r"(?:--no-preserve-root\s+)?(?:/|~|\$HOME|/\*)(?=\s|$|[\"';)])"),
    "disk_wipe": re.compile(r"\b(?:mkfs(?:\.\w+)?\s+/dev/|dd\s+[^\n]*of=/dev/(?:sd|nvme|hd)|>\s*/dev/sd[a-z])"),
    "fork_bomb": re.compile(r":\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:"),
    "chmod_root": re.compile(r"\bchmod\s+-R\s+0?777\s+/(?=\s|$)"),
}


# Text each pattern cannot match without (the last, case-insensitively): a substring test is
# many times faster than a search that starts with `\b`, which the regex engine tries at every
# position; validate scans every text of every row, a fifth of its time on a real package.
_HINTS = {
    "private_key": ("PRIVATE KEY",), "aws_access_key": ("AKIA", "ASIA"), "github_token": ("gh",),
    "slack_token": ("xox",), "api_key": ("sk-",), "rm_rf_root": ("rm",), "disk_wipe": ("/dev/",),
    "fork_bomb": (":(",), "chmod_root": ("chmod",),
}
_SECRET_HINTS = ("password", "passwd", "secret", "api", "access", "auth")


def safety_flags(text: str) -> list[str]:
    lowered: str | None = None
    found = []
    for name, pattern in SAFETY_PATTERNS.items():
        hints = _HINTS.get(name)
        if hints is not None:
            if not any(h in text for h in hints):
                continue
        else:  # hardcoded_secret, case-insensitive
            lowered = text.lower() if lowered is None else lowered
            if not any(h in lowered for h in _SECRET_HINTS):
                continue
        if pattern.search(text):
            found.append(name)
    return found


def row_flags(pair: Pair) -> list[str]:
    """Every pattern found in the row, with the field it is in: `aws_access_key in prompt`."""
    if pair.messages is not None:
        fields = [(f"messages[{i}]", m["content"]) for i, m in enumerate(pair.messages)]
    else:
        fields = [("prompt", pair.prompt), ("response", pair.response)]
    if pair.system:
        fields.insert(0, ("system", pair.system))
    return [f"{name} in {field}" for field, text in fields for name in safety_flags(text)]
