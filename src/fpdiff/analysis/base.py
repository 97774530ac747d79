"""What every analysis shares: the result interface the CLI, the reports (terminal, JSON, HTML, JUnit) and the run
history handle a result by (its `kind`, never the shape of its JSON), how a notebook shows a result (its view, found
by kind), and the backend-flag channel of the API."""
from __future__ import annotations

import html
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from fpdiff.core.errors import UsageError

if TYPE_CHECKING:
    import pandas

NO_PANDAS = "to_pandas() needs pandas: pip install pandas"


class Result(ABC):
    """An analysis's answer. `kind` names the analysis (and its subcommand); the JSON report carries it as "kind".
    In a notebook it shows as its report (`_repr_html_`), `print()` shows what the terminal shows, `to_pandas()` makes
    its rows a DataFrame: each by the view its kind's declaration gives (view_of), or plain text where none does."""
    kind: ClassVar[str]
    model: str

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Every result's repr is the one line below: set on each subclass as it is made, before a @dataclass
        decorator would write a field-by-field one (a run of thousands of cells would print them all)."""
        super().__init_subclass__(**kwargs)
        if "__repr__" not in cls.__dict__:
            cls.__repr__ = Result.__repr__  # type: ignore[method-assign]

    def __repr__(self) -> str:
        """One line: the result's class, kind, model and its rows counted by status."""
        from fpdiff.sources.base import display_name
        head = f"<{type(self).__name__} {getattr(self, 'kind', '?')} {display_name(str(getattr(self, 'model', '?')))}"
        try:
            rows = rows_of(self)
        except Exception:  # a repr never raises: the line without its counts
            return head + ">"
        statuses = Counter(str(r["status"]) for r in rows if r.get("status") is not None)
        counts = ", ".join(f"{n} {s}" for s, n in statuses.most_common())
        return f"{head}: {len(rows)} row{'' if len(rows) == 1 else 's'}{': ' + counts if counts else ''}>"

    def __str__(self) -> str:
        """What the terminal shows of it (the one-line repr where its kind has no view)."""
        view = view_of(self.kind)
        return view.text(self) if view else repr(self)

    def _repr_html_(self) -> str:
        """Its report in a notebook cell: the HTML report's body without the page, its CSS scoped to the fragment."""
        view = view_of(self.kind)
        return view.html(self) if view else f"<pre>{html.escape(str(self))}</pre>"

    def to_pandas(self) -> pandas.DataFrame:
        """Its rows as a pandas DataFrame: the report's values, non-finite numbers back as floats."""
        try:
            import pandas
        except ImportError:
            raise UsageError(NO_PANDAS) from None
        frame = pandas.DataFrame(rows_of(self))
        for column in frame.columns:
            if _spelled_numbers(frame[column]):
                frame[column] = pandas.to_numeric(frame[column])
        return frame

    @abstractmethod
    def as_dict(self) -> dict:
        """The JSON report: plain values, with "kind" among its keys."""

    @abstractmethod
    def exit_code(self, strict: bool = False) -> int:
        """0: the answer holds; 1: something fails; check adds NOTHING_JUDGED. `strict`: fail on more."""

    def next_steps(self) -> list[str]:
        """fpdiff commands that explain what this result found, each once (none by default)."""
        return []


@dataclass(frozen=True)
class View:
    """How a notebook shows one kind of result. The layers above make it (the analyses' registry, from a
    declaration's renderers), so a result finds its view by kind without this layer importing theirs."""
    html: Callable[[Result], str]  # an HTML fragment: the report's body, no page around it, its CSS scoped
    text: Callable[[Result], str]  # what the terminal shows
    rows: Callable[[Result], list[dict]]  # the rows to_pandas() makes a DataFrame of


ViewFinder = Callable[[str], "View | None"]
_finders: list[ViewFinder] = []


def find_views_with(finder: ViewFinder) -> None:
    """A higher layer that knows how each kind is shown hands its finder down (the analyses' registry does, as it
    loads): the way a plugin registers, so that every registered analysis, a user's too, shows in a notebook."""
    if finder not in _finders:
        _finders.append(finder)


def view_of(kind: str) -> View | None:
    """The view of a result's kind; None where no finder knows it (the result then shows as text)."""
    for find in _finders:
        view = find(kind)
        if view is not None:
            return view
    return None


def rows_of(result: Result) -> list[dict]:
    """A result's rows (cells, ops, ...) as dicts, from its JSON report: its view's, else default_rows."""
    view = view_of(result.kind)
    return view.rows(result) if view else default_rows(result.as_dict())


def default_rows(report: dict) -> list[dict]:
    """Rows of a report no view lays out: its "cells" when it has them, else one row of its plain fields."""
    cells = report.get("cells")
    if isinstance(cells, list) and all(isinstance(c, dict) for c in cells):
        return [dict(c) for c in cells]
    return [{k: v for k, v in report.items() if not isinstance(v, (dict, list))}]


def _spelled_numbers(column: Any) -> bool:
    """A column of numbers some of which the JSON spells as text ("inf", "-inf"), to be made numbers again."""
    texts = [v for v in column if isinstance(v, str)]
    others = [v for v in column if v is not None and not isinstance(v, str)]
    return bool(texts) and set(texts) <= {"inf", "-inf"} and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in others)


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
