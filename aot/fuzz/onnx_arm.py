"""The ONNX arm of the differential fuzzer: random valid float ONNX graphs (onnx.helper) over the
op set the ONNX frontend supports (Conv, depthwise Conv, Gemm, MatMul, Relu, Clip, Sigmoid, Add,
Mul, MaxPool, AveragePool, GlobalAveragePool, Concat, Reshape, Flatten, Softmax, nearest Resize),
compiled by aot for the host (C) and compared with onnxruntime: float outputs within 1e-5 relative
to the output's magnitude; the onnxruntime quantize_static versions of the same graph (QDQ, and
QOperator: QLinearConv, QLinearMatMul, com.microsoft QLinearAdd/QLinearMul/...) within one
quantization step of the output per quantized op on the path (the QuantizeLinear nodes).

A model is an `OnnxSpec`: an input shape and a list of layers, each a small dict whose shapes the
builder works out from the tensor before it (a layer that no longer fits after shrinking makes the
spec invalid, not a finding); `arm` says which of float / qdq / qop the case checks.

Outcome statuses as aot.fuzz.differential's: ok, mismatch, crash (a Python exception that is not
aot.Error, a gcc failure), refused (aot.Error: the frontend does not take the model), invalid
(onnx or onnxruntime refused it: the generator's fault)."""
from __future__ import annotations

import json
import logging
import traceback
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterator, Sequence

import numpy as np

ARMS = ("float", "qdq", "qop")
OPSET = 17
FLOAT_RTOL = 1e-5


@dataclass(frozen=True)
class OnnxSpec:
    input_shape: tuple[int, ...]
    layers: tuple[dict[str, Any], ...]
    seed: int = 0

    def summary(self) -> str:
        return f"{len(self.layers)} ONNX layers ({', '.join(ly['op'] for ly in self.layers)}), input {self.input_shape}"


@dataclass(frozen=True)
class OnnxCase:
    spec: OnnxSpec
    arm: str = "float"  # float | qdq | qop
    per_channel: bool = False
    input_seed: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"onnx": asdict(self.spec), "arm": self.arm, "per_channel": self.per_channel,
                "input_seed": self.input_seed}

    @staticmethod
    def from_json(d: dict[str, Any]) -> "OnnxCase":
        s = d["onnx"]
        return OnnxCase(OnnxSpec(tuple(s["input_shape"]), tuple(dict(ly) for ly in s["layers"]), int(s["seed"])),
                        d["arm"], bool(d.get("per_channel", False)), int(d.get("input_seed", 0)))


@dataclass
class OnnxOutcome:
    case: OnnxCase
    status: str
    detail: str = ""
    builds: dict[str, int] = field(default_factory=dict)
    qemu: str = ""

    @property
    def finding(self) -> bool:
        return self.status in ("mismatch", "crash")

    def signature(self) -> str:
        return f"onnx-{self.case.arm}:{self.status}:{self.detail.split(':', 1)[0]}"


# ---------------------------------------------------------------------------------- generation
def generate_onnx(seed: int, arm: str | None = None) -> OnnxCase:
    """A random valid ONNX case; the same seed gives the same case."""
    rng = np.random.default_rng([seed, 11])

    def r(lo: int, hi: int) -> int:
        return int(rng.integers(lo, hi + 1))

    def pick(seq: Sequence[Any]) -> Any:
        return seq[int(rng.integers(len(seq)))]

    four_d = rng.random() < 0.8
    shape: tuple[int, ...] = (1, r(1, 8), r(2, 12), r(2, 12)) if four_d else (1, r(2, 32))
    layers: list[dict[str, Any]] = []
    rank = len(shape)
    for _ in range(r(1, 7)):
        s = int(rng.integers(1 << 30))
        if rank == 4:
            op = pick(("Conv", "Conv", "Conv", "DwConv", "Relu", "Clip", "Sigmoid", "Add", "Mul", "MaxPool",
                       "AveragePool", "GlobalAveragePool", "Concat", "Resize", "Flatten", "Softmax"))
        else:
            op = pick(("Gemm", "Gemm", "MatMul", "Relu", "Clip", "Sigmoid", "Add", "Mul", "Softmax", "Reshape"))
        ly: dict[str, Any] = {"op": op, "seed": s}
        if op == "Conv":
            ly |= {"cout": r(1, 12), "k": pick((1, 3, 3, 5)), "stride": pick((1, 1, 2)), "pad": pick((0, 1)),
                   "bias": bool(rng.random() < 0.8), "dilation": pick((1, 1, 1, 2)),
                   "pads": [r(0, 2) for _ in range(4)] if rng.random() < 0.2 else None}
        elif op == "DwConv":
            ly |= {"k": 3, "stride": pick((1, 2)), "pad": 1}
        elif op in ("MaxPool", "AveragePool"):
            ly |= {"k": pick((2, 3)), "stride": pick((1, 2)), "pad": pick((0, 0, 1)),
                   "include_pad": bool(rng.random() < 0.3)}
        elif op == "Clip":
            ly |= {"lo": pick((0.0, -1.0)), "hi": pick((6.0, 1.0))}
        elif op in ("Add", "Mul", "Concat"):
            ly |= {"ref": r(0, 8), "const": bool(rng.random() < 0.5)}
        elif op in ("Gemm", "MatMul"):
            ly |= {"units": r(1, 24), "transB": bool(rng.random() < 0.5), "bias": bool(rng.random() < 0.8),
                   "alpha": pick((1.0, 1.0, 0.5, 2.0)), "beta": pick((1.0, 1.0, 0.5))}
        elif op == "Reshape":
            ly |= {"split": pick((1, 2, 4))}
        try:  # a layer that does not fit the tensor before it is dropped
            build_onnx(OnnxSpec(shape, tuple(layers) + (ly,), seed))
        except Invalid:
            continue
        layers.append(ly)
        if op in ("Flatten",):
            rank = 2
        elif op == "Reshape":
            rank = 4
    if not layers:
        layers.append({"op": "Relu", "seed": 0})
    return OnnxCase(OnnxSpec(shape, tuple(layers), seed), arm or pick(ARMS), bool(rng.random() < 0.5),
                    input_seed=seed)


class Invalid(ValueError):
    """The spec does not make a valid graph (a layer does not fit the tensor before it)."""


def build_onnx(spec: OnnxSpec) -> bytes:
    """The float ONNX model of `spec` (opset OPSET)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes: list[Any] = []
    inits: list[Any] = []
    produced: list[tuple[str, tuple[int, ...]]] = [("x", tuple(spec.input_shape))]
    cur, shape = "x", tuple(spec.input_shape)

    def const(name: str, a: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.asarray(a), name))
        return name

    for i, ly in enumerate(spec.layers):
        rng = np.random.default_rng(int(ly["seed"]))
        op, out = ly["op"], f"t{i}"
        rank = len(shape)
        if op in ("Conv", "DwConv", "MaxPool", "AveragePool", "GlobalAveragePool", "Resize", "Flatten",
                  "Concat") and rank != 4:
            raise Invalid(f"{op} on a rank-{rank} tensor")
        if op in ("Gemm", "MatMul", "Reshape") and rank != 2:
            raise Invalid(f"{op} on a rank-{rank} tensor")
        if op in ("Conv", "DwConv"):
            n, c, h, w = shape
            k, st, pad, dil = int(ly["k"]), int(ly["stride"]), int(ly["pad"]), int(ly.get("dilation") or 1)
            pads = list(ly["pads"]) if ly.get("pads") else [pad] * 4  # top, left, bottom, right
            cout, group = (int(ly["cout"]), 1) if op == "Conv" else (c, c)
            eff = (k - 1) * dil + 1
            oh, ow = (h + pads[0] + pads[2] - eff) // st + 1, (w + pads[1] + pads[3] - eff) // st + 1
            if oh < 1 or ow < 1 or max(pads) >= eff:
                raise Invalid("kernel larger than the input")
            wt = (rng.standard_normal((cout, c // group, k, k)) / np.sqrt(k * k * c // group)).astype(np.float32)
            ins = [cur, const(f"w{i}", wt)]
            if ly.get("bias", True):
                ins.append(const(f"b{i}", (0.1 * rng.standard_normal(cout)).astype(np.float32)))
            nodes.append(helper.make_node("Conv", ins, [out], kernel_shape=[k, k], strides=[st, st], pads=pads,
                                          dilations=[dil, dil], group=group))
            shape = (n, cout, oh, ow)
        elif op in ("MaxPool", "AveragePool"):
            n, c, h, w = shape
            k, st, pad = int(ly["k"]), int(ly["stride"]), int(ly["pad"])
            if pad * 2 >= k:
                pad = 0
            oh, ow = (h + 2 * pad - k) // st + 1, (w + 2 * pad - k) // st + 1
            if oh < 1 or ow < 1:
                raise Invalid("pool window larger than the input")
            extra = {"count_include_pad": int(bool(ly.get("include_pad")))} if op == "AveragePool" else {}
            nodes.append(helper.make_node(op, [cur], [out], kernel_shape=[k, k], strides=[st, st], pads=[pad] * 4,
                                          **extra))
            shape = (n, c, oh, ow)
        elif op == "GlobalAveragePool":
            nodes.append(helper.make_node(op, [cur], [out]))
            shape = (shape[0], shape[1], 1, 1)
        elif op in ("Relu", "Sigmoid"):
            nodes.append(helper.make_node(op, [cur], [out]))
        elif op == "Clip":
            lo = const(f"lo{i}", np.array(float(ly["lo"]), np.float32))
            hi = const(f"hi{i}", np.array(float(ly["hi"]), np.float32))
            nodes.append(helper.make_node("Clip", [cur, lo, hi], [out]))
        elif op == "Softmax":
            nodes.append(helper.make_node(op, [cur], [out], axis=1 if rank == 4 else -1))
        elif op in ("Add", "Mul", "Concat"):
            same = [t for t, s in produced if s == shape] if op != "Concat" else \
                [t for t, s in produced if s[0] == shape[0] and s[2:] == shape[2:]]
            if ly.get("const") and op != "Concat":
                cshape = (1, shape[1], 1, 1) if rank == 4 else (1, shape[1])
                other = const(f"c{i}", (rng.uniform(0.5, 1.5, cshape) if op == "Mul"
                                        else rng.standard_normal(cshape)).astype(np.float32))
            else:
                other = same[int(ly["ref"]) % len(same)] if same else cur
            if op == "Concat":
                oc = dict(produced)[other] if other in dict(produced) else shape
                nodes.append(helper.make_node("Concat", [cur, other], [out], axis=1))
                shape = (shape[0], shape[1] + oc[1]) + shape[2:]
            else:
                nodes.append(helper.make_node(op, [cur, other], [out]))
        elif op == "Resize":
            scales = const(f"s{i}", np.array([1, 1, 2, 2], np.float32))
            nodes.append(helper.make_node("Resize", [cur, "", scales], [out], mode="nearest",
                                          coordinate_transformation_mode="asymmetric", nearest_mode="floor"))
            shape = shape[:2] + (shape[2] * 2, shape[3] * 2)
            if shape[2] * shape[3] * shape[1] > 8192:
                raise Invalid("too big")
        elif op == "Flatten":
            nodes.append(helper.make_node("Flatten", [cur], [out], axis=1))
            shape = (shape[0], int(np.prod(shape[1:])))
        elif op in ("Gemm", "MatMul"):
            k, units = shape[1], int(ly["units"])
            if k > 2048:
                raise Invalid("too big")
            wt = (rng.standard_normal((k, units)) / np.sqrt(k)).astype(np.float32)
            if op == "Gemm":
                tb = bool(ly.get("transB"))
                ins = [cur, const(f"w{i}", wt.T.copy() if tb else wt)]
                if ly.get("bias", True):
                    ins.append(const(f"b{i}", (0.1 * rng.standard_normal(units)).astype(np.float32)))
                nodes.append(helper.make_node("Gemm", ins, [out], transB=int(tb), alpha=float(ly.get("alpha", 1.0)),
                                              beta=float(ly.get("beta", 1.0))))
            else:
                nodes.append(helper.make_node("MatMul", [cur, const(f"w{i}", wt)], [out]))
            shape = (shape[0], units)
        elif op == "Reshape":
            f, sp = shape[1], int(ly["split"])
            if f % (sp * sp):
                sp = 1
            shape = (shape[0], f // (sp * sp), sp, sp)
            nodes.append(helper.make_node("Reshape", [cur, const(f"r{i}", np.array(shape, np.int64))], [out]))
        else:
            raise Invalid(f"unknown layer {op}")
        cur = out
        produced.append((cur, shape))
    if not nodes:
        raise Invalid("no layers")
    graph = helper.make_graph(nodes, "fuzz", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                           list(spec.input_shape))],
                              [helper.make_tensor_value_info(cur, TensorProto.FLOAT, list(shape))], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="microaot fuzz")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


# ---------------------------------------------------------------------------------- running
def _inputs(spec: OnnxSpec, seed: int, n: int = 1) -> list[np.ndarray]:
    rng = np.random.default_rng([seed, 12])
    return [rng.uniform(-1, 1, spec.input_shape).astype(np.float32) for _ in range(n)]


def quantize(data: bytes, spec: OnnxSpec, fmt: str, per_channel: bool, seed: int) -> bytes:
    """onnxruntime's quantize_static of the float model (QDQ or QOperator, int8 activations and
    weights), calibrated on 8 random inputs."""
    import tempfile
    from pathlib import Path

    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.it = iter([{"x": a} for a in _inputs(spec, seed + 1, 8)])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.it, None)

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # the quantizer's advice (pre-processing, QDQ on x64) on every model
    with tempfile.TemporaryDirectory(prefix="aot_fuzzonnx_") as d:
        src, dst = Path(d) / "f.onnx", Path(d) / "q.onnx"
        src.write_bytes(data)
        try:
            quantize_static(str(src), str(dst), Reader(), quant_format=QuantFormat.QDQ if fmt == "qdq" else
                            QuantFormat.QOperator, activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                            per_channel=per_channel)
        finally:
            root.setLevel(level)
        return dst.read_bytes()


def _ort(data: bytes, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    return np.asarray(sess.run(None, {"x": x})[0])


def _quant_steps(data: bytes) -> tuple[int, float]:
    """(QuantizeLinear nodes and QOperator ops of the quantized model, the scale of its output)."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load_from_string(data)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    n = sum(1 for nd in m.graph.node if nd.op_type == "QuantizeLinear" or nd.op_type.startswith("QLinear"))
    out = m.graph.output[0].name
    scale = 0.0
    for nd in m.graph.node:
        if out in nd.output and nd.op_type == "DequantizeLinear":
            scale = float(np.max(inits.get(nd.input[1], np.zeros(1))))
    return max(n, 1), scale


@dataclass
class _Ready:
    index: int
    data: bytes  # the ONNX model run (float, QDQ or QOperator)
    x: np.ndarray
    want: np.ndarray  # onnxruntime's output


class OnnxDiffer:
    """Runs ONNX cases: onnxruntime, and the compiled C on the host (all cases of a batch in one
    shared library, built by aot.fuzz.differential.Differ)."""

    def __init__(self) -> None:
        from aot.fuzz.differential import Differ
        self.host = Differ()

    def close(self) -> None:
        self.host.close()

    def run_one(self, case: OnnxCase) -> OnnxOutcome:
        return self.run([case])[0]

    def run(self, cases: Sequence[OnnxCase]) -> list[OnnxOutcome]:
        from aot.errors import Error
        from aot.frontend.onnx import load_onnx
        from aot.fuzz.differential import Outcome, _Prepared
        from aot.pipeline.driver import CompileOptions, compile_model
        outcomes = [OnnxOutcome(c, "ok") for c in cases]
        ready: list[_Ready] = []
        preps: list[_Prepared] = []
        for i, case in enumerate(cases):
            stage = "build"
            try:
                data = build_onnx(case.spec)
                if case.arm != "float":
                    stage = "quantize"
                    data = quantize(data, case.spec, case.arm, case.per_channel, case.input_seed)
                x = _inputs(case.spec, case.input_seed)[0]
                stage = "onnxruntime"
                want = _ort(data, x)
            except Exception as e:  # noqa: BLE001 - onnx, the quantizer or onnxruntime refused the model
                outcomes[i] = OnnxOutcome(case, "invalid", f"{stage}: {type(e).__name__}: {e}"[:500])
                continue
            stage = "load"
            try:
                model = load_onnx(data, name="fuzz")
                stage = "compile"
                compiled = compile_model(model, CompileOptions(prefix=f"onnxfuzz_{i}"))
            except Error as e:
                outcomes[i] = OnnxOutcome(case, "refused", f"{stage}: {type(e).__name__}: {e}"[:500])
                continue
            except Exception as e:  # noqa: BLE001 - a compiler crash
                outcomes[i] = OnnxOutcome(case, "crash", f"{stage}: {type(e).__name__}: {e}\n"
                                          f"{traceback.format_exc(limit=-4)}"[:3000])
                continue
            ready.append(_Ready(i, data, x, want))
            preps.append(_Prepared(i, model, compiled, b"", [x], [], f"onnxfuzz_{i}"))
        host = [Outcome(None, "ok") for _ in cases]  # type: ignore[arg-type]
        dlls = self.host._build_c(preps, host)
        for r, p in zip(ready, preps):
            if host[r.index].status != "ok":
                outcomes[r.index] = OnnxOutcome(cases[r.index], "crash", host[r.index].detail)
                continue
            try:
                got = np.asarray(self.host._run_ours(p, "c", dlls[r.index])[0])
            except Error as e:
                outcomes[r.index] = OnnxOutcome(cases[r.index], "crash", f"run: {type(e).__name__}: {e}"[:2000])
                continue
            outcomes[r.index] = compare(cases[r.index], r.data, got, r.want)
        return outcomes


def compare(case: OnnxCase, data: bytes, got: np.ndarray, want: np.ndarray) -> OnnxOutcome:
    """Float: within FLOAT_RTOL of the output's magnitude; quantized: at most one output step per
    quantized op of the model."""
    if got.size != want.size:
        return OnnxOutcome(case, "mismatch", f"shape: ours {got.shape}, onnxruntime {want.shape}")
    got = got.reshape(want.shape).astype(np.float64)
    diff = np.abs(got - want.astype(np.float64))
    if case.arm == "float":
        tol = FLOAT_RTOL * max(1.0, float(np.max(np.abs(want))))
        if np.all(diff <= tol + FLOAT_RTOL * np.abs(want)):
            return OnnxOutcome(case, "ok")
        k = int(np.argmax(diff))
        return OnnxOutcome(case, "mismatch", f"float vs onnxruntime: max {diff.max():.3g} at {k} "
                           f"({got.flat[k]} vs {want.flat[k]}), tolerance {tol:.3g}")
    steps, scale = _quant_steps(data)
    if scale <= 0:  # no DequantizeLinear at the output: steps of the output's range
        scale = float(np.max(np.abs(want))) / 127 or 1.0
    if float(diff.max()) <= steps * scale * (1 + 1e-6):
        return OnnxOutcome(case, "ok")
    k = int(np.argmax(diff))
    return OnnxOutcome(case, "mismatch", f"{case.arm} vs onnxruntime: {diff.max() / scale:.1f} steps at {k} "
                       f"({got.flat[k]} vs {want.flat[k]}), at most {steps} allowed")


# ---------------------------------------------------------------------------------- shrinking
def candidates(case: OnnxCase) -> Iterator[OnnxCase]:
    layers = case.spec.layers
    for k in range(len(layers)):
        if len(layers) > 1:
            yield replace(case, spec=replace(case.spec, layers=layers[:k] + layers[k + 1:]))
    for k in range(len(layers) - 1, 0, -1):
        yield replace(case, spec=replace(case.spec, layers=layers[:k]))
    if case.per_channel:
        yield replace(case, per_channel=False)


def shrink_onnx(outcome: OnnxOutcome, differ: OnnxDiffer, budget: int = 60) -> OnnxOutcome:
    """The smallest case found that keeps `outcome`'s signature."""
    from aot.fuzz.shrink import greedy
    return greedy(outcome, candidates, differ.run_one, budget)


def dumps(case: OnnxCase) -> str:
    return json.dumps(case.to_json(), sort_keys=True)
