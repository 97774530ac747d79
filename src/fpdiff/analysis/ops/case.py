"""What the op sweep handles: a Case (one op, one input set, one variant, as a one-op model any backend's route
takes) and an OpsCell (one case on one backend at one precision, judged). Catalogs and variant generators make
Cases (catalog.write_case makes one a model file); the sweep turns each into a mini check (analysis/check's grid,
jobs and cell judging) and each judged check cell into an OpsCell."""
from __future__ import annotations

import dataclasses
import fnmatch
import re
from dataclasses import dataclass, field
from typing import Any

from fpdiff.core.status import Status
from fpdiff.core.support import NATIVE, NOT_IMPLEMENTED, OTHER_DTYPE  # noqa: F401  (the states, handed on)
from fpdiff.judging.cell import Cell, cell_dict

TORCH_CATALOG, ONNX_CATALOG = "torch", "onnx"
CATALOGS = (TORCH_CATALOG, ONNX_CATALOG)
SAMPLE = "sample"  # the variant of a case as its catalog gives it


@dataclass(frozen=True)
class Case:
    """One op on one input set under one variant. `payload` is the catalog's own description (torch: the OpInfo key
    and the sample's args; onnx: the one-node ModelProto, inputs and expected outputs)."""
    catalog: str  # TORCH_CATALOG or ONNX_CATALOG
    op: str  # the op's name in its catalog: "nn.functional.avg_pool2d", "AveragePool"
    case_id: str  # stable and unique across the sweep: "nn.functional.avg_pool2d#3", "test_averagepool_2d_pads"
    variant: str = SAMPLE  # SAMPLE, or the name of the generator that made it (variants.py)
    description: str = ""  # the attributes and shapes that make this case what it is, one line
    integer_valued: bool = False  # float outputs holding integers (round, floor, sign): judged by flips
    payload: Any = field(default=None, compare=False, hash=False, repr=False)

    @property
    def family(self) -> str:
        """The op family the terminal matrix groups by."""
        return family(self.op)


@dataclass
class TorchSample:
    """A torch case's payload: what to call and with what. Tensor leaves of `args`/`kwargs` become the one-op model's
    inputs (float64 here; the grid casts them per precision); every other value is baked into the model."""
    fn: str  # "opinfo:NAME:VARIANT_TEST_NAME" (an OpInfo entry's op), or a dotted callable "torch.nn.functional.conv1d"
    args: tuple = ()  # positional arguments, the sample's input first
    kwargs: dict = field(default_factory=dict)
    layout: str = "contiguous"  # CONTIGUOUS, CHANNELS_LAST or TRANSPOSED: how float inputs of rank >= 2 reach the op
    dynamic: tuple = ()  # per tensor leaf, the dims exported as dynamic (a tuple of ints each); () all static
    # tensor leaves (their indices among the tensor leaves) held as the model's parameters, not inputs: a layer's
    # weights, as a quantizer sees them (quantizers quantize a layer's constant weights, not its inputs)
    params: tuple = ()


CONTIGUOUS, CHANNELS_LAST, TRANSPOSED = "contiguous", "channels-last", "transposed"


@dataclass
class OnnxSample:
    """An ONNX case's payload: the one-node graph, its inputs by name, and the outputs its catalog expects."""
    model: Any  # onnx.ModelProto
    inputs: dict = field(default_factory=dict)  # input name -> np.ndarray
    expected: list | None = None  # the catalog's expected outputs (np.ndarray each): a second opinion on the judge
    # a quantized case (analysis/ops/quantized.py): judged against its exact float64 emulation, at its own format
    quantized: bool = False
    float_model: Any = None  # its float twin (onnx.ModelProto): the float64 truth of the format's cost; None: none
    quantized_by: str = ""  # the quantizer that made the graph ("": the case's own): the culprit of its errors


@dataclass
class OpsCell(Cell):
    """A cell of the op sweep: the judging floor's Cell (its verdict, metrics and revisions) with the case it belongs
    to and what the runtime said of its support. `case`: Case.case_id."""
    op: str = ""
    catalog: str = ""
    variant: str = ""
    case: str = ""
    family: str = ""
    support: str | None = None  # NATIVE / OTHER_DTYPE / NOT_IMPLEMENTED (support.py), None: the runtime said nothing
    support_detail: str = ""  # the runtime's own words for it (kernel types registered, precision it ran)
    repro: dict | None = None  # {"path", "retriggers": bool | None, "report"} for failing cells (repro.py)
    description: str = ""
    # the evidence the cell was judged from (judging/evidence.py's form, with "rules": the rule list's name): shared
    # by the cells of one judgement, written once per report (OpsResult.as_dict), what `fpdiff rejudge` reads
    judged_from: dict | None = field(default=None, repr=False, compare=False)

    def as_dict(self) -> dict:
        d = cell_dict(self)
        d.pop("judged_from", None)
        return d

    @classmethod
    def of(cls, case: Case, backend: str, precision: str, shape_variant: str, status: str, **kw: Any) -> OpsCell:
        """The cell of `case` on `backend` at `precision` (the sweep runs on the cpu)."""
        return cls(backend, "cpu", precision, shape_variant, Status(status), op=case.op, catalog=case.catalog,
                   variant=case.variant, case=case.case_id, family=case.family,
                   **{"description": case.description, **kw})

    @classmethod
    def judged(cls, case: Case, cell: Cell, **kw: Any) -> OpsCell:
        """A judged cell as the sweep reports it: every field of the cell (its revisions too), with its case."""
        mine = {f.name: getattr(cell, f.name) for f in dataclasses.fields(Cell)}
        return cls(**{**mine, **kw}, op=case.op, catalog=case.catalog, variant=case.variant, case=case.case_id,
                   family=case.family, description=case.description)

    @property
    def label(self) -> str:
        return f"{self.case}/{self.backend}/{self.precision}/{self.shape_variant}"



# op-name fragments -> family, first match wins; the rest are their own family (the name's stem)
_FAMILIES = [("pool", "pool"), ("conv", "conv"), ("norm", "norm"), ("interpolate", "resize"), ("resize", "resize"),
             ("upsample", "resize"), ("grid_sample", "resize"), ("gridsample", "resize"), ("softmax", "softmax"),
             ("reduce", "reduce"), ("sum", "reduce"), ("mean", "reduce"), ("prod", "reduce"), ("var", "reduce"),
             ("std", "reduce"), ("matmul", "matmul"), ("gemm", "matmul"), ("mm", "matmul"), ("linear", "matmul"),
             ("einsum", "matmul"), ("attention", "attention"), ("fft", "fft"), ("dft", "fft"), ("linalg", "linalg"),
             ("pad", "pad"), ("quantize", "quantize"), ("round", "rounding"), ("floor", "rounding"),
             ("ceil", "rounding"), ("trunc", "rounding"), ("sort", "sort"), ("topk", "sort"), ("argm", "sort")]


def family(op: str) -> str:
    """An op's family: pooling, convolution, normalization, ... or its own stem."""
    low = op.lower()
    for frag, fam in _FAMILIES:
        if frag in low:
            return fam
    stem = re.split(r"[._]", low.removeprefix("nn.functional."))[0]
    return stem or low


# ONNX ops whose torch name shares no spelling with theirs: `--ops '*nll_loss'` means the op, in either catalog
# (an op family given once selects both forms; a name whose spelling already matches needs no entry)
ALIASES = {"negativeloglikelihoodloss": ("nn.functional.nll_loss",),
           "softmaxcrossentropyloss": ("nn.functional.cross_entropy",), "reducemax": ("amax",),
           "reducemin": ("amin",), "reducelogsumexp": ("logsumexp",), "reducesum": ("sum",), "reducemean": ("mean",),
           "reduceprod": ("prod",), "reducel2": ("linalg.vector_norm",),
           "lpnormalization": ("nn.functional.normalize",), "thresholdedrelu": ("nn.functional.threshold",),
           "det": ("linalg.det",)}


def matches(name: str, patterns: list[str]) -> bool:
    """A case-insensitive glob over the op's name in its catalog, or over the torch name of an ONNX op (ALIASES)."""
    low = name.lower()
    names = (low, *ALIASES.get(low, ()))
    return any(fnmatch.fnmatchcase(n, p.lower()) for n in names for p in patterns)


def keep_first(candidates: list, probe, samples: int | None, default_reason: str) -> tuple[list[Case], str]:
    """The first `samples` candidates (all: None or < 1) that `probe` makes a Case of, and, when none, the most
    common reason `probe` gave (a string) for leaving them out."""
    from collections import Counter
    reasons: Counter = Counter()
    kept: list[Case] = []
    for c in candidates:
        got = probe(c)
        if isinstance(got, str):
            reasons[got] += 1
            continue
        kept.append(got)
        if samples and samples > 0 and len(kept) >= samples:
            break
    return kept, (reasons.most_common(1)[0][0] if reasons else default_reason)
