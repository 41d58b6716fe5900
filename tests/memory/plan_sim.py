"""Helpers of the buffer-sharing tests: random branching int8 models (residual ADDs, concatenations
along a contiguous or a strided axis) built with the GraphBuilder, a compile that keeps the kernel
module before the order pass and before planning, and a kernel interpreter that runs the planned
module while tracking which buffer owns every pool byte: a load that finds a byte last written for
another buffer means the plan overwrote a live byte."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import aot
from aot.ir import Quant
from aot.kernel import ir as K
from aot.kernel.interp import Interpreter, cast_value
from aot.kernel.intrinsics import INTRINSICS
from aot.pipeline.alias import Aliases
from aot.pipeline.driver import CompileOptions, CompiledModel, compile_model
from aot.pipeline.plan import PlanReport, io_to_pool, sharing_candidates

ACT = Quant((0.1,), (-10,))  # one activation quantization: any two tensors may be added or concatenated


def _conv(rng: np.random.Generator, g: aot.GraphBuilder, x, oc: int, k: int, dw: bool = False):  # noqa: ANN001, ANN202
    cin = x.type.shape[-1]
    shape = (1, k, k, cin) if dw else (oc, k, k, cin)
    n = shape[-1] if dw else oc
    w = rng.integers(-127, 128, shape).astype(np.int8)
    scales = tuple(float(np.float32(s)) for s in rng.uniform(0.002, 0.01, n))
    wq = Quant(scales, (0,) * n, 3 if dw else 0)
    b = rng.integers(-800, 800, n).astype(np.int32)
    bq = Quant(tuple(float(np.float32(0.1 * s)) for s in scales), (0,) * n, 0)
    wc, bc = g.constant(w, f"w{rng.integers(1 << 30)}", quant=wq), g.constant(b, f"b{rng.integers(1 << 30)}", quant=bq)
    act = str(rng.choice(["relu", "none"]))
    if dw:
        return g.depthwise_conv2d(x, wc, bc, padding="same", activation=act, out_quant=ACT)
    return g.conv2d(x, wc, bc, padding="same", activation=act, out_quant=ACT)


def random_branchy(seed: int, max_ops: int = 8, small: bool = False) -> aot.ir.Model:
    """A random branching int8 model: convolutions and depthwise convolutions from any earlier
    tensor, residual ADDs of two tensors of one shape, concatenations along the height (one
    contiguous block per input) or the channels (strided); every tensor nobody reads is an output.
    `small` keeps tensors tiny (quick in the kernel interpreter)."""
    rng = np.random.default_rng(seed)
    g = aot.GraphBuilder(f"branchy{seed}")
    hi = 4 if small else 6
    h, w, c = int(rng.integers(2, hi)), int(rng.integers(2, hi)), int(rng.choice([2, 4] if small else [2, 4, 8]))
    x = g.input("x", (1, h, w, c), "int8", ACT)
    values = [x]
    used: set[int] = set()
    for _ in range(int(rng.integers(3, max_ops + 1))):
        kind = str(rng.choice(["conv", "conv", "dw", "add", "concat_h", "concat_c"]))
        recent = values[-3:] if rng.random() < 0.6 else values
        a = recent[int(rng.integers(0, len(recent)))]
        if kind == "add":
            same = [v for v in values if v.type.shape == a.type.shape and v is not a]
            if not same:
                kind = "conv"
            else:
                b = same[int(rng.integers(0, len(same)))]
                used |= {id(a), id(b)}
                values.append(g.add(a, b, activation=str(rng.choice(["relu", "none"])), out_quant=ACT))
                continue
        if kind.startswith("concat"):
            axis = 1 if kind == "concat_h" else 3
            fits = [v for v in values if v is not a and all(
                v.type.shape[d] == a.type.shape[d] for d in range(4) if d != axis)]
            if fits and a.type.shape[1] * 2 <= 12 and a.type.shape[3] * 2 <= 16:
                parts = [a] + [fits[int(i)] for i in rng.choice(len(fits), min(len(fits), int(rng.integers(1, 3))),
                                                                  replace=False)]
                used |= {id(p) for p in parts}
                values.append(g.concat(parts, axis=axis))
                continue
            kind = "conv"
        used.add(id(a))
        if kind == "dw":
            values.append(_conv(rng, g, a, 0, 3, dw=True))
        else:
            top = 8 if small else 16
            oc = int(rng.choice([max(1, a.type.shape[-1] // 2), a.type.shape[-1], min(top, a.type.shape[-1] * 2)]))
            values.append(_conv(rng, g, a, oc, int(rng.choice([1, 3]))))
    outs = [v for v in values[1:] if id(v) not in used] or [values[-1]]
    for i, v in enumerate(outs):
        g.output(v, f"y{i}")
    return g.finish()


@dataclass(frozen=True)
class Compiled:
    cm: CompiledModel
    before_order: K.KernelModule  # the kernel module as lowered (the given call order)
    before_plan: K.KernelModule  # after the order pass, before planning


def compile_spied(model: aot.ir.Model, monkeypatch, **options) -> Compiled:  # noqa: ANN001, ANN003
    """compile_model, keeping the kernel module before the order pass and before planning."""
    import aot.pipeline.driver as driver
    seen: dict[str, K.KernelModule] = {}
    real_order, real_plan = driver.order_calls, driver.plan_memory

    def order_spy(module, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        seen["order"] = module
        return real_order(module, *a, **k)

    def plan_spy(module, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        seen["plan"] = module
        return real_plan(module, *a, **k)

    monkeypatch.setattr(driver, "order_calls", order_spy)
    monkeypatch.setattr(driver, "plan_memory", plan_spy)
    try:
        cm = compile_model(model, CompileOptions(**options))
    finally:
        monkeypatch.setattr(driver, "order_calls", real_order)
        monkeypatch.setattr(driver, "plan_memory", real_plan)
    return Compiled(cm, seen["order"], seen["plan"])


def plain_peak(module: K.KernelModule, planner: str = "best", io_buffers: str = "app") -> int:
    """The pool the planner gives `module` without any sharing (no in-place, no slices), in its order."""
    import aot.pipeline.plan as P
    real = P.sharing_candidates
    P.sharing_candidates = lambda m: [Aliases({}, frozenset())]  # type: ignore[assignment]
    try:
        return P.plan_memory(module, planner=planner, io_buffers=io_buffers)[1].activation_bytes
    finally:
        P.sharing_candidates = real


class Clobbered(AssertionError):
    pass


class _Reads:
    """An array that records the indices read from it (a multi-intrinsic's reference argument)."""

    def __init__(self, arr: np.ndarray) -> None:
        self.arr, self.size, self.read = arr, arr.size, []

    def __getitem__(self, j: int):  # noqa: ANN204
        self.read.append(int(j))
        return self.arr[j]


class ShadowInterpreter(Interpreter):
    """Runs a planned module and checks every load of a pool byte against the buffer that wrote it
    last: the storage of one tensor (a concatenation's slices are its output's storage) may only be
    read back as that tensor. The logical buffer of every argument comes from the module before
    planning (calls matched in order, the elided concatenations skipped)."""

    def __init__(self, planned: K.KernelModule, before_plan: K.KernelModule, report: PlanReport) -> None:
        super().__init__(planned)
        pio = [b.name for b in before_plan.inputs]
        module = io_to_pool(before_plan) if planned.io else before_plan
        slices = {b.name for b in report.shared if b.kind == "slice"}
        # the sharing the planner chose (plan_memory keeps the smallest of sharing_candidates)
        shared = next(c for c in sharing_candidates(module) if c.slices == slices)
        entry = before_plan.func(before_plan.entry)
        body = entry.body.body if isinstance(entry.body, K.Seq) else (entry.body,)
        pre_calls = [s for i, s in enumerate([s for s in body if isinstance(s, K.CallKernel)])
                     if i not in shared.elided]

        def logical(name: str) -> str:
            while name in shared.slices:
                name = shared.within[name][0]
            return name

        self.names = [[logical(a.name) for a in c.args] for c in pre_calls]
        self.codes: dict[str, int] = {}
        self.tags = {p.name: np.full(p.size, -1, dtype=np.int64) for p in planned.pools}
        self.call_index = 0
        self.cur: dict[int, tuple[str, int, int, int]] = {}
        self.loads = 0
        for v, name in zip(planned.io, pio):  # inputs planned in the pool: written by the application
            self.tags[v.pool][v.offset:v.offset + v.size * K.K_ITEMSIZE[v.dtype]] = self._code(name)

    def _code(self, name: str) -> int:
        return self.codes.setdefault(name, len(self.codes))

    def s_CallKernel(self, s: K.CallKernel, fr):  # noqa: ANN001
        callee = self.module.func(s.callee)
        names = self.names[self.call_index]
        self.call_index += 1
        self.cur = {id(p): (a.pool, a.offset, K.K_ITEMSIZE[a.dtype], self._code(n))
                    for p, a, n in zip(callee.params, s.args, names) if isinstance(a, K.PoolView)}
        try:
            return super().s_CallKernel(s, fr)
        finally:
            self.cur = {}

    def _check(self, buf: K.Buffer, idx: int, nbytes: int, fr) -> None:  # noqa: ANN001
        pool, off, isz, code = self.cur[id(buf)]
        lo = off + idx * isz
        got = self.tags[pool][lo:lo + nbytes]
        if not np.all(got == code):
            owners = {v: k for k, v in self.codes.items()}
            raise Clobbered(f"call {self.call_index - 1}: reading {owners[code]} at pool byte {lo} finds "
                            f"{sorted({owners.get(int(t), 'nothing') for t in got})}")
        self.loads += 1

    def e_Load(self, e: K.Load, fr):  # noqa: ANN001, ANN201
        if id(e.buffer) in self.cur:
            self._check(e.buffer, self.expr(e.index, fr), K.K_ITEMSIZE[e.buffer.dtype], fr)
        return super().e_Load(e, fr)

    def e_LoadWord(self, e: K.LoadWord, fr):  # noqa: ANN001, ANN201
        if id(e.buffer) in self.cur:
            self._check(e.buffer, self.expr(e.index, fr), 4, fr)
        return super().e_LoadWord(e, fr)

    def e_Intrinsic(self, e: K.Intrinsic, fr):  # noqa: ANN001, ANN201
        kinds = INTRINSICS[e.name].arg_dtypes
        for a, t in zip(e.args, kinds):
            if t[0] in "&*" and isinstance(a, K.Load) and id(a.buffer) in self.cur:
                if len(kinds) == 1 and t[0] == "&":  # a load of one element (load64): its bytes
                    self._check(a.buffer, self.expr(a.index, fr) * K.K_ITEMSIZE[t[1:]] // K.K_ITEMSIZE[a.buffer.dtype],
                                K.K_ITEMSIZE[t[1:]], fr)
                    continue
                raise NotImplementedError("routines over buffers (Helium) are not traced")
        return super().e_Intrinsic(e, fr)

    def s_MultiAssign(self, s: K.MultiAssign, fr) -> int:  # noqa: ANN001
        """A multi-result intrinsic reads words of its reference arguments: every word it reads
        from a planned buffer is checked (the specification runs on arrays that record reads)."""
        args = self._intrinsic_args(s.value, fr)
        seen: list[tuple[K.Buffer, _Reads]] = []
        for k, (a, t) in enumerate(zip(s.value.args, INTRINSICS[s.value.name].arg_dtypes)):
            if t[0] == "&" and isinstance(a, K.Load) and id(a.buffer) in self.cur:
                rec = _Reads(args[k][0])
                seen.append((a.buffer, rec))
                args[k] = (rec, args[k][1])
        values = INTRINSICS[s.value.name].py(*args)
        for buf, rec in seen:
            for j in rec.read:
                self._check(buf, j, K.K_ITEMSIZE[buf.dtype], fr)
        for v, x in zip(s.targets, values):
            fr.scalars[id(v)] = cast_value(x, v.dtype)
        return 0

    def s_Store(self, s: K.Store, fr) -> int:  # noqa: ANN001
        rc = super().s_Store(s, fr)
        if id(s.buffer) in self.cur:
            pool, off, isz, code = self.cur[id(s.buffer)]
            lo = off + self.expr(s.index, fr) * isz
            self.tags[pool][lo:lo + isz] = code
        return rc


def resnet_style(seed: int = 0, hw: int = 8, c: int = 8, blocks: int = 2) -> aot.ir.Model:
    """A CIFAR-ResNet-style int8 model: a stem conv, `blocks` residual blocks (conv 3x3 -> conv 3x3,
    ADD of the block's input, ReLU; each tensor quantized its own way) and a classifier."""
    from ops.test_schedules import _q, _weights
    rng = np.random.default_rng(seed)
    g = aot.GraphBuilder(f"resnet{seed}")
    scale = 0.05
    x = g.input("x", (1, hw, hw, 3), "int8", _q(scale, 3))
    n = [0]

    def conv(x, act="relu"):  # noqa: ANN001, ANN202
        nonlocal scale
        n[0] += 1
        w, b = _weights(rng, g, (c, 3, 3, x.type.shape[-1]), 0, scale, f"c{n[0]}")
        q = _q(float(rng.uniform(0.04, 0.2)), int(rng.integers(-128, 10)))
        scale = q.scale[0]
        return g.conv2d(x, w, b, padding="same", activation=act, out_quant=q)

    x = conv(x)
    for _ in range(blocks):
        y = conv(conv(x), act="none")
        q = _q(float(rng.uniform(0.05, 0.2)), int(rng.integers(-128, 10)))
        x = g.add(y, x, activation="relu", out_quant=q)
        scale = q.scale[0]
    x = g.reshape(x, (1, -1))
    w, b = _weights(rng, g, (10, x.type.shape[-1]), None, scale, "fc")
    g.output(g.fully_connected(x, w, b, out_quant=_q(0.1, 0)), "y0")
    return g.finish()


def inception_style(seed: int = 0, hw: int = 6, c: int = 4, axis: int = 1) -> aot.ir.Model:
    """An inception-style int8 block: a stem conv, three branches (1x1; 1x1; 1x1 -> 3x3) joined by a
    CONCATENATION along `axis` (1: the height, contiguous blocks; -1: the channels, strided), then a
    classifier."""
    from ops.test_schedules import _q, _weights
    rng = np.random.default_rng(seed)
    g = aot.GraphBuilder(f"incep{seed}")
    x = g.input("x", (1, hw, hw, 3), "int8", _q(0.05, 3))
    qs = _q(0.1, -5)

    def conv(x, oc, k, scale, q, name):  # noqa: ANN001, ANN202
        w, b = _weights(rng, g, (oc, k, k, x.type.shape[-1]), 0, scale, name)
        return g.conv2d(x, w, b, padding="same", activation="relu", out_quant=q)

    x = conv(x, c, 3, 0.05, _q(0.08, -10), "stem")
    br = [conv(x, c, 1, 0.08, qs, "b0"), conv(x, c + (2 if axis == -1 else 0), 1, 0.08, qs, "b1")]
    t = conv(x, 2, 1, 0.08, _q(0.07, 1), "b2a")
    br.append(conv(t, c, 3, 0.07, qs, "b2b"))
    y = g.reshape(g.concat(br, axis=axis), (1, -1))
    w, b = _weights(rng, g, (10, y.type.shape[-1]), None, 0.1, "fc")
    g.output(g.fully_connected(y, w, b, out_quant=_q(0.1, 0)), "y0")
    return g.finish()


def check_bit_exact(cm: CompiledModel, model: aot.ir.Model, seed: int, backends=("interp",)) -> None:  # noqa: ANN001
    from aot.runners.kernel_module import run_kernel_module
    v = model.inputs[0]
    x = np.random.default_rng(seed).integers(-128, 128, v.type.shape).astype(np.int8)
    ref = aot.reference(model, {v.name: x})
    for backend in backends:
        got = run_kernel_module(cm.module, [x], backend)
        for i, o in enumerate(got):
            np.testing.assert_array_equal(o, np.asarray(ref[f"y{i}"]).reshape(-1), err_msg=f"{backend} y{i}")


def check_shadow_run(c: Compiled, model: aot.ir.Model, seed: int) -> None:
    """Run the planned module with every pool byte's owner tracked; outputs equal the reference."""
    v = model.inputs[0]
    x = np.random.default_rng(seed).integers(-128, 128, v.type.shape).astype(np.int8)
    ref = aot.reference(model, {v.name: x})
    sim = ShadowInterpreter(c.cm.module, c.before_plan, c.cm.plan)
    got = sim.run([x])
    assert sim.loads > 0
    for i, g in enumerate(got):
        np.testing.assert_array_equal(g, np.asarray(ref[f"y{i}"]).reshape(-1), err_msg=f"seed {seed} y{i}")
