"""`aot profile` (aot/tools/profile.py): per-layer QEMU instructions from one
instrumented run; the per-layer sum plus the entry's own instructions equals the whole-model
count of that run; layers line up with TFLite Micro's per-operator anchors."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ops"))

from aot.errors import Error  # noqa: E402
from aot.tools.profile import (Layer, Profile, compare_anchors, format_profile, layer_ticks,  # noqa: E402
                               parse_events)

ANCHORS = Path(__file__).resolve().parents[3] / "shared" / "anchors.json"


def _events(spec: list[tuple[str, str, int]]) -> list[tuple[str, str, int]]:
    """Events with a down-counting 24-bit timer: spec gives elapsed ticks since the previous event."""
    t, out = 5000, []
    for name, kind, dt in spec:
        t = (t - dt) & 0xFFFFFF
        out.append((name, kind, t))
    return out


def test_layer_ticks_sum_with_the_entry_own_to_the_total() -> None:
    ev = _events([("run", "enter", 0), ("main", "enter", 3), ("k0", "enter", 7), ("k0", "exit", 100),
                  ("k1", "enter", 2), ("helper", "enter", 5), ("helper", "exit", 40), ("k1", "exit", 9),
                  ("k0", "enter", 4), ("k0", "exit", 6000), ("main", "exit", 1), ("run", "exit", 2)])
    layers, own, total = layer_ticks(ev, "main")
    assert layers == [("k0", 100), ("k1", 54), ("k0", 6000)]  # a nested call belongs to its caller
    assert own == 7 + 2 + 4 + 1
    assert sum(t for _, t in layers) + own == total == 6168


def test_layer_ticks_across_a_counter_wrap_and_errors() -> None:
    ev = [("main", "enter", 10), ("k", "enter", 5), ("k", "exit", 0xFFFFF0), ("main", "exit", 0xFFFFE0)]
    layers, own, total = layer_ticks(ev, "main")
    assert layers == [("k", 21)] and own == 5 + 16 and total == 42
    with pytest.raises(Error, match="no events"):
        layer_ticks(ev, "other")
    with pytest.raises(Error, match="never returned"):
        layer_ticks(ev[:3], "main")


def test_parse_events_maps_addresses_to_functions() -> None:
    out = "AOT_STATUS 0\nAOT_PROF 00001235 00fffff0\nAOT_PROF 00001234 00ffff00\nAOT_EXIT 0\n"
    assert parse_events(out, {0x1234: "model_main"}) == [("model_main", "exit", 0xFFFFF0),
                                                         ("model_main", "enter", 0xFFFF00)]
    with pytest.raises(Error, match="overflowed"):
        parse_events(out + "AOT_PROF_LOST 00000003 00000000\n", {})


def test_compare_lines_layers_up_with_tflm_operators() -> None:
    anchors = json.loads(ANCHORS.read_text())
    ops = ["conv2d", "depthwise_conv2d", "conv2d", "depthwise_conv2d", "conv2d", "depthwise_conv2d", "conv2d",
           "depthwise_conv2d", "conv2d", "avg_pool2d", "fully_connected", "softmax"]
    layers = [Layer(f"k{i}", op, 1000, 10) for i, op in enumerate(ops)]
    prof = Profile("kws_int8", "mps2-an386", layers, 10, 12010, 0, None, 40.0, 120)
    compare_anchors(prof, anchors, "kws_int8")
    row = next(r for r in anchors["rows"] if r["model"] == "kws_int8" and r["board"] == "mps2-an386"
               and r["kernels"] == "tflm-cmsis-nn")
    tflm = [o for o in row["per_operator"] if o["op"] != "RESHAPE"]
    assert [layer.tflm_instructions for layer in prof.layers] == [o["instructions"] for o in tflm]
    assert [o["op"] for o in prof.unmatched_tflm] == ["RESHAPE"] and prof.tflm_total == row["instructions"]
    assert "x TFLM" in format_profile(prof)
    with pytest.raises(Error, match="no tflm-cmsis-nn row"):
        compare_anchors(prof, anchors, "no_such_model")


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
@pytest.mark.parametrize("backend", ["c", "llvm"])  # llvm: LLVM's entry/exit instrumenter, same hooks
def test_profile_in_qemu_accounts_for_every_instruction(backend: str) -> None:
    from test_schedules import CHAINS, conv_chain
    from aot.tools.profile import profile_model
    from aot.tools.bench import model_macs
    x_shape, ops = CHAINS["dscnn"]
    model = conv_chain(7, x_shape, ops)
    prof = profile_model(model, "mps2-an386", backend=backend)
    from aot.board.boards import load_board
    from aot.board.flow import board_options
    from aot.kernel import ir as K
    from aot.pipeline.driver import compile_model
    module = compile_model(model, board_options(load_board("mps2-an386"), {})).module
    calls = [s.callee for s in module.func(module.entry).body.body if isinstance(s, K.CallKernel)]
    assert [layer.kernel for layer in prof.layers] == calls
    # the per-layer sum plus the entry's own (the gaps, measured) = the whole run (measured once)
    assert sum(layer.ticks for layer in prof.layers) + prof.entry_ticks == prof.total_ticks
    assert sum(layer.instructions for layer in prof.layers) + prof.entry_instructions == prof.total_instructions
    assert abs(prof.entry_instructions - prof.entry_ticks * prof.instructions_per_tick) <= len(calls)
    assert 0 < prof.entry_instructions < 0.05 * prof.total_instructions
    assert prof.macs == model_macs(model) and all(layer.instructions > 0 for layer in prof.layers)
    assert prof.plain_instructions is not None
    assert abs(prof.total_instructions - prof.plain_instructions) < 0.15 * prof.plain_instructions
    # estimated cycles per layer call (the uninstrumented build's trace, aot.timing): within the whole call's
    # (the LLVM object without hooks may inline a kernel into the entry: its layers then carry no
    # estimate of their own, the whole call does)
    assert prof.estimated_cycles
    if backend == "c" or all(layer.estimated_cycles for layer in prof.layers):
        assert all(layer.estimated_cycles for layer in prof.layers)
        assert sum(layer.estimated_cycles for layer in prof.layers) <= prof.estimated_cycles
    else:
        assert not any(layer.estimated_cycles for layer in prof.layers)  # all or none: never a partial split


def test_profile_command_passes_its_build_options(monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # noqa: ANN001
    """`aot profile --opt/--flash-budget/--backend` profile the build those options give (as `aot run`)."""
    import aot.tools.profile as prof_mod
    from aot.cli.app import main
    seen: dict = {}

    def fake(model, board, seed=0, plain=True, **options):  # noqa: ANN001, ANN003, ANN202
        seen.update(options, model=model, board=board)
        return Profile("m", board, [Layer("k0", "conv2d", 1000, 10)], 10, 1010, 0, None, 40.0, 10)
    monkeypatch.setattr(prof_mod, "profile_model", fake)
    assert main(["profile", "m.tflite", "--board", "mps2-an386", "--flash-budget", "1000000", "--opt", "size",
                 "--backend", "llvm"]) == 0
    assert seen == {"model": "m.tflite", "board": "mps2-an386", "flash_budget": 1000000, "opt": "size",
                    "backend": "llvm"}
    assert "k0" in capsys.readouterr().out
    seen.clear()
    assert main(["profile", "m.tflite", "--board", "mps2-an386"]) == 0
    assert seen == {"model": "m.tflite", "board": "mps2-an386"}
