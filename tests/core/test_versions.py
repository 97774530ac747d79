"""The versions a report records include the CPU it ran on, with the instruction sets that decide a narrow format's
arithmetic said as present or absent, read from the machine itself."""
import platform
from pathlib import Path

import pytest

from fpdiff.core import versions


def test_every_report_names_the_cpu_with_the_instruction_sets_it_has_and_lacks():
    got = versions.report_versions(["onnxruntime"])
    assert got["cpu"] == versions.cpu() and "(" in got["cpu"]
    info = Path("/proc/cpuinfo")
    if not info.is_file() or platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip("the instruction sets are read from /proc/cpuinfo on x86-64 Linux; this machine has neither")
    flags = next(line.split(":", 1)[1].split() for line in info.read_text().splitlines() if line.startswith("flags"))
    has, _, lacks = got["cpu"].split(": ", 1)[1].partition("; no ")
    for flag, name in (("avx2", "AVX2"), ("avx512f", "AVX512F"), ("avx512_bf16", "AVX512-BF16"),
                       ("avx512_fp16", "AVX512-FP16"), ("amx_tile", "AMX")):
        where = has.split(", ") if flag in flags else lacks.split(", ")
        assert name in where, (flag, got["cpu"])


def test_the_cpu_without_cpuinfo_is_its_model_and_architecture(monkeypatch):
    versions.cpu.cache_clear()
    monkeypatch.setattr(versions, "_cpuinfo", lambda: ("", set()))
    try:
        assert versions.cpu() == f"{platform.processor() or 'unknown CPU'} ({platform.machine() or 'unknown'})"
    finally:
        versions.cpu.cache_clear()
