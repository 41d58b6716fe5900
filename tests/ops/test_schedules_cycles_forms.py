"""The fewest-cycles forms of a cycles build (--optimize cycles on a Cortex-M3/M4 board): the lohi single
steps by single LDRs (AOT_OPTIMIZE_CYCLES), the depthwise window of 5 outputs as one asm step and the lohi
loop of 10 steps per iteration (a "cycles" target feature: the schedule emits dw3x3(q)_s1_5 and
lohi_2x4_x10(q) only then), and the project's compiler flags."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import aot  # noqa: E402
from aot.kernel import ir as K  # noqa: E402
from aot.kernel.interp import run_interpreted  # noqa: E402
from aot.kernel.intrinsics import INTRINSICS  # noqa: E402
from aot.pipeline.driver import CompileOptions, compile_model  # noqa: E402
from multi_check import check_expansion_and_backends, nodes  # noqa: E402
from test_schedules import conv_chain  # noqa: E402
from test_schedules_lohi_q import block_record, lohi_call_module  # noqa: E402

# a 3x3 conv (two-pixel lohi single steps), a 3x3 depthwise whose rows are 5 wide, a 1x1 conv over an
# odd number of pixels (the one-pixel lohi step)
CHAIN = ((1, 7, 5, 8), [dict(kind="conv", oc=64, k=(3, 3)), dict(kind="dw", k=(3, 3)),
                        dict(kind="conv", oc=64, k=(1, 1)), dict(kind="conv", oc=6, k=(1, 1), act="none")])


# a 5x1 conv over 8 channels: a two-pixel lohi reduction of 20 steps (the lohi loop of 10 steps per iteration)
LOOP10 = ((1, 9, 5, 8), [dict(kind="conv", oc=16, k=(5, 1)), dict(kind="conv", oc=6, k=(1, 1), act="none")])


def _model(chain: tuple = CHAIN) -> aot.ir.Model:
    return conv_chain(5, *chain)


def _inputs(model: aot.ir.Model) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    return {v.name: rng.integers(-128, 128, v.type.shape).astype(np.int8) for v in model.inputs}


def _steps(features: tuple[str, ...], chain: tuple = CHAIN) -> set[str]:
    cm = compile_model(_model(chain), CompileOptions(cpu="cortex-m4", cpu_features=features, policy="micro",
                                                flash_budget=0))
    return {n.value.name for f in cm.module.funcs for n in nodes(f.body) if isinstance(n, K.MultiAssign)}


def test_window_of_5_only_with_cycles_feature() -> None:
    """The depthwise rows of 5 take the dw3x3(q)_s1_5 step only for a target with the "cycles" feature
    (the default build keeps its single products: its instructions do not change)."""
    cycles, default = _steps(("cycles", "dsp")), _steps(("dsp",))
    assert cycles & {"dw3x3_s1_5", "dw3x3q_s1_5"} and not any(s.startswith("dw3x3") for s in default), (cycles, default)
    assert {"smlad_lohi_2x4", "smlad_lohi_1x4"} <= cycles & default


def test_loop_of_10_only_with_cycles_feature() -> None:
    """A two-pixel lohi reduction of 20 steps takes lohi_2x4_x10q only for a target with the "cycles"
    feature (the default build keeps its loop around the single steps)."""
    cycles, default = _steps(("cycles", "dsp"), LOOP10), _steps(("dsp",), LOOP10)
    assert "lohi_2x4_x10q" in cycles and not any(s.startswith("lohi_2x4_x") for s in default), (cycles, default)


@pytest.mark.parametrize("hi", [0, 1])
def test_loop_of_10_semantics(hi: int) -> None:
    """lohi_2x4_x10(q) at 8 iterations is lohi_2x4_x16(q) at 5 (80 steps, the constants after them)."""
    rng = np.random.default_rng(7 + hi)
    cv = rng.integers(-2 ** 31, 2 ** 31, 164, dtype=np.int64).astype(np.int32)
    wv = block_record(rng, 160, 1)
    assert INTRINSICS["lohi_2x4_x10"].py((cv, 1), 2, (wv, 0), 1, 8) == INTRINSICS["lohi_2x4_x16"].py(
        (cv, 1), 2, (wv, 0), 1, 5)
    assert INTRINSICS["lohi_2x4_x10q"].py((cv, 1), 2, (wv, 0), 1, 8, 9, hi) == INTRINSICS["lohi_2x4_x16q"].py(
        (cv, 1), 2, (wv, 0), 1, 5, 9, hi)


@pytest.mark.parametrize("name", ["lohi_2x4_x10", "lohi_2x4_x10q"])
def test_loop_of_10_interp_expansion_c_and_llvm_agree(name: str) -> None:
    """Two iterations, the column and the record at offsets: the interpreter, the expanded plain IR,
    host C (the portable macro) and the LLVM JIT agree with the semantics."""
    rng = np.random.default_rng(13)
    cv = rng.integers(-2 ** 31, 2 ** 31, 46, dtype=np.int64).astype(np.int32)
    wv = block_record(rng, 40, 1)
    extra = (9, 1) if name.endswith("q") else ()
    module = lohi_call_module(name, cv.size, wv.size, 4, (2, 0, 2, *extra))
    want = run_interpreted(module, [cv, wv])[0]
    assert [int(v) for v in want] == list(INTRINSICS[name].py((cv, 4), 2, (wv, 1), 0, 2, *extra))
    check_expansion_and_backends(module, [cv, wv], want)


@pytest.mark.parametrize("optimize", ["cycles", "instructions"])
def test_cycles_project_flags(tmp_path: Path, optimize: str) -> None:
    """A cycles build's Makefile and CMakeLists.txt compile with -fno-peephole2 -falign-functions=16
    (and AOT_OPTIMIZE_CYCLES); the default build's with neither."""
    from aot.board.flow import make_project
    model = _model()
    bb = make_project(model, "nucleo-l4r5zi", tmp_path / "p", _inputs(model), flash_budget=0, optimize=optimize)
    make = (bb.project_dir / "Makefile").read_text()
    cmake = (bb.project_dir / "CMakeLists.txt").read_text()
    for text in (make, cmake):
        assert ("-fno-peephole2 -falign-functions=16" in text) == (optimize == "cycles")
        assert ("AOT_OPTIMIZE_CYCLES=1" in text) == (optimize == "cycles")
    c = "\n".join(p.read_text() for p in (bb.project_dir / "model" / "src").glob("*.c"))
    assert ("_s1_5(" in c) == (optimize == "cycles")


@pytest.mark.slow  # QEMU
@pytest.mark.usefixtures("arm_toolchain")
def test_cycles_forms_bit_exact_in_qemu(tmp_path: Path) -> None:
    """The cycles build (single-LDR lohi steps, the window of 5 in asm, -fno-peephole2) on the Cortex-M4
    in QEMU gives the reference's and the host C forms' outputs."""
    from aot.board.flow import run_on_board
    model = _model()
    inputs = _inputs(model)
    outs, extra = run_on_board(model, inputs, "mps2-an386", flash_budget=0, optimize="cycles", keep_dir=tmp_path)
    c = "\n".join(p.read_text() for p in (tmp_path / "project" / "model" / "src").glob("*.c"))
    for step in ("aot_smlad_lohi_2x4(", "aot_smlad_lohi_1x4(", "_s1_5("):
        assert step in c, step
    assert "-fno-peephole2" in (tmp_path / "project" / "Makefile").read_text()
    np.testing.assert_array_equal(outs["y"], aot.reference(model, inputs)["y"])
    assert extra["match_host"] is True


@pytest.mark.slow  # QEMU
@pytest.mark.usefixtures("arm_toolchain")
def test_loop_of_10_bit_exact_in_qemu(tmp_path: Path) -> None:
    """The cycles build's lohi loop of 10 steps per iteration (its asm form, requantization included) on
    the Cortex-M4 in QEMU gives the reference's outputs."""
    from aot.board.flow import run_on_board
    model = _model(LOOP10)
    inputs = _inputs(model)
    outs, extra = run_on_board(model, inputs, "mps2-an386", flash_budget=0, optimize="cycles", keep_dir=tmp_path)
    c = "\n".join(p.read_text() for p in (tmp_path / "project" / "model" / "src").glob("*.c"))
    assert "aot_lohi_2x4_x10q(" in c
    np.testing.assert_array_equal(outs["y"], aot.reference(model, inputs)["y"])
    assert extra["match_host"] is True
