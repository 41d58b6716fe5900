"""The bundled example: an int8 keyword spotter in the DS-CNN style, built by project code
with seeded weights and post-training quantization (calibrated on seeded inputs), so the
product needs no model file. `aot demo` builds it for a board, runs it in QEMU, checks it
bit-exactly against the host, and prints the footprint and the instruction count."""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from aot.graph_builder import GraphBuilder
from aot.ir import Model, Quant

INPUT_SHAPE = (1, 49, 10, 1)  # 49 frames x 10 MFCC features, as MLPerf Tiny's KWS
CLASSES = 12


@dataclass(frozen=True)
class _Layer:
    kind: str  # conv | dw | pw
    out_ch: int
    kernel: tuple[int, int]
    strides: tuple[int, int]


LAYERS = (
    _Layer("conv", 32, (10, 4), (2, 2)),
    _Layer("dw", 32, (3, 3), (1, 1)), _Layer("pw", 32, (1, 1), (1, 1)),
    _Layer("dw", 32, (3, 3), (1, 1)), _Layer("pw", 32, (1, 1), (1, 1)),
    _Layer("dw", 32, (3, 3), (1, 1)), _Layer("pw", 32, (1, 1), (1, 1)),
)


def _float_weights(seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    cin = INPUT_SHAPE[3]
    out = []
    for layer in LAYERS:
        kh, kw = layer.kernel
        if layer.kind == "dw":
            w = rng.standard_normal((1, kh, kw, cin)) * np.sqrt(2.0 / (kh * kw))
        else:
            w = rng.standard_normal((layer.out_ch, kh, kw, cin)) * np.sqrt(2.0 / (kh * kw * cin))
        b = rng.standard_normal(layer.out_ch) * 0.1
        out.append((w.astype(np.float32), b.astype(np.float32)))
        cin = layer.out_ch
    fc_w = (rng.standard_normal((CLASSES, cin)) * np.sqrt(1.0 / cin)).astype(np.float32)
    fc_b = (rng.standard_normal(CLASSES) * 0.1).astype(np.float32)
    out.append((fc_w, fc_b))
    return out


def _build(weights, quant: dict[str, tuple[float, int]] | None) -> Model:  # noqa: ANN001
    """Float model when quant is None, else the int8 model with the given activation ranges."""
    g = GraphBuilder("demo_kws")
    q8 = quant is not None

    def aq(name: str) -> dict:
        if not q8:
            return {}
        s, z = quant[name]  # type: ignore[index]
        return {"out_quant": Quant((s,), (z,))}

    in_q = Quant((quant["input"][0],), (quant["input"][1],)) if q8 else None  # type: ignore[index]
    x = g.input("input", INPUT_SHAPE, "int8" if q8 else "float32", in_q)
    in_scale = quant["input"][0] if q8 else 1.0  # type: ignore[index]
    for i, (layer, (w, b)) in enumerate(zip(LAYERS, weights)):
        name = f"{layer.kind}{i}"
        if q8:
            axis = 3 if layer.kind == "dw" else 0
            red = tuple(a for a in range(4) if a != axis)
            scales = np.maximum(np.abs(w).max(axis=red), 1e-8) / 127.0
            shape = [1, 1, 1, 1]
            shape[axis] = -1
            wq = np.clip(np.round(w / scales.reshape(shape)), -127, 127).astype(np.int8)
            wc = g.constant(wq, f"{name}_w", quant=Quant(tuple(float(np.float32(s)) for s in scales),
                                                          (0,) * len(scales), axis))
            bscale = np.float32(in_scale) * scales.astype(np.float32)
            bc = g.constant(np.round(b / bscale).astype(np.int32), f"{name}_b",
                            quant=Quant(tuple(float(s) for s in bscale), (0,) * len(scales), 0))
        else:
            wc, bc = g.constant(w, f"{name}_w"), g.constant(b, f"{name}_b")
        if layer.kind == "dw":
            x = g.depthwise_conv2d(x, wc, bc, strides=layer.strides, padding="same", activation="relu",
                                   name=name, **aq(name))
        else:
            x = g.conv2d(x, wc, bc, strides=layer.strides, padding="same", activation="relu", name=name, **aq(name))
        if q8:
            in_scale = quant[name][0]  # type: ignore[index]
    x = g.avg_pool2d(x, (x.type.shape[1], x.type.shape[2]), name="pool", **aq("pool"))
    x = g.reshape(x, (1, -1), name="flatten")
    fw, fb = weights[-1]
    if q8:
        s = float(np.float32(max(np.abs(fw).max(), 1e-8) / 127.0))
        wc = g.constant(np.clip(np.round(fw / s), -127, 127).astype(np.int8), "fc_w", quant=Quant((s,), (0,)))
        bs = float(np.float32(in_scale) * np.float32(s))
        bc = g.constant(np.round(fb / bs).astype(np.int32), "fc_b", quant=Quant((bs,), (0,)))
    else:
        wc, bc = g.constant(fw, "fc_w"), g.constant(fb, "fc_b")
    x = g.fully_connected(x, wc, bc, name="fc", **aq("fc"))
    x = g.softmax(x, name="softmax", **({"out_quant": Quant((1.0 / 256,), (-128,))} if q8 else {}))
    g.output(x, "probs")
    return g.finish()


def _asym(lo: float, hi: float) -> tuple[float, int]:
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = float(np.float32(max(hi - lo, 1e-6) / 255.0))
    zp = int(np.clip(round(-128 - lo / scale), -128, 127))
    return scale, zp


def build_demo_model(seed: int = 0, calibration_samples: int = 8) -> Model:
    """The int8 DS-CNN keyword spotter: seeded weights, ranges calibrated on seeded inputs."""
    from aot.oracle import reference

    weights = _float_weights(seed)
    fmodel = _build(weights, None)
    rng = np.random.default_rng(seed + 1)
    lo: dict[str, float] = {}
    hi: dict[str, float] = {}
    for _ in range(calibration_samples):
        x = rng.standard_normal(INPUT_SHAPE).astype(np.float32) * 2.0
        trace: dict[str, np.ndarray] = {"input": x}
        reference(fmodel, {"input": x}, trace)
        for k, v in trace.items():
            lo[k] = min(lo.get(k, 0.0), float(v.min()))
            hi[k] = max(hi.get(k, 0.0), float(v.max()))
    quant = {k: _asym(lo[k], hi[k]) for k in lo}
    return _build(weights, quant)


def demo_input(model: Model, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    v = model.inputs[0]
    return {v.name: rng.integers(-128, 128, size=v.type.shape, dtype=np.int8)}


def run_demo(board: str = "mps2-an386", host_only: bool = False) -> int:
    from aot import build
    from aot.oracle import reference

    t0 = time.perf_counter()
    model = build_demo_model()
    inputs = demo_input(model)
    ref = reference(model, inputs)["probs"]
    print(f"demo: int8 DS-CNN keyword spotter, input {INPUT_SHAPE}, {CLASSES} classes "
          f"(built in {time.perf_counter() - t0:.1f} s)")
    ok = True
    for backend in ("c", "llvm"):
        lib = build(model, backend=backend)
        out = lib.run(inputs)["probs"]
        same = bool(np.array_equal(out, ref))
        ok &= same
        print(f"  host {backend:4}: {'bit-exact with the numpy reference' if same else 'MISMATCH'}  "
              f"output {out.reshape(-1).tolist()}")
    plan = build(model).compiled.plan
    print(f"  host build's memory plan (host kernels; input and output in the application's buffers): "
          f"{plan.activation_bytes:,} B of activations (lower bound {plan.lower_bound_bytes:,} B, "
          f"planner {plan.planner})")
    if not host_only:
        from aot.tools.demo_board import run_board_demo
        ok &= run_board_demo(model, inputs, ref, board)
    print("demo: OK" if ok else "demo: FAILED")
    return 0 if ok else 1
