"""The JSON report: stable keys, documented in the README; "kind" says which analysis wrote it."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from fpdiff.core.errors import UsageError
from fpdiff.core.jsonfile import dump, plain, read

# dump and read: every report's writer and reader, core/jsonfile.py's (a plan saves with it, a resumed sweep reads)
__all__ = ["cleaned", "dump", "load", "read"]


def cleaned(data: dict) -> dict:
    """The report as its JSON file holds it (plain types, inf as "inf"), for renderers that take either."""
    return json.loads(json.dumps(plain(data), default=str))


def load(path: str | Path) -> dict:
    """A report a --json option wrote, its "kind" said; a file that is not one is a one-line usage error."""
    data = read(path, "the file a --json option wrote")
    if not isinstance(data, dict):
        raise UsageError("not an fpdiff report: the JSON is not an object")
    return data if "kind" in data else {"kind": _legacy_kind(data, path), **data}


def _legacy_kind(report: dict, path: str | Path) -> str:
    """A report written before results carried their kind, read by its keys (deprecated: said on stderr, and to be
    refused in the next minor release)."""
    keys = set(report)
    guess = ("check" if {"cells", "reference"} <= keys else "plan" if "fpdiff_plan" in keys
             else "locate" if {"culprit", "ops"} <= keys else "ranges" if {"ops", "dtypes", "constants"} <= keys
             else None)
    if guess is None:
        raise UsageError("not an fpdiff report (no \"kind\"; check, locate, ranges or plan JSON)")
    print(f"fpdiff: warning: {path} has no \"kind\" (an older fpdiff wrote it): read as a {guess} report by its keys; "
          "this reading is deprecated and goes in the next minor release: write the report again with --json",
          file=sys.stderr)
    return guess
