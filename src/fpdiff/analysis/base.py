"""What every analysis shares: the result interface the CLI, the reports (terminal, JSON, HTML, JUnit) and the run
history handle a result by (its `kind`, never the shape of its JSON), and the backend-flag channel of the API."""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import ClassVar

from fpdiff.core.errors import UsageError


class Result(ABC):
    """An analysis's answer. `kind` names the analysis (and its subcommand); the JSON report carries it as "kind"."""
    kind: ClassVar[str]
    model: str

    @abstractmethod
    def as_dict(self) -> dict:
        """The JSON report: plain values, with "kind" among its keys."""

    @abstractmethod
    def exit_code(self, strict: bool = False) -> int:
        """0: the answer holds; 1: something fails; check adds NOTHING_JUDGED. `strict`: fail on more."""

    def next_steps(self) -> list[str]:
        """fpdiff commands that explain what this result found, each once (none by default)."""
        return []


def cell_dict(cell) -> dict:
    """A cell dataclass as its JSON: its fields, its findings as plain dicts."""
    d = dict(cell.__dict__)
    d["findings"] = [f.as_dict() for f in cell.findings]
    if "revisions" in d:
        d["revisions"] = [r.as_dict() for r in cell.revisions]
    return d


def flags_by_backend(reg, backend_flags: Mapping[str, Sequence[str]] | None = None,
                     iree_flags: Sequence[str] = ()) -> dict[str, tuple[str, ...]]:
    """Each backend's own flags: `backend_flags` (backend name -> flags), with the older `iree_flags` as iree's. A
    backend the registry does not know, or one whose class takes no flags, is a usage error naming it."""
    pairs = [*(backend_flags or {}).items(), *([("iree", iree_flags)] if iree_flags else [])]
    out: dict[str, tuple[str, ...]] = {}
    for name, flags in pairs:
        flags = (flags,) if isinstance(flags, str) else tuple(flags)
        if not reg.cls(name).takes_flags:  # reg.cls: an unknown name is its own one-line error
            takes = ", ".join(n for n in reg.names() if reg.cls(n).takes_flags) or "none"
            raise UsageError(f"backend {name} takes no flags (given {' '.join(flags)}); backends that do: {takes}")
        out[name] = out.get(name, ()) + flags
    return out
