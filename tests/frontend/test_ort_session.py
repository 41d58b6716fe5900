"""The onnxruntime reference sessions (aot.frontend.onnx.ort_session): "auto" takes onnxruntime's full
graph optimization only where its fused integer kernels are exact."""
from __future__ import annotations

import pytest

from aot.errors import Error
from aot.frontend.onnx import ort_session


@pytest.mark.parametrize("features, level", [((), "all"), (("x86", "avx2"), "none"),
                                             (("x86", "avx2", "avxvnni"), "all"),
                                             (("x86", "avx2", "avx512f", "avx512bw", "avx512vnni"), "all")])
def test_auto_is_all_only_where_the_integer_kernels_are_exact(monkeypatch, features, level) -> None:  # noqa: ANN001
    import aot.lower.schedule.host_x86 as hx
    monkeypatch.setattr(hx, "host_features", lambda: features)
    assert ort_session.resolve("auto") == level
    assert ort_session.resolve("basic") == "basic"


def test_an_unknown_level_is_refused() -> None:
    with pytest.raises(Error, match="must be one of auto, all"):
        ort_session.resolve("most")
