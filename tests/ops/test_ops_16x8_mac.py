"""The multiply-accumulate ops with int16 activations (16x8), TRANSPOSE_CONV and BATCH_MATMUL,
end to end against the tflite-micro interpreter, bit for bit.

Each case writes a single-op .tflite model (aot.frontend.tflite_writer), loads it with
aot.load, and compares TFLM's output with the numpy oracle (aot.reference, the graph op's
reference = aot.quant.reference16 / aot.ops.mac16) and with the model built for the host
through the C backend and the LLVM JIT. The seanet conv / transpose_conv files of TFLM's
repository run the same way on a seeded input, and within +-1 of their golden CSV files.
"""
from __future__ import annotations

import re
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tflm_util

from tflm_util import run_tflm_batch  # noqa: E402

import aot  # noqa: E402
from aot.errors import UnsupportedError  # noqa: E402
from aot.frontend.tflite import load_tflite  # noqa: E402
from quant_sweep import T as _T, single_op as _single_op  # noqa: E402
from aot.kernel import ir as K  # noqa: E402
from aot.kernel.intrinsics import INTRINSICS, call as intrinsic  # noqa: E402
from aot.kernel.printer import format_module  # noqa: E402
from aot.pipeline.driver import CompileOptions, compile_model  # noqa: E402
from aot.quant import fixedpoint as fp  # noqa: E402
from aot.runners.kernel_module import run_kernel_module  # noqa: E402
from conftest import SHARED  # noqa: E402

SEANET = (SHARED / "tflm-models/integration_tests/seanet")
ACTS = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"]
ACT_SCALE = {"RELU6": 6 / 24000, "RELU_N1_TO_1": 1 / 24000}  # the clamp lands inside the range


def T(shape: tuple, dtype: str = "int16", scale: object = None, zp: object = None, data: object = None,
      qdim: int = 0) -> _T:
    """A tensor of a single-op model (no data: a graph input); int16 unless said otherwise."""
    return _T(shape, dtype, scale, zp, data, qdim)


def single_op(op: str, ins: list, out: _T, options: dict | None = None) -> bytes:
    return _single_op(op, ins, [out], options)


@dataclass
class Case:
    name: str
    build: Callable[[], tuple[bytes, list]]  # -> (model bytes, inputs)
    sweep: bool = False


CASES: list[Case] = []


def rng_for(name: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(name.encode()))


def rand_x(rng: np.random.Generator, shape, dtype: str) -> np.ndarray:
    if dtype == "float32":
        return rng.standard_normal(shape).astype(np.float32)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, size=shape, dtype=np.int64).astype(dtype)


def _quant(rng: np.random.Generator, dtype: str, act: str, taps: float, ws_mean: float) -> tuple:
    """(input scale, input zp, output scale, output zp): outputs spread over most of the range."""
    if dtype == "float32":
        return None, None, None, None
    span = 18918 * 73 if dtype == "int16" else 74 * 73
    so = ACT_SCALE.get(act, float(rng.uniform(1e-3, 1e-1))) * (1 if dtype == "int16" else 150)
    si = so * (12000 if dtype == "int16" else 60) / (ws_mean * span * np.sqrt(taps))
    zi, zo = (0, 0) if dtype == "int16" else (int(rng.integers(-20, 20)), int(rng.integers(-20, 20)))
    return float(np.float32(si)), zi, float(np.float32(so)), zo


def _weights(rng, shape, dtype: str, n_scales: int):
    if dtype == "float32":
        return (rng.standard_normal(shape) * 0.3).astype(np.float32), None
    w = rng.integers(-127, 128, size=shape).astype(np.int8)
    return w, rng.uniform(0.002, 0.02, n_scales).astype(np.float32)


def _bias(rng, n: int, dtype: str | None, xdtype: str, si, ws, taps: float) -> T | None:
    if dtype is None:
        return None
    if dtype == "float32":
        return T((n,), "float32", data=rng.standard_normal(n).astype(np.float32))
    lim = int(min(0.5 * (18918 if xdtype == "int16" else 74) * 73 * np.sqrt(taps), 2 ** 30))
    if dtype == "int16":
        lim = 32767
    ws_all = ws if ws.size == n else np.repeat(ws, n)
    return T((n,), dtype, data=rng.integers(-lim, lim + 1, n).astype(dtype),
             scale=(np.float32(si) * ws_all).astype(np.float32), zp=[0] * n)


def _bias_dtype(xdtype: str, want: str | None) -> str | None:
    if want is None:
        return None
    return {"float32": "float32", "int8": "int32"}.get(xdtype, want)


# ========================================================================== cases

def conv_case(name, dtype, n, h, w, cin, cout, k, stride, dil, padding, act, bias="int64", per_channel=True,
              sweep=False) -> None:
    def build():
        rng = rng_for(name)
        wt, ws = _weights(rng, (cout, *k, cin), dtype, cout if per_channel else 1)
        si, zi, so, zo = _quant(rng, dtype, act, k[0] * k[1] * cin, 0.011)
        x = rand_x(rng, (n, h, w, cin), dtype)
        b = _bias(rng, cout, _bias_dtype(dtype, bias), dtype, si, ws, k[0] * k[1] * cin)
        ins = [T(x.shape, dtype, si, zi), T(wt.shape, wt.dtype.name, ws, 0, wt, 0), b]
        out = T(conv_out(x.shape, k, stride, dil, padding, cout), dtype, so, zo)
        return single_op("CONV_2D", ins, out, _conv_opts(padding, stride, dil, act)), [x]
    CASES.append(Case(name, build, sweep))


def _conv_opts(padding, stride, dil, act) -> dict:
    return {"padding": padding, "stride_w": stride[1], "stride_h": stride[0], "dilation_w_factor": dil[1],
            "dilation_h_factor": dil[0], "fused_activation_function": act}


def conv_out(xshape, k, stride, dil, padding, cout) -> tuple:
    n, h, w, _ = xshape
    dims = []
    for size, kk, s, d in zip((h, w), k, stride, dil):
        eff = (kk - 1) * d + 1
        dims.append((size + s - 1) // s if padding == "SAME" else (size - eff + s) // s)
    return (n, dims[0], dims[1], cout)


def dw_case(name, dtype, n, h, w, cin, mult, k, stride, dil, padding, act, per_channel=True, sweep=False) -> None:
    def build():
        rng = rng_for(name)
        cout = cin * mult
        wt, ws = _weights(rng, (1, *k, cout), dtype, cout if per_channel else 1)
        si, zi, so, zo = _quant(rng, dtype, act, k[0] * k[1], 0.011)
        x = rand_x(rng, (n, h, w, cin), dtype)
        b = _bias(rng, cout, _bias_dtype(dtype, "int64"), dtype, si, ws, k[0] * k[1])
        ins = [T(x.shape, dtype, si, zi), T(wt.shape, wt.dtype.name, ws, 0, wt, 3), b]
        opts = _conv_opts(padding, stride, dil, act) | {"depth_multiplier": mult}
        return single_op("DEPTHWISE_CONV_2D", ins, T(conv_out(x.shape, k, stride, dil, padding, cout), dtype, so, zo),
                         opts), [x]
    CASES.append(Case(name, build, sweep))


def fc_case(name, dtype, in_shape, out_c, act, bias="int64", keep=False, per_channel=False, wzp=0,
            sweep=False) -> None:
    def build():
        rng = rng_for(name)
        depth = in_shape[-1]
        wt, ws = _weights(rng, (out_c, depth), dtype, out_c if per_channel else 1)
        si, zi, so, zo = _quant(rng, dtype, act, depth, 0.011)
        x = rand_x(rng, in_shape, dtype)
        b = _bias(rng, out_c, _bias_dtype(dtype, bias), dtype, si, ws, depth)
        ins = [T(x.shape, dtype, si, zi), T(wt.shape, wt.dtype.name, ws, wzp if ws is not None else None, wt, 0), b]
        out_shape = tuple(in_shape[:-1]) + (out_c,) if keep else (int(np.prod(in_shape)) // depth, out_c)
        return single_op("FULLY_CONNECTED", ins, T(out_shape, dtype, so, zo),
                         {"fused_activation_function": act, "keep_num_dims": keep}), [x]
    CASES.append(Case(name, build, sweep))


def tconv_case(name, dtype, n, ih, iw, cin, cout, k, stride, padding, act="NONE", bias="int64", sweep=False,
               shape_input=False) -> None:
    """shape_input: output_shape is a model input (as in TFLM's seanet files), given the right values."""
    def build():
        rng = rng_for(name)
        (kh, kw), (sh, sw) = k, stride
        oh, ow = (ih * sh, iw * sw) if padding == "SAME" else ((ih - 1) * sh + kh, (iw - 1) * sw + kw)
        wt, ws = _weights(rng, (cout, kh, kw, cin), dtype, cout)
        taps = max(1.0, cin * kh * kw / (sh * sw))
        si, zi, so, zo = _quant(rng, dtype, act, taps, 0.011)
        x = rand_x(rng, (n, ih, iw, cin), dtype)
        b = _bias(rng, cout, _bias_dtype(dtype, bias), dtype, si, ws, taps)
        shape = np.array([n, oh, ow, cout], dtype=np.int32)
        ins = [T((4,), "int32", data=None if shape_input else shape), T(wt.shape, wt.dtype.name, ws, 0, wt, 0),
               T(x.shape, dtype, si, zi)]
        ins += [b] if b is not None else []
        return single_op("TRANSPOSE_CONV", ins, T((n, oh, ow, cout), dtype, so, zo),
                         {"padding": padding, "stride_w": sw, "stride_h": sh, "fused_activation_function": act}), \
            [shape, x] if shape_input else [x]
    CASES.append(Case(name, build, sweep))


def bmm_case(name, dtype, sa, sb, adj_x=False, adj_y=False, const_b=False, sweep=False) -> None:
    def build():
        rng = rng_for(name)
        a, b = rand_x(rng, sa, dtype), rand_x(rng, sb, dtype)
        m = sa[-1] if adj_x else sa[-2]
        kk = sa[-2] if adj_x else sa[-1]
        nn = sb[-2] if adj_y else sb[-1]
        out_shape = tuple(np.broadcast_shapes(sa[:-2], sb[:-2])) + (m, nn)
        if dtype == "float32":
            qa = qb = qo = (None, None)
        else:
            za, zb, zo = ((0, 0, 0) if dtype == "int16" else tuple(int(v) for v in rng.integers(-30, 30, 3)))
            sa_, sb_ = float(rng.uniform(1e-3, 1e-2)), float(rng.uniform(1e-3, 1e-2))
            spread = (18918.0 ** 2 if dtype == "int16" else 74.0 ** 2) * np.sqrt(kk)
            top = 24000 if dtype == "int16" else 90
            qa, qb, qo = (sa_, za), (sb_, zb), (float(np.float32(sa_ * sb_ * spread / top)), zo)
        tb = T(sb, dtype, *qb, data=b if const_b else None)
        model = single_op("BATCH_MATMUL", [T(sa, dtype, *qa), tb], T(out_shape, dtype, *qo),
                          {"adj_x": adj_x, "adj_y": adj_y})
        return model, [a] if const_b else [a, b]
    CASES.append(Case(name, build, sweep))


for _dt in ("int16", "int8"):
    for _act in ACTS:
        conv_case(f"conv_{_dt}_{_act.lower()}", _dt, 1, 9, 8, 3, 5, (3, 3), (1, 1), (1, 1), "SAME", _act)
        fc_case(f"fc_{_dt}_{_act.lower()}", _dt, (2, 37), 13, _act)
        dw_case(f"dw_{_dt}_{_act.lower()}", _dt, 1, 8, 7, 4, 2, (3, 3), (1, 1), (1, 1), "SAME", _act)
conv_case("conv_int16_int32_bias", "int16", 1, 8, 7, 3, 4, (3, 3), (1, 1), (1, 1), "SAME", "NONE", bias="int32")
conv_case("conv_int16_no_bias", "int16", 1, 6, 6, 3, 4, (3, 3), (2, 1), (1, 1), "VALID", "RELU", bias=None)
conv_case("conv_int16_per_tensor_1x1", "int16", 1, 7, 7, 3, 4, (1, 1), (1, 1), (1, 1), "VALID", "NONE",
          per_channel=False)
conv_case("conv_int16_dilated", "int16", 2, 10, 10, 2, 3, (3, 2), (1, 2), (2, 1), "SAME", "RELU6")
conv_case("conv_int16_deep_int32_wraps", "int16", 1, 4, 4, 96, 2, (3, 3), (1, 1), (1, 1), "SAME", "NONE",
          bias="int32")
dw_case("dw_int16_dilated_s2", "int16", 1, 12, 11, 2, 3, (3, 2), (2, 2), (2, 3), "VALID", "NONE")
dw_case("dw_int16_per_tensor", "int16", 1, 6, 6, 3, 1, (3, 3), (1, 1), (1, 1), "SAME", "NONE", per_channel=False)
fc_case("fc_int16_no_bias", "int16", (2, 16), 5, "NONE", bias=None)
fc_case("fc_int16_keep_num_dims", "int16", (2, 3, 10), 4, "NONE", keep=True)
fc_case("fc_int16_per_channel", "int16", (3, 24), 9, "RELU", per_channel=True)
for _dt in ("float32", "int8", "int16"):
    tconv_case(f"tconv_{_dt}_same_s2", _dt, 1, 4, 5, 3, 4, (3, 3), (2, 2), "SAME")
    tconv_case(f"tconv_{_dt}_valid_s1", _dt, 1, 5, 4, 2, 3, (2, 3), (1, 1), "VALID")
    tconv_case(f"tconv_{_dt}_no_bias", _dt, 1, 3, 3, 2, 2, (3, 3), (2, 1), "SAME", bias=None)
    tconv_case(f"tconv_{_dt}_relu", _dt, 1, 3, 4, 3, 2, (2, 2), (2, 2), "SAME", act="RELU")
    bmm_case(f"bmm_{_dt}_plain", _dt, (2, 3, 5), (2, 5, 4))
    bmm_case(f"bmm_{_dt}_adj_x", _dt, (2, 5, 3), (2, 5, 4), adj_x=True)
    bmm_case(f"bmm_{_dt}_adj_y", _dt, (1, 3, 5), (1, 4, 5), adj_y=True)
    bmm_case(f"bmm_{_dt}_adj_xy_broadcast", _dt, (2, 1, 5, 3), (3, 4, 5), adj_x=True, adj_y=True)
    bmm_case(f"bmm_{_dt}_const_rhs", _dt, (4, 6), (6, 3), const_b=True)
tconv_case("tconv_int16_int16_bias", "int16", 1, 2, 5, 3, 2, (1, 4), (1, 2), "SAME", bias="int16")
tconv_case("tconv_int16_seanet_like", "int16", 1, 1, 10, 8, 4, (3, 4), (1, 2), "VALID")
for _dt in ("float32", "int8", "int16"):
    tconv_case(f"tconv_{_dt}_shape_input", _dt, 1, 3, 4, 3, 2, (3, 2), (2, 2), "SAME", shape_input=True)
tconv_case("tconv_int16_shape_input_valid", "int16", 1, 1, 5, 4, 3, (3, 4), (1, 2), "VALID", shape_input=True)
for _k in range(6):
    _r = np.random.default_rng(7000 + _k)
    _dt = ("int16", "int8")[_k % 2]
    _s = (int(_r.integers(1, 3)), int(_r.integers(1, 3)))
    _d = (1, 1) if _k % 3 else (int(_r.integers(1, 3)), int(_r.integers(1, 3)))
    conv_case(f"conv_sweep{_k}", _dt, 1, int(_r.integers(5, 12)), int(_r.integers(5, 12)), int(_r.integers(1, 9)),
              int(_r.integers(1, 9)), (int(_r.integers(1, 4)), int(_r.integers(1, 4))), _s, _d,
              ["SAME", "VALID"][_k % 2], ACTS[_k % 4], bias=["int64", "int32", None][_k % 3], sweep=True)
    dw_case(f"dw_sweep{_k}", _dt, 1, int(_r.integers(5, 12)), int(_r.integers(5, 12)), int(_r.integers(1, 6)),
            int(_r.integers(1, 4)), (int(_r.integers(1, 4)), int(_r.integers(1, 4))), _s, _d,
            ["SAME", "VALID"][_k % 2], ACTS[_k % 4], sweep=True)
    fc_case(f"fc_sweep{_k}", _dt, (int(_r.integers(1, 4)), int(_r.integers(1, 200))), int(_r.integers(1, 30)),
            ACTS[_k % 4], per_channel=bool(_k % 2) and _dt == "int16", sweep=True)
    tconv_case(f"tconv_sweep{_k}", ("int16", "int8", "float32")[_k % 3], 1, int(_r.integers(1, 6)),
               int(_r.integers(1, 6)), int(_r.integers(1, 6)), int(_r.integers(1, 6)),
               (int(_r.integers(1, 5)), int(_r.integers(1, 5))), (int(_r.integers(1, 4)), int(_r.integers(1, 4))),
               ["SAME", "VALID"][_k % 2], act=ACTS[_k % 4], sweep=True)
    bmm_case(f"bmm_sweep{_k}", ("int16", "int8", "float32")[_k % 3], (2, int(_r.integers(1, 6)), 7),
             (int(_r.integers(1, 3)), 7, int(_r.integers(1, 6))), sweep=True)


# ============================================================= running the cases

@pytest.fixture(scope="module")
def tflm_results() -> dict[str, tuple]:
    built = {c.name: c.build() for c in CASES}
    names = list(built)
    outs = run_tflm_batch([built[n] for n in names], return_errors=True)
    return {n: (built[n][0], built[n][1], o) for n, o in zip(names, outs)}


def _ours(model_bytes: bytes, inputs: list, backend: str) -> list[np.ndarray]:
    m = load_tflite(model_bytes, name="case")
    named = {p.name: x for p, x in zip(m.inputs, inputs)}
    if backend == "reference":
        return list(aot.reference(m, named).values())
    return list(aot.build(m, backend=backend).run(named).values())


def _same(ours: list[np.ndarray], tflm: list[np.ndarray]) -> None:
    assert len(ours) == len(tflm)
    for o, t in zip(ours, tflm):
        assert o.dtype == t.dtype and o.shape == t.shape, (o.dtype, o.shape, t.dtype, t.shape)
        if o.dtype == np.float32:
            o, t = o.view(np.uint32), t.view(np.uint32)
        diff = np.argwhere(o != t)
        assert diff.size == 0, f"{len(diff)} of {o.size} differ, first at {tuple(diff[0])}: {o[tuple(diff[0])]} " \
                               f"vs TFLM {t[tuple(diff[0])]}"


@pytest.mark.parametrize("backend", ["reference", "c", "llvm"])
@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_op_matches_tflm(name: str, backend: str, tflm_results) -> None:  # noqa: ANN001
    model, inputs, tflm = tflm_results[name]
    if isinstance(tflm, Exception):
        raise tflm
    _same(_ours(model, inputs, backend), tflm)


def test_every_op_and_dtype_has_cases() -> None:
    for op in ("conv", "dw", "fc", "tconv", "bmm"):
        assert any(c.name.startswith(op + "_sweep") for c in CASES), op
        for dt in ("int16", "int8"):
            assert any(c.name.startswith(f"{op}_{dt}") for c in CASES), (op, dt)
    for op in ("tconv", "bmm"):
        assert any(c.name.startswith(f"{op}_float32") for c in CASES), op


# ============================================================= the 64-bit requantize

def test_requantize64_python_c_llvm_agree() -> None:
    """The int64 argument arrives as two int32 halves (module inputs are at most 32-bit)."""
    n = 300
    rng = np.random.default_rng(5)
    x = np.concatenate([[0, 1, -1, (1 << 47) - 1, -(1 << 47)], rng.integers(-(1 << 47), 1 << 47, n - 5)])
    m = np.concatenate([[0x7FFF0000, 0x7FFEFFFF, 1 << 30, (1 << 31) - 1, 0], rng.integers(1 << 30, 1 << 31, n - 5)])
    s = rng.integers(-31, 8, n)
    args = [(x >> 32).astype(np.int32), (x & 0xFFFFFFFF).astype(np.uint32).view(np.int32), m.astype(np.int32),
            s.astype(np.int32)]
    ins = [K.Buffer(f"a{j}", "i32", n) for j in range(4)]
    o, i = K.Buffer("o", "i32", n), K.ScalarVar("i")
    hi, lo = ins[0][i].cast("i64"), ins[1][i].cast("i64")
    x64 = (hi << K.Const(32, "i64")) | (lo & K.Const(0xFFFFFFFF, "i64"))
    kernel = K.PrimFunc("k", tuple(ins) + (o,), K.For(i, n, K.Store(o, i, intrinsic("requantize64", x64, ins[2][i],
                                                                                    ins[3][i]))))
    eins, eouts = [K.Buffer(f"x{j}", "i32", n) for j in range(4)], [K.Buffer("y", "i32", n)]
    entry = K.PrimFunc("m_main", tuple(eins) + tuple(eouts),
                       K.Seq((K.CallKernel("k", tuple(eins) + tuple(eouts)), K.ReturnOnError())))
    module = K.KernelModule("m", (kernel, entry), (), (K.Pool("sram", 0),), "m_main", tuple(eins), tuple(eouts))
    spec = fp.multiply_by_quantized_multiplier_int64(x, m, s).astype(np.int32)
    assert [INTRINSICS["requantize64"].py(int(a), int(b), int(c)) for a, b, c in zip(x[:20], m[:20], s[:20])] \
        == spec[:20].tolist()
    for backend in ("interp", "c", "llvm"):
        np.testing.assert_array_equal(run_kernel_module(module, args, backend)[0], spec, err_msg=backend)


@pytest.mark.parametrize("dtype", ["int16", "int8"])
def test_int16_layers_take_the_16x8_schedule_not_the_int8_one(dtype: str) -> None:
    """On a DSP core the int8 conv takes the int8 smlad schedule (32-bit requantize); the 16x8 one
    its own schedule: smlad over int16 pairs against its int8 weight words (w16q), never the int8
    schedule's 32-bit requantize."""
    model, _ = next(c for c in CASES if c.name == f"conv_{dtype}_none").build()
    cm = compile_model(load_tflite(model, name="c16"), CompileOptions(cpu="cortex-m4"))
    text = format_module(cm.module)
    assert "smlad" in text
    assert ("w16q" in text) == (dtype == "int16")
    assert "requantize64" not in text or dtype == "int16"


def test_depthwise_int16_without_int64_bias_is_refused() -> None:
    rng = rng_for("dw_refused")
    wt = rng.integers(-127, 128, size=(1, 3, 3, 4)).astype(np.int8)
    ins = [T((1, 5, 5, 4), "int16", 1e-3, 0), T(wt.shape, "int8", [0.01] * 4, 0, wt, 3),
           T((4,), "int32", data=np.zeros(4, np.int32), scale=[1e-5] * 4, zp=[0] * 4)]
    model = single_op("DEPTHWISE_CONV_2D", ins, T((1, 5, 5, 4), "int16", 1e-2, 0), _conv_opts("SAME", (1, 1), (1, 1),
                                                                                                "NONE"))
    with pytest.raises(UnsupportedError, match="DEPTHWISE_CONV_2D"):
        load_tflite(model, name="dw")


# ============================================================= TFLM's seanet files

def _seanet(kind: str) -> list[Path]:
    return sorted((SEANET / kind).glob("*.tflite"))


def _csv(path: Path) -> np.ndarray:
    return np.array([int(v) for v in path.read_text().strip().split(",")], dtype=np.int64)


@pytest.mark.slow
@pytest.mark.skipif(not SEANET.is_dir(), reason="TFLM's model files are not here")
@pytest.mark.parametrize("kind", ["conv", "transpose_conv"])
def test_seanet_files_match_tflm_and_golden(kind: str) -> None:
    """Random inputs (a fixed input, TRANSPOSE_CONV's output_shape, holds the shape the model was
    compiled for) bit-exact with TFLM; the golden inputs (every input, from its CSV file) within
    +-1 of the golden output, as TFLM's own test accepts."""
    files = _seanet(kind)
    assert files
    jobs, models = [], []
    for f in files:
        m = aot.load(f)
        rng = np.random.default_rng(zlib.crc32(f.name.encode()))
        xs = [rand_x(rng, p.type.shape, p.type.dtype) for p in m.inputs]
        for fx in m.fixed_inputs:
            xs[fx.index] = np.array(fx.values, dtype=m.inputs[fx.index].type.np_dtype)
        jobs.append((f.read_bytes(), xs))
        models.append(m)
    tflm = run_tflm_batch(jobs)
    for f, m, (_, xs), want in zip(files, models, jobs, tflm):
        named = {p.name: x for p, x in zip(m.inputs, xs)}
        libs = {backend: aot.build(m, backend=backend) for backend in ("c", "llvm")}  # C: run on both inputs
        for backend in ("reference", "c", "llvm"):
            got = list(aot.reference(m, named).values()) if backend == "reference" else \
                list(libs[backend].run(named).values())
            _same(got, want)
        golden_ins = {p.name: _csv(f.with_name(f"{f.stem}_input{k}_{p.type.dtype}.csv")).astype(p.type.np_dtype)
                      .reshape(p.type.shape) for k, p in enumerate(m.inputs)}
        golden = f.with_name(f.stem + "_golden_int16.csv")
        out = list(libs["c"].run(golden_ins).values())[0]
        assert np.max(np.abs(out.astype(np.int64).reshape(-1) - _csv(golden))) <= 1, f.name
        # the output_shape TFLM's test feeds is the one the model was compiled for
        assert [tuple(golden_ins[m.inputs[fx.index].name]) for fx in m.fixed_inputs] == \
            [fx.values for fx in m.fixed_inputs]
    if kind == "transpose_conv":
        assert all(len(m.fixed_inputs) == 1 for m in models)


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_a_wrong_output_shape_input_is_refused_at_run_time(backend: str) -> None:
    """TRANSPOSE_CONV's output_shape given as a model input: the right values run, others give
    AOT_ERR_SHAPE_MISMATCH from the library, an aot.Error naming both shapes in Python."""
    case = next(c for c in CASES if c.name == "tconv_int8_shape_input")
    model_bytes, (shape, x) = case.build()
    m = load_tflite(model_bytes, name="case")
    assert [(f.index, f.values) for f in m.fixed_inputs] == [(0, tuple(int(v) for v in shape))]
    lib = aot.build(m, backend=backend)
    ok = lib.run({m.inputs[0].name: shape, m.inputs[1].name: x})
    _same(list(ok.values()), list(aot.reference(m, {m.inputs[0].name: shape, m.inputs[1].name: x}).values()))
    bad = shape.copy()
    bad[2] += 1
    with pytest.raises(aot.Error, match=re.escape(f"is {bad.tolist()}, but the model was compiled for {shape.tolist()}")):
        lib.run({m.inputs[0].name: bad, m.inputs[1].name: x})
