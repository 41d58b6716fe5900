"""Kernel passes as text before and after (the TVM habit): simplify, lower_allocations under two
policies, lower_workspaces; and the planner reads a workspace from the buffer's kind."""
from __future__ import annotations

from aot.kernel import format_function, format_module
from aot.kernel import ir as K
from aot.kernel.allocations import AllocationPolicy, lower_allocations, lower_workspaces
from aot.kernel.simplify import simplify
from aot.kernel.verify import verify_kernel_module
from aot.pipeline.plan import inplace_pairs, plan_memory


def module_of(kernel: K.PrimFunc, calls: int = 1) -> K.KernelModule:
    """An entry calling `kernel` (params: one input, one output) `calls` times in a chain."""
    p_in, p_out = kernel.params[0], kernel.params[1]
    x, y = K.Buffer("x", p_in.dtype, p_in.size), K.Buffer("y", p_out.dtype, p_out.size)
    mids = [K.Buffer(f"mid{n}", p_out.dtype, p_out.size) for n in range(calls - 1)]
    chain = [x] + mids + [y]
    body: list[K.Stmt] = []
    for src, dst in zip(chain, chain[1:]):
        body += [K.CallKernel(kernel.name, (src, dst)), K.ReturnOnError()]
    entry = K.PrimFunc("m_main", (x, y), K.Seq(tuple(body)))
    return K.KernelModule("m", (kernel, entry), (), (K.Pool("sram", 0),), "m_main", (x,), (y,), tuple(mids))


# ----------------------------------------------------------------------------- simplify
def test_simplify() -> None:
    a, o = K.Buffer("a", "i32", 8), K.Buffer("o", "f32", 8)
    i, v, f = K.ScalarVar("i"), K.ScalarVar("v"), K.ScalarVar("f", "f32")
    body = K.For(i, 4, K.Seq((
        K.Let(v, K.Cast("i32", a[(i * 1 + 0) * 2])),
        K.Seq((K.Assign(v, (v + 2) + 3),
               K.Assign(v, K.Binary("<<", K.Const(1), K.Const(4)) * (0 + v) - 0 + v * 0 + (v >> 0) / 1),)),
        K.Let(f, v.cast("f32") + 0.0),
        K.Store(o, i * 2 + K.Binary("min", K.Const(7), K.Const(1)), K.Cast("f32", K.Cast("i8", K.Const(300))) * f),
    )))
    m = module_of(K.PrimFunc("k", (a, o), body))
    assert format_function(m.funcs[0]) == """\
func k(a: i32[8], o: f32[8]):
    for i in range(4):
        let v: i32 = i32(a[(i * 1 + 0) * 2])
        v = v + 2 + 3
        v = (1 << 4) * (0 + v) - 0 + v * 0 + (v >> 0) / 1
        let f: f32 = f32(v) + 0.0f
        o[i * 2 + min(7, 1)] = f32(i8(300)) * f"""
    after = simplify(m)
    verify_kernel_module(after)
    assert format_function(after.funcs[0]) == """\
func k(a: i32[8], o: f32[8]):
    for i in range(4):
        let v: i32 = a[i * 2]
        v = v + 5
        v = 16 * v + v
        let f: f32 = f32(v) + 0.0f
        o[i * 2 + 1] = 44.0f * f"""


# ----------------------------------------------------------------------------- allocations
def scratch_kernel() -> K.PrimFunc:
    """A kernel with a 64-byte and a 2048-byte scratch allocation."""
    x, y = K.Buffer("x", "i32", 4), K.Buffer("y", "i32", 4)
    small, big = K.Buffer("small", "i32", 16), K.Buffer("big", "i32", 512)
    i, j = K.ScalarVar("i"), K.ScalarVar("j")
    body = K.Allocate(small, K.Allocate(big, K.Seq((
        K.For(j, 512, K.Store(big, j, j * 2)),
        K.For(i, 4, K.Seq((K.Store(small, i, x[i] + big[i * 128]), K.Store(y, i, small[i])))),
    ))))
    return K.PrimFunc("k", (x, y), body)


KERNEL = """\
func k(x: i32[4], y: i32[4]{param}):
    allocate small: i32[16] ({small}, align 16):
{big}            for j in range(512):
                big[j] = j * 2
            for i in range(4):
                small[i] = x[i] + big[i * 128]
                y[i] = small[i]"""


def kernel_text(small: str, big: str | None, param: str = "") -> str:
    """KERNEL with the allocations' classes; big=None: the big allocation is a parameter."""
    text = KERNEL.format(small=small, param=param,
                         big="" if big is None else f"        allocate big: i32[512] ({big}, align 16):\n")
    return text if big is not None else text.replace("\n            ", "\n        ")


def test_kernel_text_helper_is_the_printed_kernel() -> None:
    assert format_function(scratch_kernel()) == kernel_text("unplanned", "unplanned")


def test_lower_allocations_host_policy_stack_and_platform() -> None:
    after = lower_allocations(module_of(scratch_kernel()), "host")
    assert format_function(after.funcs[0]) == kernel_text("stack", "platform")
    assert format_function(after.funcs[1]) == format_function(module_of(scratch_kernel()).funcs[1])  # entry untouched


MIXED = AllocationPolicy("mixed", stack_limit=128, large="workspace")  # small on the stack, large in the pool


def test_lower_allocations_micro_policy_stack_and_workspace() -> None:
    # micro: every scratch is a workspace (aot.pipeline.scratch returns what sits at the peak)
    after = lower_allocations(module_of(scratch_kernel()), "micro")
    assert format_function(after.funcs[0]) == kernel_text("workspace", "workspace")
    after = lower_allocations(module_of(scratch_kernel()), MIXED)
    assert format_function(after.funcs[0]) == kernel_text("stack", "workspace")


def test_lower_allocations_policy_limits_and_per_kernel_mapping() -> None:
    everything_on_stack = AllocationPolicy("big-stack", stack_limit=4096)
    after = lower_allocations(module_of(scratch_kernel()), everything_on_stack)
    assert format_function(after.funcs[0]) == kernel_text("stack", "stack")
    tiny = AllocationPolicy("tiny", stack_limit=32, large="workspace")
    after = lower_allocations(module_of(scratch_kernel()), {"k": tiny, "*": "host"})
    assert format_function(after.funcs[0]) == kernel_text("workspace", "workspace")


def test_lower_workspaces() -> None:
    before = lower_allocations(module_of(scratch_kernel(), calls=2), MIXED)
    assert format_module(before) == f"""\
module m (entry m_main)
pool sram: 0 bytes, align 16
input x: i32[4]
output y: i32[4]
unplanned mid0: i32[4]

{kernel_text("stack", "workspace")}

func m_main(x: i32[4], y: i32[4]):
    call k(x, mid0)
    return_on_error
    call k(mid0, y)
    return_on_error
"""
    after = lower_workspaces(before)
    verify_kernel_module(after)
    assert format_module(after) == f"""\
module m (entry m_main)
pool sram: 0 bytes, align 16
input x: i32[4]
output y: i32[4]
unplanned mid0: i32[4]
unplanned ws_1_big: i32[512] workspace
unplanned ws_2_big: i32[512] workspace

{kernel_text("stack", None, param=", big: i32[512] workspace")}

func m_main(x: i32[4], y: i32[4]):
    call k(x, mid0, ws_1_big)
    return_on_error
    call k(mid0, y, ws_2_big)
    return_on_error
"""
    assert format_module(lower_workspaces(after)) == format_module(after)  # idempotent


def test_workspace_parameter_is_the_buffer_the_body_uses() -> None:
    after = lower_workspaces(lower_allocations(module_of(scratch_kernel()), MIXED))
    k = after.funcs[0]
    big = k.params[-1]
    assert big.kind == "workspace"
    assert isinstance(k.body, K.Allocate) and isinstance(k.body.body, K.Seq)
    fill = k.body.body.body[0]
    assert isinstance(fill, K.For) and isinstance(fill.body, K.Store) and fill.body.buffer is big


# ----------------------------------------------------------------------------- the planner reads the kind
def test_planner_reads_the_kind_not_the_name() -> None:
    """Workspace arguments not named ws_*: the in-place pairing (the output is the last argument
    before the workspaces) and the report's kinds follow the buffers' kind."""
    a, o, w = K.Buffer("a", "i32", 4), K.Buffer("o", "i32", 4), K.Buffer("w", "i32", 8, kind="workspace")
    i = K.ScalarVar("i")
    add1 = K.PrimFunc("add1", (a, o, w), K.For(i, 4, K.Store(o, i, a[i] + 1)), inplace=(0,))
    x, y, t0, t1 = (K.Buffer(n, "i32", 4) for n in ("x", "y", "t0", "t1"))
    scratch0, scratch1 = (K.Buffer(n, "i32", 8, kind="workspace") for n in ("scratch0", "scratch1"))
    entry = K.PrimFunc("m_main", (x, y), K.Seq((
        K.CallKernel("add1", (x, t0, scratch0)), K.ReturnOnError(),
        K.CallKernel("add1", (t0, t1, scratch1)), K.ReturnOnError(),
        K.CallKernel("add1", (t1, y, scratch1)), K.ReturnOnError())))
    m = K.KernelModule("m", (add1, entry), (), (K.Pool("sram", 0),), "m_main", (x,), (y,),
                       (t0, scratch0, t1, scratch1))
    verify_kernel_module(m)
    assert inplace_pairs(m) == {"t1": "t0"}
    _, report = plan_memory(m, planner="greedy-size")
    assert {b.name: b.kind for b in report.buffers} == {"t0": "tensor", "scratch0": "workspace",
                                                        "scratch1": "workspace"}
