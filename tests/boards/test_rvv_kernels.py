"""RISC-V vector (RVV 1.0) schedules (aot/lower/schedule/rvv.py, the routines of
aot/kernel/intrinsics_rvv.py, runtime_c/include/aot_rvv.h, aot/llvm/rvv.py): chosen on boards whose
ISA has V only; bit-exact with the numpy reference (TFLite Micro's arithmetic) on the interpreter,
the portable host C and the host LLVM; in QEMU on rv32-virt with both backends, whose code then
holds vector instructions (and sifive-e's none)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ops"))

import aot  # noqa: E402
from aot.board.boards import load_board  # noqa: E402
from aot.ir.types import Quant  # noqa: E402
from aot.kernel.intrinsics_rvv import RVV_BLOCK, gemm_weights, rvv_dw_row, rvv_gemm  # noqa: E402
from aot.kernel.rvv_asm import ROUTINES, c_literal  # noqa: E402
from aot.kernel.verify import verify_kernel_module  # noqa: E402
from aot.lower.schedule import target_for_board  # noqa: E402
from aot.pipeline.driver import compile_model  # noqa: E402
from aot.quant import fixedpoint as fp  # noqa: E402
from aot.runners.kernel_module import run_kernel_module  # noqa: E402
from test_schedules import _input, _intrinsics_used, conv_chain, target_options  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
VIRT = target_for_board(load_board("rv32-virt"))
FE310 = target_for_board(load_board("sifive-e"))

CHAINS = {
    # a window conv over 5 channels into 40 (a block of 32 and a tail of 8; K = 45: a 1-step
    # remainder before the 4-step loop), then a 1x1 over every pixel (an odd last pixel)
    "conv": ((1, 7, 5, 5), [dict(kind="conv", oc=40, k=(3, 3), s=(1, 1)), dict(kind="conv", oc=11, k=(1, 1))]),
    # strided 1x1 (one pixel at a time), relu6
    "conv-1x1-s2": ((1, 7, 5, 24), [dict(kind="conv", oc=5, k=(1, 1), s=(2, 2), pad="valid", act="relu6")]),
    # depthwise: 37 channels (a block of 32 and 5), stride 2; dilation and asymmetric padding
    "dw": ((1, 9, 7, 37), [dict(kind="dw", k=(3, 3), s=(2, 2)), dict(kind="dw", k=(3, 2), d=(2, 1), pad=(1, 0, 2, 1))]),
    # one input channel, depth multiplier 8, stride 2 (micro_speech's first layer): a convolution
    "dw-mult": ((1, 9, 8, 1), [dict(kind="dw", k=(4, 3), s=(2, 2), m=8)]),
    # fully connected: batch 3, left shifts (a tiny output scale)
    "fc": ((3, 70), [dict(kind="fc", oc=6, per_channel=True), dict(kind="fc", oc=3, out_scale=1e-5, act="none")]),
}


def _residual(sub: bool = False) -> aot.ir.Model:
    """A 3x3 convolution whose output a residual add takes (the fused epilogue: staged results,
    rvv_add); sub: the input less the convolution (the kernel's value second)."""
    rng = np.random.default_rng(9)
    g = aot.GraphBuilder("residual")
    q = Quant((0.05,), (-9,))
    x = g.input("x", (1, 6, 5, 16), "int8", q)
    wq = Quant(tuple(float(np.float32(v)) for v in rng.uniform(0.002, 0.01, 16)), (0,) * 16, 3)
    bq = Quant(tuple(float(np.float32(0.05 * s)) for s in wq.scale), (0,) * 16, 0)
    w = g.constant(rng.integers(-127, 128, (16, 3, 3, 16)).astype(np.int8), "w", quant=wq)
    b = g.constant(rng.integers(-2000, 2000, 16).astype(np.int32), "b", quant=bq)
    y = g.conv2d(x, w, b, padding="same", out_quant=Quant((0.08,), (3,)))
    if sub:
        g.output(g.sub(x, y, out_quant=Quant((0.1,), (-4,))), "y")
    else:
        g.output(g.add(y, x, out_quant=Quant((0.1,), (-4,))), "y")
    return g.finish()


def _model(chain: str) -> aot.ir.Model:
    if chain.startswith("residual"):
        return _residual(chain == "residual-sub")
    x_shape, ops = CHAINS[chain]
    return conv_chain(200 + len(chain), x_shape, ops)


def _rvv(used: set[str]) -> set[str]:
    return {u for u in used if u.startswith("rvv_")}


def test_rvv_routines_are_chosen_on_v_boards_only() -> None:
    assert "rvv" in VIRT.features and "rvv" not in FE310.features
    used = _intrinsics_used(compile_model(_model("conv"), target_options(VIRT)).module)
    assert "rvv_gemm" in used
    assert "rvv_dw_row" in _intrinsics_used(compile_model(_model("dw"), target_options(VIRT)).module)
    assert "rvv_gemm" in _intrinsics_used(compile_model(_model("dw-mult"), target_options(VIRT)).module)
    assert {"rvv_gemm", "rvv_add"} <= _intrinsics_used(compile_model(_residual(), target_options(VIRT)).module)
    for chain in ("conv", "dw"):
        assert not _rvv(_intrinsics_used(compile_model(_model(chain), target_options(FE310)).module)), chain
    size = target_for_board(load_board("rv32-virt"), "size")
    assert not _rvv(_intrinsics_used(compile_model(_model("conv"), target_options(size)).module))


@pytest.mark.parametrize("chain", list(CHAINS) + ["residual", "residual-sub"])
def test_rvv_schedules_bit_exact_on_interp_c_and_llvm(chain: str) -> None:
    model = _model(chain)
    inputs = _input(model)
    ref = aot.reference(model, inputs)["y"]
    cm = compile_model(model, target_options(VIRT, policy="micro", stack_limit=256))
    verify_kernel_module(cm.module, planned=True)
    assert _rvv(_intrinsics_used(cm.module))
    for backend in ("interp", "c", "llvm"):
        got = run_kernel_module(cm.module, [inputs["x"]], backend)[0].reshape(ref.shape)
        np.testing.assert_array_equal(got, ref, err_msg=f"{chain} / {backend}")


def _params(bias: np.ndarray, mult: np.ndarray, shift: np.ndarray) -> np.ndarray:
    oc = len(bias)
    nb = -(-oc // RVV_BLOCK)
    p = np.zeros((nb, 4, RVV_BLOCK), np.int64)
    c = np.arange(oc)
    for row, vals in enumerate((bias, mult, np.maximum(shift, 0), np.minimum(shift, 0))):
        p[c // RVV_BLOCK, row, c % RVV_BLOCK] = vals
    return p.reshape(-1).astype(np.int32)


def test_gemm_spec_is_a_requantized_dot_product() -> None:
    """rvv_gemm on gemm_weights = TFLite's per-channel requantize of bias + x . w, clamped."""
    rng = np.random.default_rng(3)
    n, oc, npix = 37, 35, 3
    x = rng.integers(-128, 128, npix * n).astype(np.int8)
    w2d = rng.integers(-128, 128, (oc, n)).astype(np.int8)
    bias = rng.integers(-5000, 5000, oc)
    mult = rng.integers(1 << 30, (1 << 31) - 1, oc)
    shift = rng.integers(-31, 3, oc)
    out = np.zeros(npix * oc, np.int8)
    rvv_gemm((out, 0), (x, 0), (gemm_weights(w2d), 0), (_params(bias, mult, shift), 0), n, npix, n, oc, oc, 5,
             -128, 127)
    acc = x.reshape(npix, n).astype(np.int64) @ w2d.T.astype(np.int64) + bias
    want = np.clip(fp.multiply_by_quantized_multiplier(acc, mult, shift) + 5, -128, 127)
    np.testing.assert_array_equal(out.reshape(npix, oc), want)
    lay = gemm_weights(w2d).reshape(2, n, RVV_BLOCK)  # [block][k][32]
    assert lay[1, 4, 2] == w2d[34, 4] and lay[1, 0, 3] == 0 and lay[0, 36, 31] == w2d[31, 36]


def test_dw_row_spec_reads_padding_as_the_input_zero_point() -> None:
    rng = np.random.default_rng(4)
    C, H, W = 3, 2, 3
    x = rng.integers(-128, 128, H * W * C).astype(np.int8)
    w = rng.integers(-128, 128, 9 * C).astype(np.int8)
    p = _params(np.zeros(C, np.int64), np.full(C, 1 << 30), np.zeros(C, np.int64))
    out = np.zeros(W * C, np.int8)
    lb = np.zeros(3 * 5 * C, np.int8)
    rvv_dw_row((out, 0), (lb, 0), (x, 0), (w, 0), (p, 0), C, H, W, 3, 3, 1, 1, 1, -1, 1, W, 7, 0, -128, 127)
    xp = np.full((H + 2, W + 2, C), 7, np.int64)
    xp[1:H + 1, 1:W + 1] = x.reshape(H, W, C)
    acc = sum(xp[ky, kx:kx + W] * w.reshape(3, 3, C)[ky, kx] for ky in range(3) for kx in range(3))
    want = np.clip(fp.multiply_by_quantized_multiplier(acc, 1 << 30, 0), -128, 127)
    np.testing.assert_array_equal(out.reshape(W, C), want)


def test_the_c_header_holds_the_assembly_text() -> None:
    header = (ROOT / "runtime_c" / "include" / "aot_rvv.h").read_text()
    for name in ROUTINES:
        assert c_literal(name) in header, name


# ----------------------------------------------------------------------------- QEMU (rv32-virt)
def _vector_ops(elf: Path) -> set[str]:
    text = subprocess.run(["riscv64-unknown-elf-objdump", "-d", "--no-show-raw-insn", str(elf)], check=True,
                          capture_output=True, text=True).stdout
    ops = {ln.split("\t")[1].split()[0] for ln in text.splitlines() if ln.count("\t") >= 1 and ":\t" in ln}
    return {o for o in ops if o.startswith(("vset", "vle", "vse", "vw", "vsext", "vsmul", "vssra", "vnsrl"))}


def _chain_model() -> aot.ir.Model:
    """A window conv into 40 channels, a depthwise over them, a 1x1: every RVV routine."""
    return conv_chain(301, (1, 6, 5, 5), [dict(kind="conv", oc=40, k=(3, 3)), dict(kind="dw", k=(3, 3)),
                                          dict(kind="conv", oc=9, k=(1, 1))])


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_rvv_models_in_qemu_bit_exact_with_vector_code(backend: str, tmp_path: Path) -> None:
    from aot.board.flow import make_project
    from aot.runners.qemu import build_project, run_elf
    for name, model in (("chain", _chain_model()), ("residual", _residual())):
        inputs = _input(model, 1)
        bb = make_project(model, "rv32-virt", tmp_path / name, inputs, backend=backend)
        elf = build_project(bb.project_dir)
        res = run_elf(elf, bb.board)
        assert res.status == 0 and res.match, res.stdout[-500:]
        ref = aot.reference(model, inputs)["y"]  # the image checks its outputs against the host build's
        np.testing.assert_array_equal(run_kernel_module(bb.compiled.module, [inputs["x"]], "c")[0].reshape(ref.shape),
                                      ref)
        ops = _vector_ops(elf)
        assert {"vle8.v", "vsetvli"} <= ops and ({"vwmacc.vx", "vsmul.vv"} <= ops or backend == "llvm"), (name, ops)
    bb = make_project(_chain_model(), "sifive-e", tmp_path / "fe310", _input(_chain_model(), 1), backend=backend)
    assert not _vector_ops(build_project(bb.project_dir))
