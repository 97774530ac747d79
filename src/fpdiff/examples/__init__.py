"""The built-in example models (`example:NAME`), one spec file each, plain torch that imports nothing of fpdiff;
`names()` lists them. A package, so `fpdiff.examples` is one thing whether or not a model was imported from it."""
from __future__ import annotations

from pathlib import Path


def names() -> dict[str, str]:
    """Example name -> its one-line description (the spec file's docstring)."""
    out = {}
    for p in sorted(Path(__file__).parent.glob("*.py")):
        if p.name.startswith("_"):
            continue
        text = p.read_text()
        out[p.stem] = text.split('"""')[1].strip().splitlines()[0] if '"""' in text else ""
    return out
