"""int8 BATCH_MATMUL of two activations on DSP cores (aot/lower/schedule/bmm.py): the pairing of
the reduction; bit-exact with the numpy reference on the kernel interpreter, host C and LLVM
(every operand layout, broadcast batches, odd sizes, zero points at the ends of the range, a
TRANSPOSE inlined into an operand), with TFLite Micro, and in QEMU on a Cortex-M4; chosen on DSP
cores only, the generic loop elsewhere."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aot  # noqa: E402
from aot.ir import Quant  # noqa: E402
from aot.lower.schedule import target_for_cpu  # noqa: E402
from aot.lower.schedule.bmm import pair_order  # noqa: E402
from aot.pipeline.driver import compile_model  # noqa: E402
from aot.runners.kernel_module import run_kernel_module  # noqa: E402
from test_schedules import M4, TARGETS, target_options  # noqa: E402

# (a shape, b shape, adj_x, adj_y, zero points (a, b, out))
CASES = {
    "qk-adj-y": ((2, 16, 8), (2, 16, 8), False, True, (3, -5, -10)),
    "pv-plain": ((2, 16, 16), (2, 16, 8), False, False, (-128, 7, 0)),
    "adj-x": ((1, 9, 5), (1, 9, 6), True, False, (127, -128, 12)),
    "odd-k7-broadcast": ((3, 1, 5, 7), (2, 7, 3), False, False, (-1, 0, -128)),
    "k6-adj-xy": ((2, 6, 3), (2, 5, 6), True, True, (20, 20, 127)),
    "k1": ((4, 1), (1, 5), False, False, (0, -3, 4)),
    "k12-wide": ((1, 3, 12), (1, 12, 9), False, False, (-60, 90, -20)),
}


def _model(name: str, transpose_b: bool = False) -> aot.ir.Model:
    sa, sb, adj_x, adj_y, (za, zb, zo) = CASES[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    g = aot.GraphBuilder(name.replace("-", "_"))
    a = g.input("a", sa, "int8", Quant((float(np.float32(rng.uniform(0.01, 0.05))),), (za,)))
    if transpose_b:  # B given as its transpose, turned back by a TRANSPOSE the kernel reads through
        perm = tuple(range(len(sb) - 2)) + (len(sb) - 1, len(sb) - 2)
        bt = g.input("b", tuple(sb[p] for p in perm), "int8", Quant((0.03,), (zb,)))
        b = g.op("transpose", [bt], perm=perm)
    else:
        b = g.input("b", sb, "int8", Quant((float(np.float32(rng.uniform(0.01, 0.05))),), (zb,)))
    k = sa[-2] if adj_x else sa[-1]
    y = g.op("batch_matmul", [a, b], adj_x=adj_x, adj_y=adj_y,
             out_quant=Quant((float(np.float32(0.002 * np.sqrt(k) * rng.uniform(0.5, 2))),), (zo,)))
    g.output(y, "y")
    return g.finish()


def _inputs(model: aot.ir.Model, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {v.name: rng.integers(-128, 128, v.type.shape).astype(np.int8) for v in model.inputs}


def _kernel_c(cm) -> str:  # noqa: ANN001
    from codegen_c.printer import CPrinter
    return "\n".join(CPrinter().function(f) for f in cm.module.funcs if f.name != cm.module.entry)


def _run(cm, model, inputs: dict, backend: str) -> np.ndarray:  # noqa: ANN001
    return run_kernel_module(cm.module, [inputs[v.name] for v in model.inputs], backend)[0]


def test_pairs_cover_the_reduction_once() -> None:
    for k in range(1, 14):
        ks = [x for p in pair_order(k) for x in p if x is not None]
        assert sorted(ks) == list(range(k)) and len(pair_order(k)) == (k + 1) // 2


@pytest.mark.parametrize("name", list(CASES))
def test_chosen_on_m4_and_exact(name: str) -> None:
    model = _model(name)
    cm = compile_model(model, target_options(M4))
    assert "aot_smlad(" in _kernel_c(cm)
    for seed in (0, 1):
        inputs = _inputs(model, seed)
        if seed:  # every operand at -128: products and offsets at their bounds
            inputs = {k: np.full_like(v, -128) for k, v in inputs.items()}
        ref = aot.reference(model, inputs)["y"]
        np.testing.assert_array_equal(_run(cm, model, inputs, "c").reshape(ref.shape), ref, err_msg=name)


def test_transpose_inlined_into_an_operand() -> None:
    model = _model("pv-plain", transpose_b=True)
    cm = compile_model(model, target_options(M4))
    assert len([f for f in cm.module.funcs if f.name != cm.module.entry]) == 1  # the TRANSPOSE has no kernel
    inputs = _inputs(model, 3)
    ref = aot.reference(model, inputs)["y"]
    np.testing.assert_array_equal(_run(cm, model, inputs, "c").reshape(ref.shape), ref)


def test_generic_loop_off_dsp_cores() -> None:
    model = _model("qk-adj-y")
    for name in ("nodsp-speed", "m3-speed", "dsp-size"):
        assert "aot_smlad(" not in _kernel_c(compile_model(model, target_options(TARGETS[name]))), name


@pytest.mark.slow  # the kernel interpreter
@pytest.mark.parametrize("name", list(CASES))
def test_bit_exact_on_interp_c_and_llvm(name: str) -> None:
    model = _model(name)
    inputs = _inputs(model, 4)
    ref = aot.reference(model, inputs)["y"]
    for tgt in (M4, target_for_cpu("cortex-m55")):
        cm = compile_model(model, target_options(tgt, policy="micro", stack_limit=256))
        for backend in ("interp", "c", "llvm"):
            np.testing.assert_array_equal(_run(cm, model, inputs, backend).reshape(ref.shape), ref,
                                          err_msg=f"{name} / {tgt.cpu} / {backend}")


def _tflite(sa: tuple, sb: tuple, adj_x: bool, adj_y: bool, zps: tuple, seed: int) -> bytes:
    from aot.frontend.tflite_writer import TFLiteModelBuilder
    rng = np.random.default_rng(seed)
    m = sa[-1] if adj_x else sa[-2]
    n = sb[-2] if adj_y else sb[-1]
    k = sa[-2] if adj_x else sa[-1]
    b = TFLiteModelBuilder()
    ta = b.add_tensor("a", list(sa), "int8", scale=float(rng.uniform(0.01, 0.05)), zero_point=zps[0])
    tb = b.add_tensor("b", list(sb), "int8", scale=float(rng.uniform(0.01, 0.05)), zero_point=zps[1])
    shape = list(np.broadcast_shapes(sa[:-2], sb[:-2])) + [m, n]
    ty = b.add_tensor("y", shape, "int8", scale=float(0.002 * np.sqrt(k)), zero_point=zps[2])
    b.add_operator("BATCH_MATMUL", [ta, tb], [ty], {"adj_x": adj_x, "adj_y": adj_y})
    b.set_inputs([ta, tb])
    b.set_outputs([ty])
    return b.finish()


@pytest.mark.slow  # one TFLM batch, host builds
def test_bit_exact_with_tflm() -> None:
    from tflm_util import run_tflm_batch

    from aot.frontend.tflite import load_tflite
    specs = [CASES[n] for n in ("qk-adj-y", "pv-plain", "adj-x", "odd-k7-broadcast", "k6-adj-xy")]
    blobs = [_tflite(*spec, seed=i) for i, spec in enumerate(specs)]
    xs = [[np.random.default_rng(i).integers(-128, 128, s).astype(np.int8) for s in spec[:2]]
          for i, spec in enumerate(specs)]
    want = run_tflm_batch(list(zip(blobs, xs)))
    for i, (data, x, expected) in enumerate(zip(blobs, xs, want)):
        model = load_tflite(data, f"b{i}")
        cm = compile_model(model, target_options(M4))
        assert "aot_smlad(" in _kernel_c(cm)
        for backend in ("c", "llvm"):
            got = run_kernel_module(cm.module, x, backend)[0]
            np.testing.assert_array_equal(got.reshape(-1), np.asarray(expected[0]).reshape(-1),
                                          err_msg=f"{specs[i]} {backend}")


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_bit_exact_in_qemu_on_cortex_m4() -> None:
    from aot.board.flow import run_on_board
    for name in ("qk-adj-y", "odd-k7-broadcast"):
        model = _model(name)
        inputs = _inputs(model, 6)
        ref = aot.reference(model, inputs)["y"]
        outs, extra = run_on_board(model, inputs, "mps2-an386", backend="c")
        np.testing.assert_array_equal(outs["y"], ref)
        assert extra["match_host"] is True
