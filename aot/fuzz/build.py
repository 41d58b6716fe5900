"""A ModelSpec written as a TFLite flatbuffer with the project's writer (so tflite-micro runs
the same file): each op by its family's emitter (aot.fuzz.generator.FAMILIES), constants drawn
from the op's seed, biases scaled from the input and weight scales of the spec as it is (a shrunk
spec stays valid)."""
from __future__ import annotations

from aot.fuzz.generator import FAMILIES
from aot.fuzz.spec import ModelSpec
from aot.fuzz.state import BuildCtx


def build_tflite(spec: ModelSpec) -> bytes:
    """The .tflite bytes of `spec`."""
    ctx = BuildCtx(spec)
    for op in spec.ops:
        FAMILIES[op.kind].emit(ctx, op)
    ctx.b.set_inputs([ctx.idx[i] for i in spec.inputs])
    ctx.b.set_outputs([ctx.idx[i] for i in spec.outputs])
    return ctx.b.finish()
