"""The lohi 2-pixel (and lone-pixel) x 4-channel step as one multi-result intrinsic (K.MultiAssign
of smlad_lohi_2x4 / _1x4, aot.kernel.intrinsics_multi): its semantics against the single products it
replaces, the verifier's rules for it, its expansion into plain IR (the LLVM backend's form), and
int8 convolutions using it bit-exact with the numpy reference on the kernel interpreter, host C
(the portable macro), the LLVM JIT and, slow, Cortex-M4 C/LLVM in QEMU; the generated C compiles
for Cortex-M4 at -O0 (portable macro) and -O2 (inline asm) under -Wall -Wextra -Werror."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import aot  # noqa: E402
from aot.errors import VerifyError  # noqa: E402
from aot.kernel import ir as K  # noqa: E402
from aot.kernel.interp import run_interpreted  # noqa: E402
from aot.kernel.intrinsics import INTRINSICS, call, multi, smlad, sxtb16  # noqa: E402
from aot.kernel.verify import verify_kernel_module  # noqa: E402
from aot.pipeline.driver import CompileOptions, compile_model  # noqa: E402
from multi_check import check_expansion_and_backends, check_backends, cortex_m4_disassembly, nodes  # noqa: E402,E501
from test_schedules import _input, conv_chain  # noqa: E402
from conftest import daily_half  # noqa: E402


CHAINS = {
    # 1x1 over 64 and 128 channels (32 / 64 reduction steps: loops of 16 asm steps), an odd pixel
    # count (a tail pixel alone) and channel tails (7 = 4 + 2 + 1, 6 = 4 + 2)
    "pw64-pw128": ((1, 3, 3, 64), [dict(kind="conv", oc=128, k=(1, 1)),
                                   dict(kind="conv", oc=7, k=(1, 1), act="none")]),
    # 3x3 stride 1 (the union column) and stride 2 (the interleaved one), 20 channels, batch 2
    "3x3-batch": ((2, 6, 6, 20), [dict(kind="conv", oc=12, k=(3, 3)),
                                  dict(kind="conv", oc=6, k=(3, 3), s=(2, 2), act="none")]),
    # one reduction step short of a word (a padded pair), an odd depth
    "odd-depth": ((1, 4, 5, 10), [dict(kind="conv", oc=9, k=(1, 1)),
                                  dict(kind="conv", oc=5, k=(3, 3), pad="valid", act="none")]),
}




def _multi_steps(cm, name: str | None = None) -> int:  # noqa: ANN001
    return sum(isinstance(n, K.MultiAssign) and n.value.name == (name or n.value.name)
               for f in cm.module.funcs for n in nodes(f.body))


def _compile(chain: str, seed: int = 5):  # noqa: ANN202
    x_shape, ops = CHAINS[chain]
    model = conv_chain(seed, x_shape, ops)
    # flash budget 0: int8 (lohi) weights, never pre-widened
    return model, compile_model(model, CompileOptions(cpu="cortex-m4", policy="micro", flash_budget=0))


# ----------------------------------------------------------------------------- the intrinsic
def test_semantics_equal_the_single_products() -> None:
    rng = np.random.default_rng(1)
    d = INTRINSICS["smlad_lohi_2x4"]
    assert d.results == 8 and d.arg_dtypes[8:] == ("&i32", "#i32", "&i32", "#i32")
    for _ in range(200):
        col = rng.integers(-2 ** 31, 2 ** 31, 6, dtype=np.int64).astype(np.int32)
        w = rng.integers(-2 ** 31, 2 ** 31, 5, dtype=np.int64).astype(np.int32)
        acc = [int(v) for v in rng.integers(-2 ** 31, 2 ** 31, 8, dtype=np.int64)]
        co, wo = int(rng.integers(0, 5)), int(rng.integers(0, 4))
        got = d.py(*acc, (col, 1), co - 1, (w, 0), wo)
        x0, x1, w0, w1 = int(col[co]), int(col[co + 1]), int(w[wo]), int(w[wo + 1])
        want = (smlad(x0, sxtb16(w0), acc[0]), smlad(x0, w0, acc[1]), smlad(x0, sxtb16(w1), acc[2]),
                smlad(x0, w1, acc[3]), smlad(x1, sxtb16(w0), acc[4]), smlad(x1, w0, acc[5]),
                smlad(x1, sxtb16(w1), acc[6]), smlad(x1, w1, acc[7]))
        assert got == want
        one = INTRINSICS["smlad_lohi_1x4"].py(*acc[:4], (col, 1), co - 1, (w, 0), wo)
        assert one == want[:4]


def _kernel(body_of) -> tuple[K.KernelModule, K.Buffer]:  # noqa: ANN001
    """A module whose one kernel reads col (i32[6]) and w (i32[4]) and writes out (i32[8])."""
    col, w, out = K.Buffer("col", "i32", 6), K.Buffer("w", "i32", 4), K.Buffer("out", "i32", 8)
    fn = K.PrimFunc("k", (col, w, out), body_of(col, w, out))
    entry = K.PrimFunc("t_main", (col, w, out), K.seq(K.CallKernel("k", (col, w, out)), K.ReturnOnError()))
    return K.KernelModule("t", (fn, entry), (), (K.Pool("sram", 16),), "t_main", (col, w), (out,)), out


def _accs(n: int = 8) -> list[K.ScalarVar]:
    return [K.ScalarVar(f"a{i}") for i in range(n)]


def _step_body(targets_of, imm: K.Expr = K.Const(1), name: str = "smlad_lohi_2x4"):  # noqa: ANN001, ANN202
    def body(col: K.Buffer, w: K.Buffer, out: K.Buffer) -> K.Stmt:
        acc = _accs(INTRINSICS[name].results)
        lets = [K.Let(v, K.Const(1000 * i - 3000)) for i, v in enumerate(acc)]
        targets = targets_of(acc)
        step = K.MultiAssign(tuple(targets), call(name, *acc, K.Load(col, K.Const(2)), imm,
                                                  K.Load(w, K.Const(0)), K.Const(2)))  # type: ignore[arg-type]
        return K.seq(*lets, step, *[K.Store(out, K.Const(i), v) for i, v in enumerate(targets)])
    return body


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(4)
    col = rng.integers(-2 ** 31, 2 ** 31, 6, dtype=np.int64).astype(np.int32)
    w = rng.integers(-2 ** 31, 2 ** 31, 4, dtype=np.int64).astype(np.int32)
    return col, w


@pytest.mark.parametrize("name", ["smlad_lohi_2x4", "smlad_lohi_1x4"])
@pytest.mark.parametrize("targets", ["in-place", "rotated"])
def test_interp_expansion_c_and_llvm_agree(targets: str, name: str) -> None:
    """In place (the schedule's form) and with every target another accumulator (all arguments
    are read first): the interpreter, the expanded plain IR, host C and the LLVM JIT agree."""
    rot = (lambda a: a) if targets == "in-place" else (lambda a: a[1:] + a[:1])
    module, _ = _kernel(_step_body(rot, name=name))
    verify_kernel_module(module)
    col, w = _data()
    want = run_interpreted(module, [col, w])[0]
    n = INTRINSICS[name].results
    spec = INTRINSICS[name].py(*[1000 * i - 3000 for i in range(n)], (col, 2), 1, (w, 0), 2)
    assert [int(v) for v in want[:n]] == list(spec)  # out[i]: target i, result i
    check_expansion_and_backends(module, [col, w], want)


def test_verifier_rules() -> None:
    bad_imm, _ = _kernel(_step_body(lambda a: a, imm=K.Const(0) + K.Const(1)))
    with pytest.raises(VerifyError, match="immediate"):
        verify_kernel_module(bad_imm)
    too_few, _ = _kernel(_step_body(lambda a: a[:7]))
    with pytest.raises(VerifyError, match="8 results"):
        verify_kernel_module(too_few)

    def as_expr(col: K.Buffer, w: K.Buffer, out: K.Buffer) -> K.Stmt:
        acc = _accs()
        v = call("smlad_lohi_2x4", *acc, K.Load(col, K.Const(0)), 0, K.Load(w, K.Const(0)), 0)
        return K.seq(*[K.Let(a, K.Const(0)) for a in acc], K.Store(out, K.Const(0), v))
    expr_use, _ = _kernel(as_expr)
    with pytest.raises(VerifyError, match="only a MultiAssign"):
        verify_kernel_module(expr_use)

    def undeclared(col: K.Buffer, w: K.Buffer, out: K.Buffer) -> K.Stmt:
        acc = _accs()
        return multi(acc, "smlad_lohi_2x4", *acc, K.Load(col, K.Const(0)), 0, K.Load(w, K.Const(0)), 0)
    with pytest.raises(VerifyError, match="rule 2"):
        verify_kernel_module(_kernel(undeclared)[0])
    with pytest.raises(TypeError, match="8 results"):
        multi(_accs(7), "smlad_lohi_2x4", *_accs(), K.Load(K.Buffer("c", "i32", 2), K.Const(0)), 0,
              K.Load(K.Buffer("w", "i32", 2), K.Const(0)), 0)


# ----------------------------------------------------------------------------- in the schedule
def test_schedule_uses_one_step_per_reduction_pair() -> None:
    """Every 4-channel lohi block of two pixels or of the lone last pixel: 64 input channels are 32
    steps (two loops of 16); the channel tails (2, 1 channels) keep the single products; no flash
    budget (pre-widened weights) or no DSP means no lohi step."""
    _, cm = _compile("pw64-pw128")
    # two pixels: each layer's 4-channel blocks one asm loop of 16 steps per iteration (32 and 64 steps:
    # 2 and 4 iterations; the ReLU layer's with its requantization, lohi_2x4_x16q); the ninth pixel
    # alone: 16 single steps per layer
    assert (_multi_steps(cm, "smlad_lohi_2x4"), _multi_steps(cm, "smlad_lohi_1x4"),
            _multi_steps(cm, "lohi_2x4_x16"), _multi_steps(cm, "lohi_2x4_x16q")) == (0, 32, 1, 1)
    loops = [n.value.args[4].value for f in cm.module.funcs for n in nodes(f.body)
             if isinstance(n, K.MultiAssign) and n.value.name in ("lohi_2x4_x16", "lohi_2x4_x16q")]
    assert sorted(loops) == [2, 4]
    x_shape, ops = CHAINS["pw64-pw128"]
    widened = compile_model(conv_chain(5, x_shape, ops), CompileOptions(cpu="cortex-m4", policy="micro"))
    assert _multi_steps(widened) == 0
    m0 = compile_model(conv_chain(5, x_shape, ops), CompileOptions(cpu="cortex-m0plus", policy="micro"))
    assert _multi_steps(m0) == 0


@pytest.mark.parametrize("chain", list(CHAINS))
def test_bit_exact_on_interp_and_host_c(chain: str) -> None:
    model, cm = _compile(chain)
    assert _multi_steps(cm) > 0
    inputs = _input(model, 3)
    ref = aot.reference(model, inputs)["y"]
    check_backends(cm.module, inputs["x"], ref, chain)


@pytest.mark.slow  # an LLVM JIT per case
@pytest.mark.parametrize("chain", daily_half(list(CHAINS), "lohi_asm"))  # half a day, rotating
def test_bit_exact_on_llvm(chain: str) -> None:
    model, cm = _compile(chain)
    inputs = _input(model, 3)
    ref = aot.reference(model, inputs)["y"]
    check_backends(cm.module, inputs["x"], ref, chain, ("llvm",))


@pytest.mark.usefixtures("arm_toolchain")
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_c_compiles_for_cortex_m4(tmp_path: Path, opt: str) -> None:
    """-O2: the inline asm (LDRD with an immediate offset feeding the SMLADs); -O0 (too few
    registers for its operands): the portable macro; both warning-free."""
    _, cm = _compile("pw64-pw128")
    dis = cortex_m4_disassembly(cm, tmp_path, opt)
    asm_steps = dis.count("ldrd") >= 2 * 32 and "smlad" in dis
    assert asm_steps == (opt == "-O2"), opt


@pytest.mark.usefixtures("arm_toolchain")
@pytest.mark.parametrize("icache,steps", [(None, 16), (1024, 8)])
def test_cycles_form_loads_single_words(tmp_path: Path, icache: int | None, steps: int) -> None:
    """AOT_OPTIMIZE_CYCLES (--optimize cycles on a Cortex-M4 board): the loop of 16 steps (8 where
    AOT_ICACHE_BYTES says the instruction cache is small) loads each step's four words by four single
    LDRs into r0-r3 (they pipeline: 5 cycles where two LDRDs take 6), not LDRD, the first step's
    post-indexed (the pointers' advance), the others at negative offsets; the biases by eight LDRs,
    not LDRDs."""
    import re
    _, cm = _compile("pw64-pw128")
    plain = cortex_m4_disassembly(cm, tmp_path, "-O2")
    defines = ("AOT_OPTIMIZE_CYCLES=1",) + ((f"AOT_ICACHE_BYTES={icache}",) if icache else ())
    fast = cortex_m4_disassembly(cm, tmp_path, "-O2", defines)
    neg = re.compile(r"ldr(?:\.w)?\s+r[0-3], \[r[0-7], #-\d+\]")
    post = re.compile(rf"ldr(?:\.w)?\s+r[0-3], \[r[0-7]\], #{4 * 2 * steps}\b")
    assert plain.count("sxtb16") // 2 >= 32  # two SXTB16 per step
    loops = len(post.findall(fast)) // 2  # one post-indexed load per pointer and loop
    # the second layer's loop (the first one's, with its requantization: tests/ops/test_schedules_lohi_q.py)
    assert loops == _multi_steps(cm, "lohi_2x4_x16") == 1 and not post.findall(plain)
    assert len(neg.findall(fast)) == 4 * (steps - 1) * loops > len(neg.findall(plain))  # steps 2 on
    assert fast.count("ldrd") < plain.count("ldrd") - 32


@pytest.mark.slow  # QEMU
@pytest.mark.usefixtures("arm_toolchain")
def test_cycles_form_bit_exact_in_qemu() -> None:
    from aot.board.flow import run_on_board
    model = conv_chain(8, (1, 5, 5, 64), [dict(kind="conv", oc=64, k=(1, 1)),
                                          dict(kind="conv", oc=6, k=(1, 1), act="none")])
    inputs = _input(model, 8)
    outs, extra = run_on_board(model, inputs, "mps2-an386", flash_budget=0, optimize="cycles")
    np.testing.assert_array_equal(outs["y"], aot.reference(model, inputs)["y"])
    assert extra["match_host"] is True


@pytest.mark.slow  # QEMU
@pytest.mark.usefixtures("arm_toolchain")
@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_bit_exact_in_qemu(backend: str) -> None:
    from aot.board.flow import run_on_board
    model = conv_chain(8, (1, 4, 4, 64), [dict(kind="conv", oc=64, k=(1, 1)),
                                          dict(kind="conv", oc=6, k=(3, 3), act="none")])
    inputs = _input(model, 8)
    outs, extra = run_on_board(model, inputs, "mps2-an386", backend=backend, flash_budget=0)
    np.testing.assert_array_equal(outs["y"], aot.reference(model, inputs)["y"])
    assert extra["match_host"] is True


# ----------------------------------------------------------------------------- pre-widened, one shift
# The pre-widened (flash budget) form of the same products: with a ReLU-like clamp and per-channel
# shifts, each channel's weights and bias are scaled by a power of two at compile time so that one
# shift serves all channels (Requant.use_uniform: requant_mma, the shift an immediate of the SSAT);
# MobileNet's 64 -> 64 layer at 12x12 in small, and 3x3 layers (the union column of stride 1 keeps
# SMMLAR: with SMMLA gcc spilled in ResNet-8's 16 -> 16 loop).
WIDENED = {
    "pw64-relu6": ((1, 3, 5, 64), [dict(kind="conv", oc=64, k=(1, 1), act="relu6"),
                                   dict(kind="conv", oc=7, k=(1, 1), act="none")]),
    "3x3-relu-tails": ((2, 5, 6, 12), [dict(kind="conv", oc=14, k=(3, 3)),
                                       dict(kind="conv", oc=9, k=(3, 3), s=(2, 2), act="relu6")]),
}


def _widened(chain: str, seed: int = 11):  # noqa: ANN202
    x_shape, ops = WIDENED[chain]
    model = conv_chain(seed, x_shape, ops)
    return model, compile_model(model, CompileOptions(cpu="cortex-m4", policy="micro", flash_budget=None))


def _kernels_c(cm) -> list[str]:  # noqa: ANN001
    from codegen_c.printer import CPrinter
    return [CPrinter().function(f) for f in cm.module.funcs if f.name != cm.module.entry]


def test_widened_products_share_one_shift() -> None:
    """The ReLU layers' pre-widened kernels requantize with requant_mma (no per-channel shift), the
    one without a clamp keeps requant_mm; no lohi step (the weights are pairs)."""
    model, cm = _widened("pw64-relu6")
    assert any(c.buffer.name.endswith("wpairs") for c in cm.module.consts) and _multi_steps(cm) == 0
    first, last = _kernels_c(cm)
    assert "aot_requant_mma(" in first and "aot_requant_mm_nn(" not in first
    assert "aot_requant_mma(" not in last
    # 3x3 stride 1 (the union column of two neighbours) keeps SMMLAR; stride 2 takes the one shift
    union, strided = _kernels_c(_widened("3x3-relu-tails")[1])
    assert "aot_requant_mm_nn(" in union and "aot_requant_mma(" not in union
    assert "aot_requant_mma(" in strided and "aot_requant_mm_nn(" not in strided


@pytest.mark.parametrize("chain", list(WIDENED))
def test_widened_bit_exact_on_interp_and_host_c(chain: str) -> None:
    model, cm = _widened(chain)
    for seed in (3, 4):
        inputs = _input(model, seed)
        if seed == 4:  # extremes: every product at its bound
            inputs = {k: np.full_like(v, -128) for k, v in inputs.items()}
        ref = aot.reference(model, inputs)["y"]
        check_backends(cm.module, inputs["x"], ref, f"{chain} / {seed}")


@pytest.mark.slow  # an LLVM JIT per case
@pytest.mark.parametrize("chain", list(WIDENED))
def test_widened_bit_exact_on_llvm(chain: str) -> None:
    model, cm = _widened(chain)
    inputs = _input(model, 3)
    ref = aot.reference(model, inputs)["y"]
    check_backends(cm.module, inputs["x"], ref, chain, ("llvm",))


@pytest.mark.slow  # QEMU
@pytest.mark.usefixtures("arm_toolchain")
def test_widened_bit_exact_in_qemu() -> None:
    """The board's default flash policy pre-widens these layers (one shift, SMMLA in inline asm)."""
    from aot.board.flow import run_on_board
    model = conv_chain(9, (1, 4, 6, 64), [dict(kind="conv", oc=64, k=(1, 1), act="relu6"),
                                          dict(kind="conv", oc=6, k=(3, 3), act="none")])
    inputs = _input(model, 9)
    outs, extra = run_on_board(model, inputs, "mps2-an386", backend="c")
    np.testing.assert_array_equal(outs["y"], aot.reference(model, inputs)["y"])
    assert extra["match_host"] is True
