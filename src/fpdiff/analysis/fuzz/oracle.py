"""A fuzz graph judged by the op sweep's own machinery: the graph becomes an ops Case and runs through
ops.sweep.run_case, so check's float64 judge, its baselines at the same dtype, the judge's cross-check,
conditioning (ill-conditioned is rounding, not a bug) and ops' flip rule decide, and nothing is written twice. The
graph's answer is `pass`, `discarded` (why: the judge cannot stand, the output is ill-conditioned), or its failing
cells, each of which the minimizer can probe on its own backend and precision."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fpdiff.analysis.fuzz.graph import ONNX, QDQ, QUANTIZE, QUANTIZED_FORMS, Sample
from fpdiff.analysis.fuzz.minimize import MAGNITUDE_RANGES
from fpdiff.analysis.ops.batch import run_case
from fpdiff.analysis.ops.case import Case, OnnxSample, OpsCell
from fpdiff.analysis.ops.quantized import NOTHING_QUANTIZED
from fpdiff.analysis.ops.quantized_cases import BY_BACKEND, ORT_QUANTIZER, ort_quantized
from fpdiff.analysis.ops.sweep import CaseOutcome, SweepConfig
from fpdiff.analysis.ops.verdict import wrong_only_in_mixes
from fpdiff.core.errors import QUANTIZED_NONE
from fpdiff.core.status import Status
from fpdiff.judging.cell import Cell

FUZZ_CATALOG = "fuzz"
PASS, DISCARDED, FAILING = "pass", "discarded", "failing"
# the cell statuses that make a graph's finding: a wrong answer, a component failing without declaring a refusal,
# a dead worker, a hang (check's FAILING statuses)
FINDING_STATUSES = (Status.MISMATCH, Status.ERROR, Status.CRASH, Status.TIMEOUT)
# why a graph is discarded, in the JSON's words
ILL_CONDITIONED = "ill-conditioned: the float64 output moves under input perturbations of one rounding as much as " \
                  "the backend departs"
UNJUDGED = "unjudged: the float64 judge failed its cross-check on this graph"
NO_REFERENCE = "float64 reference failed"
JUDGE_DISAGREES = "judge disagreement: the ONNX graph's float64 judge and its torch form's float64 value part"
DECLARED_DIMS = "declared dims: a shape variant declares dynamic a dim the program fixes (the fuzzer's declaration)"


@dataclass
class GraphPayload:
    """A Case payload that writes itself: the sample as a torch program or an ONNX graph (emit.py)."""
    sample: Sample

    @property
    def expected(self) -> list | None:
        """A second float64 opinion for an ONNX graph, whose judge is the ONNX reference evaluator: the torch form's
        float64 value. Where they part, one of the two float64 implementations is wrong and the graph has no judge
        (the evaluator's LogSoftmax gave -inf for -9600 so). A torch graph's judge is that torch value itself."""
        if self.sample.form != ONNX:
            return None
        from fpdiff.analysis.fuzz import emit
        return emit.evaluate_all(self.sample)

    def write(self, folder: Path) -> tuple[str, str | None]:
        from fpdiff.analysis.fuzz import emit
        if self.sample.form == ONNX:
            return emit.write_onnx(self.sample, folder)
        return emit.write_torch(self.sample, folder), None


def status_class(c: Cell) -> str:
    """The verdict class a minimization must keep and a signature names: mismatch, or the failure and the component
    it is pinned on (an exporter's error is not the backend's)."""
    if c.status == Status.MISMATCH:
        return "mismatch"
    culprit = str(c.component or "").split()[0] if c.component else ""
    return f"{c.status}:{culprit}" if culprit else str(c.status)


@dataclass
class GraphVerdict:
    """A graph's answer: pass, discarded (with why) or failing (with its failing cells); each cell's status too."""
    sample_id: str
    outcome: str
    failures: list[OpsCell] = field(default_factory=list)  # the failing cells, as judged
    discard: str | None = None
    statuses: dict[str, str] = field(default_factory=dict)  # "backend/precision" -> status
    duration_s: float = 0.0


def case_of(sample: Sample, description: str = "", shown: str | None = None) -> Case:
    """The sample as an ops Case: its op sequence for a name, its id for a case id; integer-valued when its output
    holds integers by construction (round, floor, sign, then only ops that move values), so ops' flip rule judges
    it: the same test as the torch form's case (emit.integer_valued). A quantize graph is the op sweep's `quantize`
    variant: each backend quantizes the torch program with its own quantizer (analysis/ops/quantized.py), whatever
    variant `shown` names (a minimized graph's)."""
    from fpdiff.analysis.fuzz.emit import integer_valued
    g = sample.graph
    payload = quantized_payload(sample) if sample.form == QDQ else GraphPayload(sample)
    variant = BY_BACKEND if sample.form == QUANTIZE else shown or variant_of(sample)
    return Case(FUZZ_CATALOG, ">".join(g.ops()), sample.id, variant=variant, description=description,
                integer_valued=integer_valued(g) and sample.form not in QUANTIZED_FORMS, payload=payload)


def quantized_payload(sample: Sample) -> OnnxSample:
    """A QDQ graph's payload: its ONNX graph quantized by ONNX Runtime's quantizer as its users run it (QDQ, uint8
    activations, int8 weights per channel, MinMax) calibrated on the graph's own inputs, the ONNX graph its float
    twin; the op sweep judges it against the quantized graph's exact emulation (analysis/ops/quantized.py). A graph
    the quantizer refuses or leaves float is judged as it is, and its cells say the quantizer made nothing."""
    import numpy as np
    import onnx

    from fpdiff.analysis.fuzz import emit
    from fpdiff.analysis.fuzz.graph import FLOAT
    model = emit.to_onnx(sample, onnx.TensorProto.FLOAT)  # the float32 model a quantizer's user has
    feeds = {n: np.asarray(v, np.float32 if x.type.dtype == FLOAT else emit.NP_DTYPES[x.type.dtype])
             for n, x, v in zip(emit.input_names(sample.graph), sample.graph.inputs, sample.values)}
    quantized = ort_quantized(model, feeds)
    if quantized is None:  # refused or left float: the float graph, which the judge discards as nothing quantized
        quantized = model
    return OnnxSample(quantized, feeds, float_model=model, quantized=True, quantized_by=ORT_QUANTIZER)


def variant_of(sample: Sample) -> str:
    """What makes the graph more than plain contiguous static inputs: layout, dynamic dims, magnitudes at a format's
    limits (the features the minimizer tests for mattering; argument domains such as positive are not variants)."""
    parts = []
    layouts = sorted({x.layout for x in sample.graph.inputs} - {"contiguous"})
    parts += layouts
    if any(x.dynamic for x in sample.graph.inputs):
        parts.append("dynamic")
    parts += sorted({x.range for x in sample.graph.inputs} & set(MAGNITUDE_RANGES))
    return "+".join(parts) or "plain"


def judge(sample: Sample, config: SweepConfig, reg, work: Path) -> tuple[GraphVerdict, CaseOutcome, list]:
    """The graph checked on every backend at every precision of `config` (ops' run_case), its verdict, the case's
    outcome, and the repro requests of its failing cells (written only when config.repro_dir is set)."""
    outcome, requests = run_case(case_of(sample), config, reg, work)
    return verdict_of(sample.id, outcome), outcome, requests


def verdict_of(sample_id: str, outcome: CaseOutcome) -> GraphVerdict:
    """Two float64 implementations that disagree discard the graph; failing cells make a failing graph; without
    them, a cell the judge cannot stand behind or an ill-conditioned output discards it (never reported as a bug);
    otherwise it passed."""
    v = GraphVerdict(sample_id, PASS, duration_s=outcome.duration_s,
                     statuses={cell_key(c): str(c.status) for c in outcome.cells})
    if outcome.skipped == NOTHING_QUANTIZED or quantized_none(outcome.cells):  # left float: nothing quantized to test
        v.outcome, v.discard = DISCARDED, NOTHING_QUANTIZED
        return v
    if outcome.skipped:
        v.outcome, v.discard = DISCARDED, f"{NO_REFERENCE}: {outcome.skipped}"
        return v
    if outcome.disagreement:  # two float64 implementations part: no verdict on this graph can stand
        v.outcome, v.discard = DISCARDED, f"{JUDGE_DISAGREES}: {outcome.disagreement.get('detail', '')}"
        return v
    failing = [c for c in outcome.cells if c.status in FINDING_STATUSES]
    v.failures = [c for c in failing if not declared_dims_refused(c)]
    if v.failures:
        v.outcome = FAILING
    elif failing:  # only shape variants whose declared dims the program fixes: fpdiff's declaration, no bug
        v.outcome, v.discard = DISCARDED, DECLARED_DIMS
    elif any(c.status == Status.ILL_CONDITIONED for c in outcome.cells):
        v.outcome, v.discard = DISCARDED, ILL_CONDITIONED
    elif any(c.status == Status.UNJUDGED for c in outcome.cells):
        v.outcome, v.discard = DISCARDED, UNJUDGED
    return v


def quantized_none(cells: list[OpsCell]) -> bool:
    """Every backend's own quantizer left the graph float (a quantize graph of ops no quantizer annotates)."""
    return bool(cells) and all(c.status == Status.UNSUPPORTED and QUANTIZED_NONE in (c.reason or "") for c in cells)


# what torch.export and dynamo say when a dim declared dynamic is one the program fixes (two dims broadcast
# against each other, one kept static in a mix, the other declared dynamic): the declaration contradicts the
# program, and the fuzzer made the declaration
_SPECIALIZED = ("Constraints violated", "specialized it to be a constant")


def declared_dims_refused(c: OpsCell) -> bool:
    """A shape variant's cell that failed because its declared dynamic dims contradict the program."""
    return c.shape_variant != "static" and c.status == Status.ERROR and any(m in c.reason for m in _SPECIALIZED)


def cell_key(c: OpsCell) -> str:
    """backend/precision, and the shape variant when the graph has dynamic dims (each variant is its own cell)."""
    key = f"{c.backend}/{c.precision}"
    return key if c.shape_variant == "static" else f"{key}/{c.shape_variant}"


def mixed_only(cells: list[OpsCell], wanted: str) -> bool:
    """Whether a failure of this class shows only where static and dynamic dims mix, its static and fully dynamic
    cells right (ops' verdict.wrong_only_in_mixes: the shape variants judged against each other)."""
    ends = ("static", "dynamic")
    return wrong_only_in_mixes({c.shape_variant: str(c.status) if c.shape_variant in ends
                                or status_class(c) == wanted else "pass" for c in cells})


def narrowed(config: SweepConfig, backend: str, precision: str) -> SweepConfig:
    """The campaign's settings for one backend and precision, with no repro written: a probe."""
    return dataclasses.replace(config, backends=(backend,), precisions=(precision,), repro_dir=None, recheck=False,
                               deadline=None)


def probe_for(failure: OpsCell, config: SweepConfig, reg, work: Path) -> Callable[[Sample], bool]:
    """Whether a candidate graph still fails the same way on the same backend and precision: the same verdict class
    (a mismatch stays a mismatch; an error stays an error of the same component), as check judges it."""
    return probe_class(failure.backend, failure.precision, status_class(failure), config, reg, work)


def probe_class(backend: str, precision: str, wanted: str, config: SweepConfig, reg,
                work: Path) -> Callable[[Sample], bool]:
    """Whether a candidate graph fails with this verdict class on this backend and precision (a probe)."""
    narrow = narrowed(config, backend, precision)

    def probe(candidate: Sample) -> bool:
        v, _, _ = judge(candidate, narrow, reg, work)
        return any(status_class(f) == wanted for f in v.failures)
    return probe
