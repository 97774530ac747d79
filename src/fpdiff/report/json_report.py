"""The JSON report: stable keys, documented in the README."""
from __future__ import annotations

import json
from pathlib import Path

from fpdiff.core.compare import json_float


def _clean(x):
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return json_float(x) if isinstance(x, float) else x


def cleaned(data: dict) -> dict:
    """The report as its JSON file holds it (plain types, inf as "inf"), for renderers that take either."""
    return json.loads(json.dumps(_clean(data), default=str))


def dump(data: dict, path: str | Path) -> None:
    """Strict JSON for every report: inf as "inf", NaN as null, anything else unknown as its str."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(_clean(data), indent=2, default=str))

