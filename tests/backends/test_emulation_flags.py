"""Host builds of C scheduled for a Cortex-M DSP core get EMULATION_FLAGS (-Og: gcc -O2's combiner
is superlinear on their straight blocks, ad_int8's host build 29 s -> 4 s); host-scheduled C keeps the
plain flags; both give the reference's results."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ops"))

import aot  # noqa: E402
from aot.api import library_files  # noqa: E402
from aot.runners.host import EMULATION_FLAGS, emulation_flags  # noqa: E402
from test_schedules import _input, conv_chain  # noqa: E402


def test_only_dsp_scheduled_c_gets_the_emulation_flags() -> None:
    model = conv_chain(3, (1, 6, 6, 8), [dict(kind="conv", oc=8, k=(3, 3))])
    m4 = aot.build(model, backend="c", cpu="cortex-m4")
    host = aot.build(model, backend="c")
    assert emulation_flags(library_files(m4.compiled)) == EMULATION_FLAGS
    assert emulation_flags(library_files(host.compiled)) == []
    x = _input(model)
    want = aot.reference(model, x)["y"]
    for lib in (m4, host):
        np.testing.assert_array_equal(lib.run(x)["y"], want)
