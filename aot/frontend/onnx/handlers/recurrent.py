"""ONNX's LSTM and GRU (float32), unrolled over the static sequence length into fully
connected layers and elementwise gates: forward, reverse and bidirectional,
initial states, biases, `clip`, GRU's `linear_before_reset` (layout 0, as PyTorch exports). Outputs Y, Y_h (and LSTM's Y_c)."""
from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

import numpy as np

from aot.frontend.onnx.importer import Handler, Importer
from aot.frontend.onnx.handlers.activations import unary
from aot.frontend.onnx.handlers.common import node_hint
from aot.frontend.onnx.handlers.elementwise import binary
from aot.frontend.onnx.handlers.matmul import fc
from aot.frontend.onnx.handlers.shape import slice_val
from aot.frontend.onnx.values import Node, Val, unsupported

DEFAULT_ACTS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"]}
GATES = {"LSTM": 4, "GRU": 3}


def _const(v: Val | None, what: str) -> np.ndarray | None:
    if v is None:
        return None
    if v.const is None:
        raise unsupported(f"run-time {what}")
    return np.asarray(v.const, dtype=np.float32)


def _concat(im: Importer, vals: list[Val], axis: int, hint: str) -> Val:
    if len(vals) == 1:
        return vals[0]
    shape = list(vals[0].shape)
    shape[axis] = sum(v.shape[axis] for v in vals)
    y = im.emit("concat", [im.f32(v, tuple(range(v.rank)), f"{hint}_{k}") for k, v in enumerate(vals)], hint, axis=axis)
    return im.runtime_val(y, shape)


class _Cell:
    """One direction of the layer: weights, biases and the gate arithmetic of one time step."""

    def __init__(self, im: Importer, n: Node, d: int, w: np.ndarray, r: np.ndarray, b: np.ndarray | None,
                 hsize: int, clip: float | None) -> None:
        g = GATES[n.op]
        self.im, self.n, self.hsize, self.clip = im, n, hsize, clip
        self.w, self.r = w[d], r[d]
        self.wb = b[d][:g * hsize] if b is not None else np.zeros(g * hsize, np.float32)
        self.rb = b[d][g * hsize:] if b is not None else np.zeros(g * hsize, np.float32)

    def gate(self, v: Val, k: int, act: str, hint: str) -> Val:
        h = self.hsize
        part = slice_val(self.im, v, [0, k * h], [1, 1], [v.shape[0], h], hint + "_pre")
        if self.clip is not None:
            part = unary(self.im, part, "clip", hint + "_clip", min=-self.clip, max=self.clip)
        return unary(self.im, part, act, hint)

    def fc(self, x: Val, w: np.ndarray, bias: np.ndarray, hint: str) -> Val:
        return fc(self.im, self.n, x, w, bias, hint, "none", None, None)

    def lstm(self, x: Val, h: Val | None, c: Val | None, hint: str) -> tuple[Val, Val]:
        im = self.im
        pre = self.fc(x, self.w, self.wb + self.rb, hint + "_x")
        if h is not None:
            pre = binary(im, "add", pre, self.fc(h, self.r, np.zeros_like(self.rb), hint + "_h"), hint + "_pre")
        i, o = self.gate(pre, 0, "sigmoid", hint + "_i"), self.gate(pre, 1, "sigmoid", hint + "_o")
        f, cc = self.gate(pre, 2, "sigmoid", hint + "_f"), self.gate(pre, 3, "tanh", hint + "_g")
        c_new = binary(im, "mul", i, cc, hint + "_ic")
        if c is not None:
            c_new = binary(im, "add", binary(im, "mul", f, c, hint + "_fc"), c_new, hint + "_c")
        h_new = binary(im, "mul", o, unary(im, c_new, "tanh", hint + "_tc"), hint + "_hn")
        return h_new, c_new

    def gru(self, x: Val, h: Val | None, hint: str) -> Val:
        im, hs = self.im, self.hsize
        gx = self.fc(x, self.w, self.wb, hint + "_x")
        zr_pre = slice_val(im, gx, [0, 0], [1, 1], [gx.shape[0], 2 * hs], hint + "_zrx")
        zr_pre = binary(im, "add", zr_pre, Val((2 * hs,), "float32", const=self.rb[:2 * hs]), hint + "_zrb")
        if h is not None:
            zr_pre = binary(im, "add", zr_pre, self.fc(h, self.r[:2 * hs], np.zeros(2 * hs, np.float32), hint + "_zrh"),
                            hint + "_zr")
        z, r = self.gate(zr_pre, 0, "sigmoid", hint + "_z"), self.gate(zr_pre, 1, "sigmoid", hint + "_r")
        hx = slice_val(im, gx, [0, 2 * hs], [1, 1], [gx.shape[0], hs], hint + "_hx")
        rh, rbh = self.r[2 * hs:], self.rb[2 * hs:]
        lbr = bool(self.n.attr("linear_before_reset", 0))
        if h is None:  # zero state: the recurrent product is its bias alone (gated by r when linear before reset)
            bias = Val((hs,), "float32", const=rbh)
            rec = binary(im, "mul", r, bias, hint + "_rec") if lbr else bias
        elif lbr:
            rec = binary(im, "mul", r, self.fc(h, rh, rbh, hint + "_hh"), hint + "_rec")
        else:
            rec = self.fc(binary(im, "mul", r, h, hint + "_rh"), rh, rbh, hint + "_rec")
        pre = binary(im, "add", hx, rec, hint + "_pre_h")
        if self.clip is not None:
            pre = unary(im, pre, "clip", hint + "_clip_h", min=-self.clip, max=self.clip)
        cand = unary(im, pre, "tanh", hint + "_cand")
        one_minus_z = binary(im, "sub", Val((), "float32", const=np.float32(1)), z, hint + "_1z")
        out = binary(im, "mul", one_minus_z, cand, hint + "_zc")
        if h is not None:
            out = binary(im, "add", out, binary(im, "mul", z, h, hint + "_zh"), hint + "_hn")
        return out


def _state(im: Importer, v: Val | None, d: int, batch: int, hsize: int, hint: str) -> Val | None:
    """Direction d's initial state as a (batch, hidden) value; None for zeros."""
    if v is None:
        return None
    if v.const is not None:
        arr = np.asarray(v.const, np.float32)[d]
        return None if not arr.any() else Val(arr.shape, "float32", const=arr)
    s = slice_val(im, v, [d, 0, 0], [1, 1, 1], [1, batch, hsize], hint + "_s")
    return im.reshape_val(s, (batch, hsize), hint)


def _rnn(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    op = n.op
    w, r = _const(n.inp(1), "weights"), _const(n.inp(2), "recurrent weights")
    assert w is not None and r is not None
    b = _const(n.inp(3), "bias")
    if op == "LSTM" and n.inp(7) is not None:
        raise unsupported("peephole weights (P)")
    if op == "LSTM" and n.attr("input_forget", 0):
        raise unsupported("input_forget=1")
    acts = n.attr("activations")
    ndir = 2 if n.attr("direction", "forward") == "bidirectional" else 1
    if acts is not None and list(acts) != DEFAULT_ACTS[op] * ndir:
        raise unsupported(f"activations {list(acts)} (the defaults {DEFAULT_ACTS[op]} are supported)")
    clip = n.attr("clip")
    layout = int(n.attr("layout", 0))
    if layout != 0:  # as onnxruntime's CPU kernels; PyTorch exports layout 0
        raise unsupported(f"layout {layout} (batch-first); export with layout 0")
    hsize = int(n.attr("hidden_size", w.shape[1] // GATES[op]))
    steps, batch = (x.shape[0], x.shape[1]) if layout == 0 else (x.shape[1], x.shape[0])
    if n.inp(4) is not None:
        lens = _const(n.inp(4), "sequence_lens")
        if lens is None or np.any(lens != steps):
            raise unsupported("sequence_lens shorter than the sequence (every sequence must be full)")
    reverse = {"forward": [False], "reverse": [True], "bidirectional": [False, True]}[n.attr("direction", "forward")]
    h0 = n.inp(5)
    c0 = n.inp(6) if op == "LSTM" else None
    hint = node_hint(n)
    ys, hs, cs = [], [], []
    for d, rev in enumerate(reverse):
        cell = _Cell(im, n, d, w, r, b, hsize, float(clip) if clip is not None else None)
        h, c = _state(im, h0, d, batch, hsize, f"{hint}_h0{d}"), _state(im, c0, d, batch, hsize, f"{hint}_c0{d}")
        outs: dict[int, Val] = {}
        for t in (reversed(range(steps)) if rev else range(steps)):
            th = f"{hint}_d{d}t{t}"
            begin, size = ([t, 0, 0], [1, batch, x.shape[2]]) if layout == 0 else ([0, t, 0], [batch, 1, x.shape[2]])
            xt = im.reshape_val(slice_val(im, x, begin, [1, 1, 1], size, th + "_xs"), (batch, x.shape[2]), th + "_xt")
            if op == "LSTM":
                h, c = cell.lstm(xt, h, c, th)
            else:
                h = cell.gru(xt, h, th)
            outs[t] = h
        assert h is not None
        ys.append([outs[t] for t in range(steps)])
        hs.append(h)
        cs.append(c)
    # Y: (T, D, B, H) or, with layout=1, (B, T, D, H)
    per_t = [_concat(im, [im.reshape_val(ys[d][t], (1, 1, batch, hsize), f"{hint}_y{d}_{t}") for d in range(len(reverse))],
                     1, f"{hint}_yt{t}") for t in range(steps)]
    y = _concat(im, per_t, 0, hint + "_y")
    if layout:
        y = im.transpose_val(y, (2, 0, 1, 3))
    results: list[Val | None] = [y]
    yh = _concat(im, [im.reshape_val(v, (1, batch, hsize), f"{hint}_yh{d}") for d, v in enumerate(hs)], 0, hint + "_yh")
    results.append(im.transpose_val(yh, (1, 0, 2)) if layout else yh)
    if op == "LSTM":
        yc = _concat(im, [im.reshape_val(v, (1, batch, hsize), f"{hint}_yc{d}") for d, v in enumerate(cs)  # type: ignore[arg-type]
                          ], 0, hint + "_yc")
        results.append(im.transpose_val(yc, (1, 0, 2)) if layout else yc)
    return results[:max(len(n.outputs), 1)]


HANDLERS: Mapping[str, Handler] = MappingProxyType({"LSTM": _rnn, "GRU": _rnn})


INT8: frozenset[str] = frozenset()  # float32 only
