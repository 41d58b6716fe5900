"""A kernel schedule as text: the int8 depthwise convolution of a tiny shape, as the reference
loop nest (before) and as scheduled for a Cortex-M4 with DSP and a Cortex-M3 without (after).
Bit-exactness of the schedules is tested in tests/test_schedules.py; this shows their shape."""
from __future__ import annotations

import numpy as np

import aot
from aot.ir import Quant
from aot.kernel import format_function
from aot.pipeline.driver import CompileOptions, compile_model


def depthwise_1x1() -> aot.ir.Model:
    """1x2x2x4 int8 input, a 1x1 per-channel depthwise kernel, relu: four channels, one tap."""
    g = aot.GraphBuilder("dw")
    x = g.input("x", (1, 2, 2, 4), "int8", Quant((0.05,), (-3,)))
    w = g.constant(np.array([3, -5, 7, 127], np.int8).reshape(1, 1, 1, 4), "w",
                   quant=Quant((0.01, 0.02, 0.01, 0.005), (0,) * 4, 3))
    b = g.constant(np.array([10, -20, 30, 0], np.int32), "b",
                   quant=Quant((0.0005, 0.001, 0.0005, 0.00025), (0,) * 4, 0))
    g.output(g.depthwise_conv2d(x, w, b, strides=(1, 1), padding="valid", activation="relu",
                                out_quant=Quant((0.1,), (-128,))), "y")
    return g.finish()


def kernel_text(**options) -> str:  # noqa: ANN003
    module = compile_model(depthwise_1x1(), CompileOptions(**options)).module
    (fn,) = [f for f in module.funcs if f.doc == "depthwise_conv2d"]
    return format_function(fn)


def test_depthwise_reference_loop_nest() -> None:
    assert kernel_text(cpu="cortex-m4", opt="reference") == """\
# depthwise_conv2d
func model_fused_depthwise_conv2d_0(in: i8[16], out: i8[16]):
    for n in range(1):
        for oy in range(2):
            for ox in range(2):
                for oc in range(4):
                    let acc: i32 = 0
                    for ky in range(1):
                        for kx in range(1):
                            acc = acc + (i32(in[(oy + ky) * 8 + (ox + kx) * 4 + oc]) + 3) * i32(model_const_w[oc])
                    out[oy * 8 + ox * 4 + oc] = i8(min(max(requantize(acc + model_const_b[oc], model_const_mult[oc], \
model_const_shift[oc]) + -128, -128), 127))"""


def test_depthwise_cortex_m3_one_channel_at_a_time_offset_folded_into_bias() -> None:
    assert kernel_text(cpu="cortex-m3") == """\
# depthwise_conv2d
func model_fused_depthwise_conv2d_0(in: i8[16], out: i8[16]):
    for n in range(1):
        for oy in range(2):
            for ox in range(2):
                let iy0: i32 = oy
                let ix0: i32 = ox
                for c in range(4):
                    let acc: i32 = model_const_dwbiasf[c]
                    acc = acc + i32(in[iy0 * 8 + ix0 * 4 + c]) * i32(model_const_w[c])
                    let qhi: i32 = model_const_rq[c * 2]
                    let qrs: i32 = model_const_rq[c * 2 + 1]
                    out[oy * 8 + ox * 4 + c] = i8(ssat8(requant_q31(acc, 1374389504, 1073741824, qhi, qrs)))"""


def test_depthwise_cortex_m4_four_channels_per_word_with_dsp_in_place_over_a_line_buffer() -> None:
    # the output overwrites the input (@inplace(0)); the rows still to be read are copied into a line buffer
    assert kernel_text(cpu="cortex-m4") == """\
# depthwise_conv2d
@inplace(0)
func model_fused_depthwise_conv2d_0(in: i8[16], out: i8[16]):
    allocate rows: i32[4] (stack, align 16):
        for oy in range(2):
            let rs: i32 = 0
            for re in range(2):
                let xw: i32 = load_word(in, oy * 8 + re * 4)
                rows[rs + re * 2] = sxtab16(196611, xw)
                rows[rs + re * 2 + 1] = sxtab16_ror8(196611, xw)
            let rb: i32 = 0
            for ox in range(2):
                for cq in range(1):
                    let rec: i32 = cq * 14
                    let acc0: i32 = model_const_dwrec[rec]
                    let acc1: i32 = model_const_dwrec[rec + 1]
                    let acc2: i32 = model_const_dwrec[rec + 2]
                    let acc3: i32 = model_const_dwrec[rec + 3]
                    let rc: i32 = rb + ox * 2 + cq * 2
                    let xa: i32 = rows[rc]
                    let xb: i32 = rows[rc + 1]
                    let wa: i32 = model_const_dwrec[rec + 4]
                    let wb: i32 = model_const_dwrec[rec + 5]
                    acc0 = smlabb(xa, wa, acc0)
                    acc2 = smlatt(xa, wa, acc2)
                    acc1 = smlabb(xb, wb, acc1)
                    acc3 = smlatt(xb, wb, acc3)
                    let qh: i32 = model_const_dwrec[rec + 6]
                    let qr: i32 = model_const_dwrec[rec + 7]
                    out[oy * 8 + ox * 4 + cq * 4] = i8(ssat8(requant_mm_nn(acc0, 1374389504, qh, qr)))
                    let qh_1: i32 = model_const_dwrec[rec + 8]
                    let qr_1: i32 = model_const_dwrec[rec + 9]
                    out[oy * 8 + ox * 4 + (cq * 4 + 1)] = i8(ssat8(requant_mm_nn(acc1, 1374389504, qh_1, qr_1)))
                    let qh_2: i32 = model_const_dwrec[rec + 10]
                    let qr_2: i32 = model_const_dwrec[rec + 11]
                    out[oy * 8 + ox * 4 + (cq * 4 + 2)] = i8(ssat8(requant_mm_nn(acc2, 1374389504, qh_2, qr_2)))
                    let qh_3: i32 = model_const_dwrec[rec + 12]
                    let qr_3: i32 = model_const_dwrec[rec + 13]
                    out[oy * 8 + ox * 4 + (cq * 4 + 3)] = i8(ssat8(requant_mm_nn(acc3, 1374389504, qh_3, qr_3)))"""
