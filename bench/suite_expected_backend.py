"""A witness backend for bench/onnx_suite.py: it answers every ONNX cell with the ONNX backend test suite's own
expected outputs (the npz named by FPDIFF_SUITE_EXPECTED), so its fp32 cell's error against fpdiff's float64
judge measures how far the judge is from the suite's expected outputs, through fpdiff's own comparison.

Load with `fpdiff check MODEL.onnx --plugin bench/suite_expected_backend.py --backends suite-expected,...`.
"""
from __future__ import annotations

import os

import numpy as np

from fpdiff.backends import Backend, Prepared


class SuiteExpected(Backend):
    name = "suite-expected"
    kinds = frozenset({"onnx"})
    shape_variants = False

    def available(self) -> str | None:
        path = os.environ.get("FPDIFF_SUITE_EXPECTED")
        return None if path and os.path.exists(path) else "FPDIFF_SUITE_EXPECTED names no npz of expected outputs"

    def prepare_task(self, task) -> Prepared:
        with np.load(os.environ["FPDIFF_SUITE_EXPECTED"]) as z:
            outs = [z[k] for k in sorted(z.files, key=lambda k: int(k.split("_", 1)[0]))]

        def run(*inputs):
            return [np.array(o) for o in outs]  # np.ascontiguousarray would make a 0-d output 1-d
        return Prepared(run)
