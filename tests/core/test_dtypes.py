"""The dtype-changed rule, once for every backend: on the float ops a backend records running, and on the dtypes a
whole-model cast returned."""
from fpdiff.core.dtypes import DTYPE_CHANGED, dtype_changed, mixed_dtype, too_wide


def test_most_ops_in_another_dtype_is_dtype_changed_with_the_backends_counts():
    f = dtype_changed("ort", "float16", {"float32": 7})
    assert f.kind == DTYPE_CHANGED
    assert f.message == "ort ran 0 of 7 float ops in float16; 7 in float32"
    assert f.remedy == "judge this cell as mostly wider than float16"


def test_a_quarter_in_the_requested_dtype_is_still_that_dtype():
    assert dtype_changed("iree", "float16", {"float16": 16, "float32": 19}) is None  # tinycnn's fp16 dispatches
    assert dtype_changed("iree", "float16", {"float16": 8, "float32": 27}) is not None


def test_a_graph_that_mixes_on_purpose_is_judged_on_the_share_it_asked_for():
    planned = {"float16": 11, "float32": 29}
    assert dtype_changed("ort", "float16", {"float16": 11, "float32": 21}, planned) is None
    f = dtype_changed("ort", "float16", {"float16": 0, "float32": 17}, {"float16": 14, "float32": 4})
    assert "(the graph it was handed asks for 14 of 18)" in f.message


def test_the_backends_own_remedy_is_said():
    f = dtype_changed("iree", "float64", {"float32": 3}, remedy="compile with --iree-input-demote-f64-to-f32=false")
    assert f.remedy == "compile with --iree-input-demote-f64-to-f32=false"


def test_outputs_of_another_dtype_change_a_whole_model_cast():
    f = dtype_changed("plug", "float16", returned=["float32", "int64"])
    assert f.message == "asked for float16, plug returned float32" and "not a real float16 run" in f.remedy
    assert dtype_changed("plug", "float16", returned=["float16", "int64"]) is None
    assert dtype_changed("plug", "float16") is None  # nothing recorded, nothing returned: nothing to say


def test_the_share_rule_and_the_computed_dtype():
    assert too_wide({"float16": 5, "float32": 35}, "float16")
    assert not too_wide({}, "float16")
    assert mixed_dtype({"float16": 4}, "float16") == "float16"
    assert mixed_dtype({"bfloat16": 4, "float16": 0}, "float16") == "bfloat16"
    assert mixed_dtype({"float16": 3, "float32": 1}, "float16") == "float16 (3 of 4 float ops; 1 float32)"
    assert mixed_dtype({}, "float16") is None
