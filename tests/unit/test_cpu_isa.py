"""The instruction set the start-up log and /_health report, read from /proc/cpuinfo's flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from embedder.model import cpu_isa

ZEN3 = "fpu vme sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 bmi2 vaes vpclmulqdq"
CASCADE_LAKE = "sse4_2 avx avx2 avx512f avx512dq avx512bw avx512vl avx512_vnni"
ALDER_LAKE = "sse4_2 avx avx2 avx_vnni"
SKYLAKE_X = "sse4_2 avx avx2 avx512f avx512bw"


@pytest.mark.parametrize(
    ("flags", "expected"),
    [(ZEN3, "avx2"), (CASCADE_LAKE, "avx512-vnni"), (ALDER_LAKE, "avx-vnni"), (SKYLAKE_X, "avx512"), ("sse2", "other")],
)
def test_best_integer_path_of_the_flags(tmp_path: Path, flags: str, expected: str) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nmodel name\t: x\nflags\t\t: {flags}\n\nprocessor\t: 1\nflags\t\t: {flags}\n")
    assert cpu_isa(str(cpuinfo)) == expected


def test_no_cpuinfo_is_unknown(tmp_path: Path) -> None:
    assert cpu_isa(str(tmp_path / "missing")) == "unknown"
