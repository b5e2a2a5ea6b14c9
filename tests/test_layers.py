"""The layering of src/mens, read from every import statement (those inside functions too):

    base      the top-level modules (errors, files, records, fingerprint, stage, hf …) and the
              language packs (lang/), which every stage parses with
    stages    corpus, train, evaluate, rl, export, serve (they may use one another)
    pipeline  `mens pipeline`: runs the stages, knows them through mens.stage
    entry     mens.cli and mens.__main__: the command table

A module imports from its own layer or the ones below it, never from one above: the corpus
modules once imported mens.pipeline.fingerprint, and mens.hf mens.train.bnb_cpu."""

import ast
from pathlib import Path

import mens

SRC = Path(mens.__file__).parent
LAYERS = {"base": 0, "stages": 1, "pipeline": 2, "entry": 3}
STAGE_FOLDERS = {"corpus", "train", "evaluate", "rl", "export", "serve"}
ENTRY = {"mens", "mens.cli", "mens.__main__"}


def layer(module: str) -> str:
    if module in ENTRY:
        return "entry"
    folder = module.split(".")[1]
    if folder == "pipeline":
        return folder
    return "stages" if folder in STAGE_FOLDERS else "base"


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return {n for n in names if n == "mens" or n.startswith("mens.")}


def test_no_module_imports_a_layer_above_its_own():
    upward = []
    for path in sorted(SRC.rglob("*.py")):
        mod = module_name(path)
        for name in sorted(imports(path)):
            if name != "mens" and LAYERS[layer(name)] > LAYERS[layer(mod)]:
                upward.append(f"{mod} ({layer(mod)}) imports {name} ({layer(name)})")
    assert not upward, "\n".join(upward)


def test_the_walk_sees_the_layers():
    """The check is not vacuous: it reads the modules and tells the layers apart."""
    assert layer("mens.corpus.extract") == "stages" and layer("mens.pipeline.runner") == "pipeline"
    assert layer("mens.fingerprint") == "base" == layer("mens.lang.vox") and layer("mens.cli") == "entry"
    assert "mens.fingerprint" in imports(SRC / "corpus" / "extract.py")
