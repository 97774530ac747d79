"""Strict JSON as every file fpdiff writes holds it (inf as "inf", NaN as null, anything else unknown as its str):
here, at the bottom, so that an analysis saving its result (a plan) and the reports write the same JSON."""
from __future__ import annotations

import json
from pathlib import Path

from fpdiff.core.compare import json_float
from fpdiff.core.errors import UsageError


def plain(x: object) -> object:
    """`x` with every non-finite float spelled as JSON can hold it, at any depth of dicts, lists and tuples."""
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    return json_float(x) if isinstance(x, float) else x


def dump(data: dict, path: str | Path) -> None:
    """Write `data` as strict JSON, its folder made when missing."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(plain(data), indent=2, default=str))


def read(path: str | Path, wanted: str) -> object:
    """A JSON file fpdiff wrote; one that cannot be read or is not JSON is a one-line usage error naming `wanted`."""
    try:
        return json.loads(Path(path).read_text())
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UsageError(f"{path} is not JSON ({e}): give {wanted}") from None
