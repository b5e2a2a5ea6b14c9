"""Helpers shared by pipeline and corpus tests."""

from pathlib import Path


def fake_distribution(site: Path, name: str, files: dict[str, str], licence: str = "License-Expression: MIT") -> None:
    """An installed distribution as pip leaves one under `site`: its files, METADATA and a RECORD
    listing them (what `mens corpus gather` reads)."""
    info = site / f"{name}-1.2.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.4\nName: {name}\nVersion: 1.2\n{licence}\n")
    for rel, text in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    record = [f"{rel},," for rel in files] + [f"{name}-1.2.dist-info/METADATA,,", f"{name}-1.2.dist-info/RECORD,,"]
    (info / "RECORD").write_text("\n".join(record) + "\n")
