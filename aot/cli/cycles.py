"""`aot cycles`: estimated cycles and milliseconds of one inference on a board (aot.timing)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from aot.cli.common import add_compile_options, add_optimize_option, compile_kwargs, load_model, read_inputs
from aot.errors import Error


def cmd_cycles(a: argparse.Namespace) -> int:
    from aot.timing.parts import resolve_board
    board = resolve_board(a.board)
    if a.elf:
        if a.model:
            raise Error("aot cycles takes a MODEL or --elf FILE, not both")
        from aot.timing.estimate import estimate_cycles
        if not Path(a.elf).is_file():
            raise Error(f"{a.elf}: no such ELF file")
        est = estimate_cycles(a.elf, board, entry=a.entry or "model_invoke", run_on=a.run_on,
                              assume_caches=a.assume_caches)
        extra: dict = {}
    else:
        if not a.model:
            raise Error("aot cycles needs a MODEL (or --elf FILE with --entry SYMBOL)")
        if a.entry or a.run_on:
            raise Error("--entry and --run-on apply to --elf; a MODEL is built and run by aot cycles itself")
        from aot.timing.estimate import estimate_model
        model = load_model(a.model, getattr(a, "input_shape", None))
        inputs = read_inputs(model, a.input, a.seed)
        est, extra = estimate_model(model, board, inputs, assume_caches=a.assume_caches, **compile_kwargs(a))
        extra.pop("elf", None)
    if a.json:
        print(json.dumps(est.to_dict() | extra, sort_keys=True))
    else:
        print(est.format_text())
        if extra.get("instructions_qemu") is not None:
            print(f"  QEMU instructions of the whole timed call: {extra['instructions_qemu']:,} "
                  f"(output matches the host build: {'yes' if extra.get('match_host') else 'no'})")
    return 0


def add_commands(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    s = sub.add_parser("cycles", help="estimated cycles and ms of one inference on a board: QEMU's executed "
                                      "instructions priced by the core's timing table and the board's memory system")
    s.add_argument("model", nargs="?", help="the model (omit with --elf)")
    s.add_argument("--board", required=True, help="any board (aot boards), or a timing-only part ("
                   "nucleo-u575zi-q, nucleo-h7a3zi-q); a real board runs on the emulated machine of its core")
    s.add_argument("--json", action="store_true", help="print the estimate as JSON")
    s.add_argument("--elf", metavar="FILE", help="estimate an ELF built elsewhere (e.g. a TFLM firmware)")
    s.add_argument("--entry", metavar="SYMBOL", help="with --elf: the function whose call is timed "
                                                     "(default: model_invoke)")
    s.add_argument("--run-on", metavar="BOARD", help="with --elf: the emulated board that runs it (default: the "
                                                     "board itself, or the emulated machine of its core)")
    s.add_argument("--assume-caches", action="store_true",
                   help="price the board with every cache and the flash prefetch on (whatever its startup code sets)")
    s.add_argument("--input", action="append", metavar="IN.npy", help="the input (default: seeded random)")
    s.add_argument("--seed", type=int, default=0)
    add_compile_options(s)
    add_optimize_option(s)
    s.set_defaults(fn=cmd_cycles)
