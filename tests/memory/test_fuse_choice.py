"""A residual ADD of two producer groups joins the one reading fewer shared bytes (aot.transform.fuse):
the projection shortcut, reading the block's input, may then run before the block's last conv and
the block's input dies earlier (ResNet-8: never a larger pool than joining the shortcut)."""
from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import pytest

import aot
from aot.ir import Var
from aot.pipeline.driver import CompileOptions, compile_model
from aot.runners.kernel_module import run_kernel_module
from aot.tools.zoo import resnet8

OPTS = CompileOptions(cpu="cortex-m4", policy="micro", io_buffers="pool")
fuse_mod = importlib.import_module("aot.transform.fuse")  # the module (the package exports the pass)
PREFER_SHARED = fuse_mod._shared_input_bytes


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> aot.Model:
    path = Path(tmp_path_factory.mktemp("zoo")) / "resnet8.tflite"
    path.write_bytes(resnet8().calibrated_int8())
    return aot.load(path)


def test_the_add_joins_the_branch_whose_input_dies_there(model: aot.Model) -> None:
    cm = compile_model(model, OPTS)
    main = cm.fused.main
    uses: dict[int, int] = {}
    for c in main.body:
        for a in c.args:
            if isinstance(a, Var):
                uses[id(a)] = uses.get(id(a), 0) + 1
    projection = 0
    for c in main.body:
        f = cm.fused.functions.get(getattr(c.op, "name", ""))
        if f is None or not any(k.op_name == "add" for k in f.body):
            continue
        acts = [a for a in c.args if isinstance(a, Var) and len(a.type.shape) == 4]
        if len(acts) == 2:  # the group's conv input and the other branch (skip or shortcut output)
            conv_in = f.body[0].args[0]
            outer = acts[[p is conv_in for p in f.params].index(True)]
            assert uses[id(outer)] == 1, "the ADD joined the shortcut, whose input the block's first conv shares"
            projection += 1
    assert projection == 3  # ResNet-8's three blocks (blocks 2 and 3 with a 1x1 stride-2 shortcut)


@pytest.mark.slow
def test_joining_the_shortcut_plans_a_larger_pool(model: aot.Model, monkeypatch: pytest.MonkeyPatch) -> None:
    chosen = compile_model(model, OPTS)
    monkeypatch.setattr(fuse_mod, "_shared_input_bytes", lambda g, uses: -PREFER_SHARED(g, uses))
    other = compile_model(model, OPTS)
    # never larger; with the union column of the 3x3 layers (aot.lower.schedule.gemm_union) both
    # orders now reach ResNet-8's 32x32 stage bound (33,152 B; before it: 33,344 vs 33,920)
    assert chosen.plan.activation_bytes <= other.plan.activation_bytes
    x = np.random.default_rng(3).integers(-128, 128, model.inputs[0].type.shape).astype(np.int8)
    ref = aot.reference(model, {model.inputs[0].name: x})[model.outputs[0].name]
    for cm in (chosen, other):
        got = run_kernel_module(cm.module, [x], "c")[0]
        np.testing.assert_array_equal(got.reshape(ref.shape), ref)
