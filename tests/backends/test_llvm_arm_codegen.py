"""LLVM at parity: what the LLVM backend does for Arm objects so that its boards builds
come near gcc -O2's instruction counts. Small DSP multiply-accumulate loops are printed
unrolled (and still compute what the interpreter does), stack buffers never make the code
generator realign the stack (a reserved frame pointer), the machine-scheduler option is set
for Arm emissions only and restored, the objects of the shared models use the DSP / MVE
instructions the schedules rely on with no calls to helper functions, and their stack frames
are still reported (aot/llvm/stack.py)."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aot.kernel import ir as K  # noqa: E402
from aot.kernel.intrinsics import call as intrinsic  # noqa: E402
from aot.llvm import LLVMTarget  # noqa: E402
from aot.llvm.printer import MAC_UNROLL_TRIPS, print_module  # noqa: E402
from aot.runners.kernel_module import run_kernel_module  # noqa: E402

M4 = LLVMTarget("thumbv7em-none-eabihf", "cortex-m4", "+dsp,+vfp4d16sp,-fp64")


def _module(trips: int, nested: bool = False, align: int = 16) -> K.KernelModule:
    """k(a, b, o): o[0] = sum over kk < trips of smlad(a[kk], b[kk]) (a nested loop: twice), the
    products staged through a stack buffer of the given alignment."""
    a, b, o = K.Buffer("a", "i32", trips), K.Buffer("b", "i32", trips), K.Buffer("o", "i32", 1)
    acc, kk, r, j = K.ScalarVar("acc"), K.ScalarVar("kk"), K.ScalarVar("r"), K.ScalarVar("j")
    tmp = K.Buffer("tmp", "i32", trips)
    step = K.Assign(acc, intrinsic("smlad", tmp[kk], b[kk], acc))
    loop = K.For(kk, trips, K.For(r, 2, step) if nested else step)
    body = K.Allocate(tmp, K.Seq((K.For(j, trips, K.Store(tmp, j, a[j])), K.Let(acc, K.Const(0)), loop,
                                  K.Store(o, K.Const(0), acc))), "stack", align)
    kernel = K.PrimFunc("k", (a, b, o), body)
    ins, out = (K.Buffer("x", "i32", trips), K.Buffer("w", "i32", trips)), K.Buffer("y", "i32", 1)
    entry = K.PrimFunc("m_main", ins + (out,), K.Seq((K.CallKernel("k", ins + (out,)), K.ReturnOnError())))
    return K.KernelModule("m", (kernel, entry), (), (K.Pool("sram", 0),), "m_main", ins, (out,))


@pytest.mark.parametrize("trips,nested,unrolled", [(MAC_UNROLL_TRIPS, False, True),
                                                   (MAC_UNROLL_TRIPS + 1, False, False), (3, True, False)])
def test_small_mac_loops_are_printed_unrolled_and_exact(trips: int, nested: bool, unrolled: bool) -> None:
    m = _module(trips, nested)
    text = str(print_module(m, M4.triple, "", 32))
    assert ('"kk.cond"' not in text) == unrolled
    rng = np.random.default_rng(trips)
    a, b = (rng.integers(-2 ** 31, 2 ** 31, trips).astype(np.int32) for _ in range(2))
    want = run_kernel_module(m, [a, b], "interp")[0]
    np.testing.assert_array_equal(run_kernel_module(m, [a, b], "llvm")[0], want)


def test_stack_buffers_keep_the_abi_stack_alignment() -> None:
    """An alignment above the stack's (8 on AAPCS) would realign SP and reserve r7 as a frame pointer."""
    assert re.search(r"alloca i32, i32 4, align 8\b", str(print_module(_module(4, align=16), M4.triple, "", 32)))
    assert re.search(r"alloca i32, i32 4, align 16\b", str(print_module(_module(4, align=16), "", "", 64)))
    assert re.search(r"alloca i32, i32 4, align 4\b", str(print_module(_module(4, align=4), M4.triple, "", 32)))


def test_codegen_options_apply_to_arm_emission_only_and_are_restored() -> None:
    import llvmlite.binding as llvm

    from aot.llvm.jit import ARM_CODEGEN_OPTIONS, codegen_options, compile_ir, emit
    m = _module(MAC_UNROLL_TRIPS + 3, nested=True)
    ref, tm = compile_ir(m, M4)
    plain = tm.emit_object(ref)
    with codegen_options(M4):
        inside = tm.emit_object(ref)
    assert emit(tm, ref, M4) == inside != plain  # the schedule of this module differs without misched
    assert tm.emit_object(ref) == plain  # LLVM's defaults again
    for name, value, _ in ARM_CODEGEN_OPTIONS:  # the same object as with the options set by hand
        llvm.set_option("", f"-{name}={value}")
    try:
        assert tm.emit_object(ref) == inside
    finally:
        for name, _, default in ARM_CODEGEN_OPTIONS:
            llvm.set_option("", f"-{name}={default}")
    with codegen_options(None):  # the host JIT: nothing set
        assert tm.emit_object(ref) == plain


# ----------------------------------------------------------------------------- shared models
HELPERS_ALLOWED = {"memcpy", "memset", "aot_platform_allocate", "aot_platform_free"}
EXPECTED = {  # mnemonics (regex on GNU objdump's text) the kws_int8 object must contain per board
    "mps2-an386": [r"\ssmlad\s", r"\ssxtb16\s", r"\sssat\s"],
    "mps3-an547": [r"\svmlava\.s8\s", r"\svmullb\.s8\s", r"\svmullt\.s8\s", r"\svqrdmulh\.s32\s",
                   r"\svstrb\.32\s+q\d+, \[r\d+, q\d+\]"],  # the depthwise results: VSTRB.32 scatters
}


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
@pytest.mark.parametrize("board", list(EXPECTED))
def test_kws_object_uses_dsp_or_mve_instructions_and_reports_its_stack(board: str, tmp_path: Path) -> None:
    from aot.board.boards import load_board
    from aot.board.flow import _compile_for_board
    from aot.frontend.tflite import load_tflite
    from aot.llvm import emit_object
    from aot.llvm.stack import stack_info
    from conftest import shared_model
    path = shared_model("kws_int8.tflite")
    b = load_board(board)
    compiled = _compile_for_board(load_tflite(path.read_bytes(), "kws_int8"), b, {"source_bytes": path.stat().st_size})
    target = LLVMTarget(b.llvm_triple(), b.llvm_cpu(), b.llvm_features())
    obj = tmp_path / "model.o"
    obj.write_bytes(emit_object(compiled.module, target))
    arch = "-marmv8.1-m.main" if board == "mps3-an547" else "-marmv7e-m"
    text = subprocess.run([shutil.which("arm-none-eabi-objdump") or "arm-none-eabi-objdump", "-d", arch, str(obj)],
                          capture_output=True, text=True, check=True).stdout
    for pattern in EXPECTED[board]:
        assert re.search(pattern, text), pattern
    info = stack_info(compiled.module, target)
    callees = set().union(*info.calls.values())
    outside = {c for c in callees if c not in info.frames}
    assert outside <= HELPERS_ALLOWED, outside  # no __aeabi_* or libcalls for intrinsics
    if board == "mps3-an547":  # the Helium fills stay vector loops (no memset from loop idiom recognition)
        assert "memset" not in callees, callees
    assert not any(re.search(r"\bbl\s+[0-9a-f]+ <(__aeabi|aot_)", line) for line in text.splitlines())
    # the frames: every function the object defines, one of them holding the largest stack buffer
    defined = set(re.findall(r"^[0-9a-f]+ <([\w.]+)>:$", text, re.M))
    assert defined and defined <= set(info.frames), defined - set(info.frames)
    stack_bytes = [s.buffer.nbytes for f in compiled.module.funcs for s in _allocations(f.body) if s.kind == "stack"]
    assert max(info.frames.values()) >= max(stack_bytes, default=1) > 0


def _allocations(s: K.Stmt) -> list[K.Allocate]:
    out = [s] if isinstance(s, K.Allocate) else []
    for child in (getattr(s, "body", None), getattr(s, "then", None), getattr(s, "orelse", None)):
        if isinstance(child, K.Stmt):
            out += _allocations(child)
    if isinstance(s, K.Seq):
        for x in s.body:
            out += _allocations(x)
    return out


# ----------------------------------------------------------------------------- second pass
M33 = LLVMTarget("thumbv8m.main-none-eabihf", "cortex-m33", "+dsp,+fp-armv8d16sp,-fp64")


def _word_mac_module(trips: int = 8) -> K.KernelModule:
    """k(x, w, o): o[4i + j] = requant_mm(2 * smlad(sxtb16(word x[4i]), sxtb16(pair w[i] >> 16j), 0),
    M, H, 8) for i < trips, j < 4: a LoadWord, a 64-bit weight load and four SMMLAR requantizations
    with the same constants a loop iteration (as a blocked GEMM's output block)."""
    x, w, o = K.Buffer("x", "i8", 4 * trips), K.Buffer("w", "i64", trips), K.Buffer("o", "i32", 4 * trips)
    i = K.ScalarVar("i")
    xv = intrinsic("sxtb16", K.LoadWord(x, K.Binary("*", i, K.Const(4))))
    stores = []
    for j in range(4):
        wv = K.Cast("i32", K.Binary(">>", w[i], K.Const(16 * j, "i64")))
        acc = intrinsic("smlad", xv, intrinsic("sxtb16", wv), K.Const(0))
        y2 = K.Binary("+", acc, acc)
        stores.append(K.Store(o, K.Binary("+", K.Binary("*", i, K.Const(4)), K.Const(j)),
                              intrinsic("requant_mm", y2, K.Const(1638001719), K.Const(-32640), K.Const(8))))
    body = K.For(i, trips, K.Seq(tuple(stores)))
    kernel = K.PrimFunc("k", (x, w, o), body)
    ins, out = (K.Buffer("xi", "i8", 4 * trips), K.Buffer("wi", "i64", trips)), K.Buffer("y", "i32", 4 * trips)
    entry = K.PrimFunc("m_main", ins + (out,), K.Seq((K.CallKernel("k", ins + (out,)), K.ReturnOnError())))
    return K.KernelModule("m", (kernel, entry), (), (K.Pool("sram", 0),), "m_main", ins, (out,))


def test_dsp_intrinsics_native_where_the_features_say_dsp() -> None:
    from aot.llvm.intrinsics import dsp_native
    assert dsp_native("thumbv7em-none-eabihf") and dsp_native("thumbv8.1m.main-none-eabihf", "+mve")
    assert dsp_native(M33.triple, M33.features)  # Cortex-M33 with DSP (mps2-an505): SMLAD, not IR
    assert not dsp_native(M33.triple, "-dsp,+fp-armv8d16sp") and not dsp_native("thumbv7m-none-eabi", "-dsp")
    assert not dsp_native("x86_64-unknown-linux-gnu")
    assert "llvm.arm.smlad" in str(print_module(_word_mac_module(), M33.triple, "", 32, M33.features))
    assert "llvm.arm.smlad" not in str(print_module(_word_mac_module(), M33.triple, "", 32, "-dsp"))


def test_arm_word_and_pair_loads_are_volatile_and_exact() -> None:
    """Never clustered ahead of their uses on Arm (aot.llvm.volatile); plain loads on the host."""
    m = _word_mac_module()
    arm = str(print_module(m, M4.triple, "", 32, M4.features))
    assert re.search(r"load volatile i32, ptr .*, align 1", arm) and re.search(r"load volatile i64", arm)
    assert "volatile" not in str(print_module(m, "", "", 64))
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, 32).astype(np.int8)
    w = rng.integers(-2 ** 63, 2 ** 63, 8, dtype=np.int64)
    np.testing.assert_array_equal(run_kernel_module(m, [x, w], "llvm")[0], run_kernel_module(m, [x, w], "interp")[0])


@pytest.mark.usefixtures("arm_toolchain")
def test_requant_mm_selects_smmlar_in_loops(tmp_path: Path) -> None:
    """Constant hoisting off (ARM_CODEGEN_OPTIONS): the multiplier and h:2^31 stay constants at the
    instruction selector, which then matches SMMLAR (with it on: UMULL + MLA + ADDS + SBC)."""
    from aot.llvm import emit_object
    obj = tmp_path / "m.o"
    obj.write_bytes(emit_object(_word_mac_module(), M4))
    text = subprocess.run([shutil.which("arm-none-eabi-objdump") or "arm-none-eabi-objdump", "-d", "-marmv7e-m",
                           str(obj)], capture_output=True, text=True, check=True).stdout
    assert re.search(r"\ssmmlar\s", text) and not re.search(r"\sumull\s", text)


def test_stack_column_loads_of_unrolled_mac_blocks_are_volatile() -> None:
    """Not hoisted out of the enclosing loops (LICM) into spill slots; a loop that stays a loop keeps
    plain loads (LDRD pairs), and the host JIT never sees a volatile load."""
    unrolled = str(print_module(_module(MAC_UNROLL_TRIPS), M4.triple, "", 32, M4.features))
    looped = str(print_module(_module(MAC_UNROLL_TRIPS + 1), M4.triple, "", 32, M4.features))
    # tmp[kk] and the parameter's b[kk] (RAM words: a pool column as well as a stack one), one each per
    # unrolled iteration
    assert unrolled.count("load volatile i32") == 2 * MAC_UNROLL_TRIPS
    assert "load volatile" not in looped
    assert "load volatile" not in str(print_module(_module(MAC_UNROLL_TRIPS), "", "", 64))


def _pairs_module(n: int) -> K.KernelModule:
    """k(a, w, o): o[0] = sum over i < n of smlatb(a[2i], w[i]) + smlabt(a[2i + 1], w[i]), the two
    words read by adjacent Lets (as the depthwise pair schedule reads its line buffer)."""
    a, w, o = K.Buffer("a", "i32", 2 * n), K.Buffer("w", "i32", n), K.Buffer("o", "i32", 1)
    acc, i, x0, x1 = K.ScalarVar("acc"), K.ScalarVar("i"), K.ScalarVar("x0"), K.ScalarVar("x1")
    body = K.Seq((K.Let(x0, K.Load(a, i * 2)), K.Let(x1, K.Load(a, i * 2 + 1)),
                  K.Assign(acc, intrinsic("smlatb", x0, w[i], acc)), K.Assign(acc, intrinsic("smlabt", x1, w[i], acc))))
    kernel = K.PrimFunc("k", (a, w, o), K.Seq((K.Let(acc, K.Const(0)), K.For(i, n, body), K.Store(o, K.Const(0), acc))))
    ins, out = (K.Buffer("x", "i32", 2 * n), K.Buffer("v", "i32", n)), K.Buffer("y", "i32", 1)
    entry = K.PrimFunc("m_main", ins + (out,), K.Seq((K.CallKernel("k", ins + (out,)), K.ReturnOnError())))
    return K.KernelModule("m", (kernel, entry), (), (K.Pool("sram", 0),), "m_main", ins, (out,))


def test_pair_schedule_words_are_one_volatile_ldrd() -> None:
    """In a loop body around SMLATB / SMLABT (the depthwise pair schedule), two adjacent words read
    by consecutive Lets are one volatile 64-bit load (LDRD, never clustered ahead of their uses),
    a single word (w[i], twice) a volatile 32-bit one; the host JIT sees plain loads; results exact."""
    m = _pairs_module(8)
    text = str(print_module(m, M4.triple, "", 32, M4.features))
    assert text.count("load volatile i64") == 1 and text.count("load volatile i32") == 2
    assert "load volatile" not in str(print_module(m, "", "", 64))
    rng = np.random.default_rng(3)
    a, w = rng.integers(-2 ** 31, 2 ** 31, 16).astype(np.int32), rng.integers(-2 ** 31, 2 ** 31, 8).astype(np.int32)
    want = run_kernel_module(m, [a, w], "interp")[0]
    np.testing.assert_array_equal(run_kernel_module(m, [a, w], "llvm")[0], want)


def _straight_module(steps: int) -> K.KernelModule:
    """k(col, w, bias, o): per block ob (a loop the printer keeps), two pixels x four channels of
    accumulators started at the bias, `steps` reduction steps in one straight block (a column pair
    and four weight words a step, eight SMLADs), stored: a blocked GEMM's channel block with its
    reduction unrolled."""
    nsl, size, blocks = 2, 4, MAC_UNROLL_TRIPS + 1
    col, w = K.Buffer("col", "i32", steps * nsl), K.Buffer("w", "i32", blocks * steps * size)
    bias, o = K.Buffer("bias", "i32", blocks * size), K.Buffer("o", "i32", blocks * size * nsl)
    ob, wb = K.ScalarVar("ob"), K.ScalarVar("wb")
    accs = [[K.ScalarVar(f"acc{s}_{c}") for c in range(size)] for s in range(nsl)]
    st: list[K.Stmt] = [K.Let(wb, ob * (steps * size))]
    for c in range(size):
        b = K.ScalarVar(f"b{c}")
        st += [K.Let(b, bias[ob * size + c])] + [K.Let(accs[s][c], b) for s in range(nsl)]
    for j in range(steps):
        xs = [K.ScalarVar(f"x{j}_{s}") for s in range(nsl)]
        st += [K.Let(x, col[K.Const(j * nsl + s)]) for s, x in enumerate(xs)]
        for c in range(size):
            wv = K.ScalarVar(f"w{j}_{c}")
            st.append(K.Let(wv, w[wb + (j * size + c)]))
            st += [K.Assign(accs[s][c], intrinsic("smlad", xs[s], wv, accs[s][c])) for s in range(nsl)]
    st += [K.Store(o, ob * (size * nsl) + (c * nsl + s), accs[s][c]) for c in range(size) for s in range(nsl)]
    kernel = K.PrimFunc("k", (col, w, bias, o), K.For(ob, blocks, K.Seq(tuple(st))))
    ins = (K.Buffer("ci", "i32", col.size), K.Buffer("wi", "i32", w.size), K.Buffer("bi", "i32", bias.size))
    out = K.Buffer("y", "i32", o.size)
    entry = K.PrimFunc("m_main", ins + (out,), K.Seq((K.CallKernel("k", ins + (out,)), K.ReturnOnError())))
    return K.KernelModule("m", (kernel, entry), (), (K.Pool("sram", 0),), "m_main", ins, (out,))


def test_straight_mac_blocks_load_their_words_volatile_and_paired() -> None:
    """A loop body without inner loops and at least STRAIGHT_MACS SMLADs: each step's column pair is
    one volatile 64-bit load and the weights volatile words (never clustered across steps); a smaller
    body keeps plain loads, and so does the host; results exact."""
    from aot.llvm.printer import STRAIGHT_MACS
    steps = STRAIGHT_MACS // 8
    text = str(print_module(_straight_module(steps), M4.triple, "", 32, M4.features))
    assert text.count("load volatile i64") == steps  # the column pairs
    assert text.count("load volatile i32") == 4 * steps + 4  # the weights and the biases
    assert "load volatile" not in str(print_module(_straight_module(steps - 1), M4.triple, "", 32, M4.features))
    m = _straight_module(steps)
    assert "load volatile" not in str(print_module(m, "", "", 64))
    rng = np.random.default_rng(5)
    args = [rng.integers(-2 ** 31, 2 ** 31, b.size).astype(np.int32) for b in m.inputs]
    np.testing.assert_array_equal(run_kernel_module(m, args, "llvm")[0], run_kernel_module(m, args, "interp")[0])


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_kws_pointwise_block_keeps_its_accumulators_in_registers(tmp_path: Path) -> None:
    """kws_int8's pointwise kernel on mps2-an386 (2 pixels x 4 channels, 32 SMLAD steps in one
    straight block: every register in use, as gcc -O2 allocates it): with clustered plain loads the
    greedy allocator spilled accumulators, 122 stack accesses in the kernel (gcc -O2: 52); with the
    straight block's volatile loads (STRAIGHT_MACS) 46. Checked: the function with the most SMLADs
    has at most one stack access per four of them among the kernels the entry calls more than once
    (the pointwise layers share one kernel; a kernel called once is inlined into the entry)."""
    from aot.board.boards import load_board
    from aot.board.flow import _compile_for_board
    from aot.frontend.tflite import load_tflite
    from aot.llvm import emit_object
    from conftest import shared_model
    path = shared_model("kws_int8.tflite")
    b = load_board("mps2-an386")
    compiled = _compile_for_board(load_tflite(path.read_bytes(), "kws_int8"), b, {"source_bytes": path.stat().st_size})
    obj = tmp_path / "model.o"
    obj.write_bytes(emit_object(compiled.module, LLVMTarget(b.llvm_triple(), b.llvm_cpu(), b.llvm_features())))
    text = subprocess.run([shutil.which("arm-none-eabi-objdump") or "arm-none-eabi-objdump", "-d", "-marmv7e-m",
                           str(obj)], capture_output=True, text=True, check=True).stdout
    entry = next(f for f in compiled.module.funcs if f.name == compiled.module.entry)
    calls = _callees(entry.body)
    shared = {c for c in calls if calls.count(c) > 1}
    names = re.findall(r"^[0-9a-f]+ <([\w.]+)>:$", text, flags=re.M)
    bodies = dict(zip(names, re.split(r"^[0-9a-f]+ <[\w.]+>:$", text, flags=re.M)[1:]))
    smlads, stack = max((len(re.findall(r"\tsmlad\t", bodies[n])), len(re.findall(r"\[sp\b", bodies[n])))
                        for n in shared)
    assert smlads >= 256 and stack <= smlads // 4, (smlads, stack)


def _callees(s: K.Stmt) -> list[str]:
    """The kernels an executor body calls, once per call."""
    if isinstance(s, K.CallKernel):
        return [s.callee]
    subs = list(s.body) if isinstance(s, K.Seq) else [getattr(s, f, None) for f in ("body", "then", "orelse")]
    return [c for x in subs if isinstance(x, K.Stmt) for c in _callees(x)]
