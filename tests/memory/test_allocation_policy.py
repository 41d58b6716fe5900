"""Static memory planning, the allocation policy and workspace lowering."""
from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import aot
from aot.pipeline.driver import CompileOptions, compile_model
from aot.ir import verify
from aot.kernel.allocations import AllocationPolicy, lower_allocations, lower_workspaces
from aot.kernel.simplify import simplify
from aot.kernel.verify import verify_kernel_module
from aot.ops import infer_call
from aot.pipeline.plan import plan_memory
from aot.runners.kernel_module import run_kernel_module
from aot.transform import fold_constants, fuse, inline_functions, materialize_outputs

RNG = np.random.default_rng(11)


def conv_chain(n_convs: int = 3, c: int = 4, hw: int = 8):  # noqa: ANN201
    g = aot.GraphBuilder("chain")
    x = g.input("x", (1, hw, hw, c))
    y = x
    for i in range(n_convs):
        w = RNG.standard_normal((c, 3, 3, c)).astype(np.float32) * 0.3
        y = g.conv2d(y, w, RNG.standard_normal(c).astype(np.float32), padding="same", activation="relu",
                     name=f"conv{i}")
    k = g.constant(np.full((c,), 0.5, np.float32), "half")
    y = g.add(y, g.mul(k, np.full((c,), 2.0, np.float32)))  # constant subexpression to fold
    g.output(g.relu(y), "y")
    return g.finish()


def kernel_names(model) -> list[str]:  # noqa: ANN001
    """The kernels as lowered (the allocation policy names them before share_kernels merges
    same-shaped ones)."""
    cm = compile_model(model)
    return [f"{cm.options.prefix}_{fn.name}" for fn in cm.fused.functions.values() if fn.primitive]


def test_host_and_micro_functions_in_one_build() -> None:
    """The seed-002 case: host functions (platform heap) and device functions (workspace pool)
    in one build; C and LLVM both compile, link and give the reference output."""
    model = conv_chain()
    names = [n for n in kernel_names(model) if "conv2d" in n]
    host = AllocationPolicy("host", stack_limit=0, large="platform")
    micro = AllocationPolicy("micro", stack_limit=0, large="workspace")
    policy = {"*": host, names[1]: micro, names[2]: micro}
    data = {"x": RNG.standard_normal((1, 8, 8, 4)).astype(np.float32)}
    ref = aot.reference(model, data)["y"]
    for backend in ("c", "llvm"):
        lib = aot.build(model, backend=backend, policy=policy)
        np.testing.assert_allclose(lib.run(data)["y"], ref, rtol=1e-5, atol=1e-5)
    src = "\n".join(v for k, v in aot.api.library_files(compile_model(model, CompileOptions(policy=policy))).items()
                    if k.endswith(".c"))
    first = src.split(f"int32_t {names[0]}(")[1].split("\n}\n")[0]
    second = src.split(f"int32_t {names[1]}(")[1].split("\n}\n")[0]
    assert "aot_platform_allocate" in first and "aot_platform_allocate" not in second
    assert f"AOT_KERNEL int32_t {names[1]}(const float *" in src and "float *im2col" in src.split(names[1])[1].split(")")[0]
    ws = [b for b in compile_model(model, CompileOptions(policy=policy)).plan.buffers if b.kind == "workspace"]
    assert len(ws) == 2


def test_im2col_scratch_in_pool_reuses_dead_tensor_memory() -> None:
    model = conv_chain(3)
    cm = compile_model(model, CompileOptions(policy="micro", stack_limit=0))
    bufs = cm.plan.buffers
    ws = [b for b in bufs if b.kind == "workspace"]
    tensors = [b for b in bufs if b.kind == "tensor"]
    assert ws, "im2col scratch must be a planned workspace buffer under micro"
    shared = [(w.name, t.name) for w in ws for t in tensors
              if (w.last_use < t.first_use or t.last_use < w.first_use)
              and w.offset < t.offset + t.size and t.offset < w.offset + w.size]
    assert shared, f"no workspace shares memory with a dead tensor: {bufs}"
    assert cm.plan.activation_bytes <= sum(b.size for b in bufs)
    data = {"x": RNG.standard_normal((1, 8, 8, 4)).astype(np.float32)}
    np.testing.assert_allclose(aot.build(model, policy="micro", stack_limit=0).run(data)["y"],
                               aot.reference(model, data)["y"], rtol=1e-5, atol=1e-5)


GRAPH_OPTIONAL = [("fold_constants", fold_constants), ("fuse", fuse), ("inline", inline_functions),
                  ("materialize_outputs", materialize_outputs)]


def _kernel_optional(policy):  # noqa: ANN001, ANN202
    return [("simplify", simplify), ("lower_allocations", lambda m: lower_allocations(m, policy)),
            ("lower_workspaces", lower_workspaces)]


@pytest.mark.slow
def test_optional_passes_in_50_random_orders() -> None:
    from aot.lower.entry import build_kernel_module
    model = conv_chain(2, c=2, hw=5)
    data = RNG.standard_normal((1, 5, 5, 2)).astype(np.float32)
    policy = AllocationPolicy("micro", stack_limit=0, large="workspace")
    outputs = []
    for seed in range(50):
        rnd = random.Random(seed)
        g = GRAPH_OPTIONAL[:]
        rnd.shuffle(g)
        m = model
        for _, p in g[: rnd.randint(1, len(g))]:
            m = verify(p(m), infer_call)
        m = verify(fuse(materialize_outputs(m)), infer_call)  # mandatory finishers
        km = build_kernel_module(m, "model")
        k = _kernel_optional(policy)
        rnd.shuffle(k)
        for _, p in k[: rnd.randint(0, len(k))]:
            km = verify_kernel_module(p(km))
        km = verify_kernel_module(lower_workspaces(lower_allocations(km, policy)))
        planned, _ = plan_memory(km)
        verify_kernel_module(planned, planned=True)
        outputs.append(run_kernel_module(planned, [data], "interp")[0])
        if seed % 10 == 0:
            np.testing.assert_array_equal(run_kernel_module(planned, [data], "c")[0].shape, outputs[-1].shape)
    for o in outputs[1:]:
        np.testing.assert_array_equal(o, outputs[0])


def test_inplace_elementwise_shares_storage() -> None:
    g = aot.GraphBuilder("inplace")
    x = g.input("x", (1, 6, 6, 4))
    c = g.conv2d(x, RNG.standard_normal((4, 1, 1, 4)).astype(np.float32), name="c1")
    d = g.conv2d(x, RNG.standard_normal((4, 1, 1, 4)).astype(np.float32), name="c2")
    s = g.add(c, d)  # both operands die here: the sum can overwrite one of them
    g.output(g.conv2d(s, RNG.standard_normal((4, 1, 1, 4)).astype(np.float32)), "y")
    model = g.finish()
    with_ip = compile_model(model)
    n = 6 * 6 * 4 * 4
    # the add fuses after c2 (its epilogue reads c1 only at the index it writes): the sum overwrites
    # c1, and c2's own result never needs storage; without in-place the pool holds two activations
    assert with_ip.plan.activation_bytes == n
    assert with_ip.plan.lower_bound_bytes == n
    data = {"x": RNG.standard_normal((1, 6, 6, 4)).astype(np.float32)}
    for backend in ("c", "llvm"):
        np.testing.assert_allclose(aot.build(model, backend=backend).run(data)["y"], aot.reference(model, data)["y"],
                                   rtol=1e-5, atol=1e-5)


def _arm_link(lib_dir: Path, tmp: Path, extra_src: str) -> Path:
    from aot.assets import asset_dir
    rt = asset_dir("runtime_c")
    main = tmp / "main.c"
    main.write_text(extra_src)
    elf = tmp / "prog.elf"
    su_dir = tmp / "obj"
    su_dir.mkdir()
    objs = []
    for src in sorted((lib_dir / "src").glob("*.c")) + sorted((rt / "src").glob("*.c")) + [main]:
        obj = su_dir / (src.stem + ".o")
        subprocess.run(["arm-none-eabi-gcc", "-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16",
                        "-O2", "-std=c99", "-Wall", "-Wextra", "-Werror", "-fstack-usage", "-ffunction-sections",
                        f"-I{lib_dir / 'include'}", f"-I{lib_dir / 'src'}", f"-I{rt / 'include'}", "-c", str(src),
                        "-o", str(obj)], check=True, capture_output=True, cwd=su_dir)
        objs.append(str(obj))
    subprocess.run(["arm-none-eabi-gcc", "-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16",
                    "--specs=nosys.specs", "-Wl,--gc-sections"] + objs + ["-lm", "-o", str(elf)],
                   check=True, capture_output=True)
    return elf


def test_micro_needs_no_heap_and_bounded_stack(tmp_path: Path) -> None:
    assert shutil.which("arm-none-eabi-gcc"), "arm-none-eabi-gcc is installed by make setup"
    from elftools.elf.elffile import ELFFile
    model = conv_chain(3, c=8, hw=10)  # im2col of 3x3x8 floats = 288 B; with stack_limit 64 -> workspace
    lib = aot.build(model, policy="micro", stack_limit=64)
    lib_dir = lib.export(tmp_path / "lib")
    main = """
#include "model.h"
#include "aot_runtime.h"
static float x[1 * 10 * 10 * 8];
static float y[1 * 10 * 10 * 8];
int32_t aot_platform_allocate(size_t n, size_t a, void **p) { (void)n; (void)a; *p = 0; return AOT_ERR_ALLOCATION; }
int32_t aot_platform_free(void *p) { (void)p; return AOT_OK; }
void aot_platform_log(const char *m) { (void)m; }
int main(void) {
    struct model_inputs in = { x };
    struct model_outputs out = { y };
    return (int)model_run(&in, &out);
}
"""
    elf = _arm_link(lib_dir, tmp_path, main)
    with open(elf, "rb") as f:
        symtab = ELFFile(f).get_section_by_name(".symtab")
        names = {s.name for s in symtab.iter_symbols()}
    assert "model_run" in names
    for bad in ("malloc", "calloc", "realloc", "free", "_malloc_r", "_free_r"):
        assert bad not in names, f"{bad} linked into a micro-policy program"
    frames = {}
    for su in (tmp_path / "obj").glob("model*.su"):
        for line in su.read_text().splitlines():
            loc, size, kind = line.rsplit("\t", 2)
            frames[loc.rsplit(":", 1)[-1]] = int(size)
    assert frames and all(sz <= 64 + 96 for sz in frames.values()), frames
    meta = json.loads((lib_dir / "metadata.json").read_text())
    assert meta["policy"] == "micro" and any(b["kind"] == "workspace" for b in meta["buffers"])


def _mobilenet(res: int, residual: bool, alpha: float = 0.25):  # noqa: ANN202
    rng = np.random.default_rng(res)
    g = aot.GraphBuilder("mnet")
    x = g.input("x", (1, res, res, 3))
    c = int(32 * alpha)
    y = g.conv2d(x, rng.standard_normal((c, 3, 3, 3)).astype(np.float32), strides=(2, 2), padding="same",
                 activation="relu6")
    for o, s in [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)] + [(512, 1)] * 5 + [(1024, 2), (1024, 1)]:
        o = int(o * alpha)
        inp = y
        y = g.depthwise_conv2d(y, rng.standard_normal((1, 3, 3, c)).astype(np.float32), strides=(s, s),
                               padding="same", activation="relu6")
        y = g.conv2d(y, rng.standard_normal((o, 1, 1, c)).astype(np.float32), activation="relu6")
        if residual and s == 1 and o == c:
            y = g.add(y, inp)
        c = o
    y = g.reshape(g.avg_pool2d(y, (y.type.shape[1], y.type.shape[2])), (1, -1))
    g.output(g.softmax(g.fully_connected(y, rng.standard_normal((10, c)).astype(np.float32))), "p")
    return g.finish()


@pytest.mark.parametrize("res,residual", [(96, False), (128, True)])
@pytest.mark.parametrize("policy", ["host", "micro"])
def test_mobilenet_style_plans_within_2_percent_of_lower_bound(res: int, residual: bool, policy: str) -> None:
    cm = compile_model(_mobilenet(res, residual), CompileOptions(policy=policy, stack_limit=64))
    p = cm.plan
    assert p.activation_bytes <= 1.02 * p.lower_bound_bytes, (p.activation_bytes, p.lower_bound_bytes)
    if policy == "micro":
        assert any(b.kind == "workspace" for b in p.buffers)


def test_shared_models_plan_at_or_below_the_activation_lower_bound() -> None:
    from conftest import shared_model
    # ../shared/models/README.md: peak of simultaneously live tensors without in-place
    readme_bounds = {"kws_int8": 16_000, "ad_int8": 768, "micro_speech_quantized": 5_960}
    for name, bound in readme_bounds.items():
        cm = compile_model(aot.load(shared_model(f"{name}.tflite")), CompileOptions(policy="micro"))
        assert cm.plan.activation_bytes <= bound, (name, cm.plan.activation_bytes)
        assert cm.plan.activation_bytes <= cm.plan.lower_bound_bytes


def test_several_pools_are_filled_in_order_and_run() -> None:
    model = conv_chain(3, c=8, hw=10)  # three 3.2 KB float tensors live at a time at most two
    cm = compile_model(model, CompileOptions(pools=(("dtcm", 4096), ("sram", 1 << 20)), policy="micro",
                                             stack_limit=64))
    pools = {p.name: p.size for p in cm.module.pools}
    assert list(pools) == ["dtcm", "sram"] and 0 < pools["dtcm"] <= 4096 and pools["sram"] > 0
    assert {b.pool for b in cm.plan.buffers} == {"dtcm", "sram"}
    data = {"x": RNG.standard_normal((1, 10, 10, 8)).astype(np.float32)}
    ref = aot.reference(model, data)["y"]
    for backend in ("c", "llvm"):
        lib = aot.build(model, backend=backend, pools=(("dtcm", 4096), ("sram", 1 << 20)), policy="micro",
                        stack_limit=64)
        np.testing.assert_allclose(lib.run(data)["y"], ref, rtol=1e-5, atol=1e-5)
    with pytest.raises(aot.FitError, match="dtcm\\+sram"):
        compile_model(model, CompileOptions(pools=(("dtcm", 1024), ("sram", 2048))))


@pytest.mark.usefixtures("arm_toolchain")
def test_board_with_two_ram_regions_builds_with_two_pools(tmp_path: Path) -> None:
    from aot.board.flow import make_project
    from aot.runners.qemu import build_project
    from elftools.elf.elffile import ELFFile
    g = aot.GraphBuilder("big")
    x = g.input("x", (1, 64, 64, 1))
    a = g.conv2d(x, np.ones((3, 1, 1, 1), np.float32))  # 48 KiB: fits the 64 KiB DTCM
    b = g.conv2d(a, np.ones((12, 1, 1, 3), np.float32))  # 192 KiB: only the SRAM holds it
    g.output(g.conv2d(b, np.ones((1, 1, 1, 12), np.float32)), "y")
    model = g.finish()
    bb = make_project(model, "stm32f746g-disco", tmp_path / "p", {"x": np.zeros((1, 64, 64, 1), np.float32)})
    assert [p.name for p in bb.compiled.module.pools] == ["dtcm", "sram"]
    elf = build_project(bb.project_dir)
    with open(elf, "rb") as f:
        syms = {s.name: s["st_value"] for s in ELFFile(f).get_section_by_name(".symtab").iter_symbols()}
    assert 0x20000000 <= syms["model_pool_dtcm"] < 0x20010000  # DTCM
    assert syms["model_pool_sram"] >= 0x20010000  # SRAM1/2
