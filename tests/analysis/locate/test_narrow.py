"""Narrowing a failing segment to the op to blame, against a fake backend (no compiles): a refusal is the op the
prefix search ended on, a mismatch starts at the first op of the segment that departs from its baseline."""
from fpdiff.analysis.locate.bisection import Bisector, SegmentVerdict
from fpdiff.core import precision as prec
from fpdiff.core.status import Status


class FakeBisector(Bisector):
    """Units 0..n-1; a segment is judged by `judge(start, end)` -> (status, reason, rel_l2, baseline_rel_l2)."""

    def __init__(self, n: int, judge) -> None:  # no model, no worker pool
        self.units = [[f"u{i}"] for i in range(n)]
        self.asked: dict = {}
        self.p = prec.get("fp32")
        self._judge = judge

    def verdict(self, start: int, end: int) -> SegmentVerdict:
        if (start, end) not in self.asked:
            status, reason, rel, base = self._judge(start, end)
            self.asked[(start, end)] = SegmentVerdict(start, end, status, reason, rel_l2=rel, baseline_rel_l2=base)
        return self.asked[(start, end)]


def test_an_error_amplified_past_the_tolerance_is_blamed_where_it_starts():
    """Op 5 errs 100x its baseline but under the fp32 tolerance; op 12 (a cancellation) lifts it over: the
    bisection's segment is 5..12, and the op to blame is 5, not 12 and not the segment as a whole."""
    def judge(s, e):
        if s <= 5 < e:
            if e > 12:
                return Status.MISMATCH, "rel L2 far over the baseline", 1e-3, 1e-7
            return Status.PASS, "under the tolerance", 1e-6, 1e-8
        return Status.PASS, "ok", 1e-8, 1e-8
    b = FakeBisector(30, judge)
    found = b.bisect()
    assert (found.start, found.end) == (5, 13)
    seg, op, alone = b.narrow(found)
    assert op == 5 and (seg.start, seg.end) == (5, 13)  # named, the segment kept as the context it needs
    assert alone.rel_l2 == 1e-6 and alone.status == Status.PASS


def test_differences_of_summation_order_are_not_blamed():
    """Inside the segment every prefix is 2x its baseline at a few unit roundoffs: no op departs, so the op to
    blame is the one that tips the segment over (its last), not the first prefix that is merely noisy."""
    def judge(s, e):
        if s <= 3 < e and e > 9:
            return Status.MISMATCH, "far over", 1e-3, 1e-7
        return Status.PASS, "ok", 2e-7, 1e-7
    b = FakeBisector(20, judge)
    seg, op, _ = b.narrow(b.bisect())
    assert op == 9


def test_a_refusal_that_needs_its_context_names_the_refused_op():
    """The backend refuses op 14 only when op 8 feeds it (alone, op 14 compiles): the segment stays 8..14, and
    the op named is 14, the one the prefix search ended on, not 8, the segment's first."""
    def judge(s, e):
        if s <= 8 and e >= 15:
            return Status.UNSUPPORTED, "failed to legalize operation 'torch.aten.foo'", None, 0.0
        return Status.PASS, "ok", 1e-8, 1e-8
    b = FakeBisector(20, judge)
    found = b.bisect()
    assert (found.start, found.end) == (8, 15)
    seg, op, alone = b.narrow(found)
    assert op == 14 and (seg.start, seg.end) == (8, 15) and alone.status == Status.PASS


def test_a_refused_op_that_fails_alone_becomes_the_segment():
    def judge(s, e):
        if s <= 6 and e >= 11:  # the bisection stops at 6 (a boundary artifact), op 10 is refused alone as well
            return Status.ERROR, f"iree-compile failed: /tmp/x{s}/m.mlir:{e}: error: cannot lower foo", None, 0.0
        if s == 10 and e == 11:
            return Status.ERROR, "iree-compile failed: /tmp/y/m.mlir:3: error: cannot lower foo", None, 0.0
        return Status.PASS, "ok", 1e-8, 1e-8
    b = FakeBisector(16, judge)
    found = b.bisect()
    seg, op, alone = b.narrow(found)
    assert op == 10 and (seg.start, seg.end) == (10, 11) and seg is alone
