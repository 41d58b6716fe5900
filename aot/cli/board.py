"""CLI commands about boards: boards, project, footprint, bench."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from aot.cli.common import add_compile_options, add_optimize_option, compile_kwargs, load_model, read_inputs
from aot.errors import Error


def cmd_boards(a: argparse.Namespace) -> int:
    from aot.board.boards import list_boards
    boards = list_boards()
    if a.json:
        print(json.dumps([b.to_dict() for b in boards], sort_keys=True))
        return 0
    print(f"{'board':18} {'cpu':14} {'fpu':12} {'flash':>10} {'RAM':>10}  {'console':16} {'timer':10} {'emulated':24} isa")
    for b in boards:
        console = b.console.driver if b.console else "-"
        timer = "instrs" if b.emulated else ("mcycle" if b.is_riscv else "dwt" if b.has_dwt else "systick")
        emulated = "yes (" + b.qemu_machine + ")" if b.qemu_machine else "no"
        print(f"{b.name:18} {b.cpu:14} {str(b.fpu):12} {b.flash_bytes // 1024:>7} KiB {b.ram_bytes // 1024:>7} KiB"
              f"  {console:16} {timer:10} {emulated:24} {b.isa or 'thumb'}")
    return 0


def cmd_project(a: argparse.Namespace) -> int:
    from aot.board.flow import make_library_project, make_project
    model = load_model(a.model, getattr(a, "input_shape", None))
    kw = compile_kwargs(a)
    if a.library_only:
        if a.input or a.io != "uart":
            raise Error("--library-only writes only the model library: --input and --io do not apply")
        bb = make_library_project(model, a.board, Path(a.output), backend=a.backend, **kw)
        prefix = bb.compiled.options.prefix
        print(f"wrote {bb.project_dir}: CMake library target `{prefix}` for {bb.board.name} ({bb.board.cpu})")
        print(f"  use: add_subdirectory({bb.project_dir}) and target_link_libraries(<app> PRIVATE {prefix})")
        return 0
    if a.validate:
        return _project_validate(a, model, kw)
    inputs = read_inputs(model, a.input, a.seed)
    bb = make_project(model, a.board, Path(a.output), inputs, backend=a.backend, io=a.io, **kw)
    p = bb.compiled.plan
    print(f"wrote {bb.project_dir} for {bb.board.name} ({bb.board.cpu}): activations {p.activation_bytes:,} B "
          f"(lower bound {p.lower_bound_bytes:,} B), weights "
          f"{sum(c.buffer.nbytes for c in bb.compiled.module.consts):,} B")
    print(f"  build: make -C {bb.project_dir} (ends with the model's and the firmware's flash and RAM; "
          f"make size prints them again)")
    print("  " + (f"run: make -C {bb.project_dir} run" if bb.board.emulated
                   else f"flash: make -C {bb.project_dir} flash")
          + f"    worst-case stack: aot footprint {bb.project_dir}")
    return 0


def _project_validate(a: argparse.Namespace, model: object, kw: dict) -> int:
    """`aot project --validate`: the validation firmware (aot.validate), driven by `aot validate`."""
    from aot.validate.firmware import compile_for_validation
    if a.input or a.io != "uart":
        raise Error("--validate builds the validation firmware, which reads its inputs from the console UART: "
                    "--input and --io do not apply")
    vb = compile_for_validation(model, a.board, a.backend, a.baud, project_dir=Path(a.output), **kw)  # type: ignore[arg-type]
    console = vb.board.console
    print(f"wrote {vb.project_dir}: validation firmware of {vb.hello['model']} for {vb.board.name} "
          f"(model hash {vb.model_hash[:16]}, console {console.driver if console else '-'} at "
          f"{vb.hello['baud']} baud)")
    print(f"  build: make -C {vb.project_dir}; then: aot validate MODEL --board {vb.board.name} "
          + ("--qemu --data X.npy" if vb.board.emulated else "--port /dev/ttyACM0 --data X.npy"))
    return 0


def cmd_footprint(a: argparse.Namespace) -> int:
    from aot.board.footprint import footprint
    path = Path(a.path)
    su_dirs: list[Path] = []
    if path.is_dir():
        proj = path / "project.json"
        if not proj.is_file():
            raise Error(f"{path} is not a generated project (no project.json); pass an ELF or a project directory")
        meta = json.loads(proj.read_text())
        elf = path / meta["elf"]
        if not elf.is_file():
            from aot.runners.qemu import build_project
            elf = build_project(path)
        su_dirs = [path / "build"]
    elif path.is_file():
        with path.open("rb") as fh:
            magic = fh.read(4)
        if magic != b"\x7fELF":
            raise Error(f"{path} is not an ELF file: aot footprint reads a built firmware; for a model, build "
                        f"it first (aot project {path.name} --board BOARD -o DIR, then aot footprint DIR) or "
                        f"run aot bench {path.name} --board BOARD")
        elf = path
        su_dirs = [path.parent]
    else:
        raise Error(f"{path}: no such ELF file or project directory")
    fp = footprint(elf, su_dirs)
    if a.board:
        from aot.board.boards import load_board
        board = load_board(a.board)
        if fp.flash > board.flash_bytes or (fp.ram or fp.ram_static) > board.ram_bytes:
            print(f"does NOT fit {board.name}: firmware flash {fp.flash:,}/{board.flash_bytes:,} B, "
                  f"firmware RAM {(fp.ram or fp.ram_static):,}/{board.ram_bytes:,} B")
    print(fp.to_json() if a.json else fp.format_table())
    if path.is_dir() and not a.json:
        from aot.board.project.generate import io_note
        print(io_note(path))
    return 0


def cmd_bench(a: argparse.Namespace) -> int:
    from aot.tools.bench import draw_bench, format_markdown, rows_json, run_bench
    if a.zoo is not None and not a.host:
        return _bench_zoo(a)
    if not a.models:
        raise Error("aot bench needs MODEL files (or --zoo: the model zoo's families)")
    if a.host:
        from aot.tools.host_bench import host_bench_command
        host = {k: v for k, v in compile_kwargs(a).items() if k != "optimize"}  # a board option: no board here
        return host_bench_command(a.models, a.json, a.md, a.threads, a.runs, host)
    if not a.board:
        raise Error("aot bench needs --board BOARD (or --host: time per inference on this machine)")
    if a.input_shape:
        raise Error("aot bench takes models with static input shapes; --input-shape is for run/compile/plan/project")
    anchors = Path(a.anchors) if a.anchors else _default_anchors()
    rows = run_bench([Path(m) for m in a.models], a.board, anchors, with_tflm=not a.no_tflm, backend=a.backend,
                     **compile_kwargs(a))
    if a.md:
        command = f"aot bench {' '.join(a.models)} {' '.join('--board ' + b for b in a.board)} --md {a.md}"
        header = (f"<!-- regenerate: {command} -->\n# Benchmarks\n\nRegenerate with `{command}` "
                  f"(from the repository root, ../shared beside it).\n\nEvery figure in the first table is "
                  f"measured by that command: QEMU instructions per inference (`-icount shift=0`), flash and RAM "
                  f"from the linked ELF (RAM = planned pools + other statics + worst-case stack), TensorFlow Lite "
                  f"Micro's arena from its host interpreter (the smallest arena that works).\n\n")
        Path(a.md).write_text(header + format_markdown(rows))
    if a.png:
        draw_bench(rows, a.png)
    if a.html:  # the rows as a self-contained page (aot.tools.report)
        from dataclasses import asdict
        from aot.tools.report import sweep_page
        from aot.tools.sweep import write_atomic
        write_atomic(a.html, sweep_page([asdict(r) for r in rows], "aot bench"))
    print(rows_json(rows) if a.json else format_markdown(rows))
    return 0


def _bench_zoo(a: argparse.Namespace) -> int:
    """aot bench --zoo: every zoo family on one board (default mps2-an386) beside TFLM+CMSIS-NN."""
    from aot.tools.zoo_bench import format_zoo_markdown, run_zoo_bench, select_cases, zoo_rows_json
    if a.models:
        raise Error("aot bench --zoo builds its own models; drop the MODEL arguments (or --zoo)")
    boards = a.board or ["mps2-an386"]
    if len(boards) != 1:
        raise Error("aot bench --zoo takes one --board")
    anchors = Path(a.anchors) if a.anchors else _default_anchors()
    rows = run_zoo_bench(select_cases(a.zoo), boards[0], anchors, backend=a.backend, **compile_kwargs(a))
    text = format_zoo_markdown(rows)
    if a.md:
        Path(a.md).write_text(text)
    if isinstance(a.json, str):
        Path(a.json).write_text(zoo_rows_json(rows) + "\n")
    print(zoo_rows_json(rows) if a.json is True else text)
    return 0


def _default_anchors() -> Path | None:
    from aot.assets import asset_dir
    for base in (Path.cwd(), asset_dir("boards").parent):
        p = base.parent / "shared" / "anchors.json"
        if p.is_file():
            return p
    return None


def add_commands(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    b = sub.add_parser("boards", help="list the boards (cpu, flash, RAM, emulated or not)")
    b.add_argument("--json", action="store_true")
    b.set_defaults(fn=cmd_boards)

    p = sub.add_parser("project", help="generate a complete C project for a board")
    p.add_argument("model")
    p.add_argument("--board", required=True)
    p.add_argument("-o", "--output", required=True, metavar="DIR")
    p.add_argument("--backend", choices=["c", "llvm"], default="c")
    p.add_argument("--input", action="append", metavar="IN.npy", help="input embedded in main.c")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--io", choices=["uart", "semihosting"], default="uart",
                   help="print through the board's console UART (default) or Arm semihosting (needs a debugger)")
    p.add_argument("--library-only", action="store_true",
                   help="write only a CMake library target (add_subdirectory + target_link_libraries)")
    p.add_argument("--validate", action="store_true",
                   help="the validation firmware: answers HELLO/RUN requests on the console UART (aot validate)")
    p.add_argument("--baud", type=int, help="with --validate: the console's baud rate (default: the board's)")
    add_compile_options(p)
    add_optimize_option(p)
    p.set_defaults(fn=cmd_project)

    bn = sub.add_parser("bench", help="flash, RAM and speed on a board, beside TensorFlow Lite Micro")
    bn.add_argument("models", nargs="*", metavar="MODEL")
    bn.add_argument("--zoo", nargs="?", const="all", metavar="NAMES",
                    help="benchmark the model zoo's families (int8/16x8, seeded/trained) beside TFLM+CMSIS-NN "
                         "(anchors.json); NAMES: comma-separated rows or families (default: all)")
    bn.add_argument("--board", action="append", help="board (repeat for several)")
    bn.add_argument("--json", nargs="?", const=True, metavar="OUT", help="print JSON (with --host: or write it to OUT)")
    bn.add_argument("--html", metavar="OUT", help="write the rows as a self-contained HTML page")
    bn.add_argument("--host", action="store_true", help="time per inference on this machine: our C and LLVM builds "
                    "beside TFLM's host interpreter and LiteRT+XNNPACK (aot.tools.host_bench)")
    bn.add_argument("--threads", type=int, default=1, help="with --host: also time ours (aot.build threads=N) and LiteRT with N threads")
    bn.add_argument("--runs", type=int, default=300, help="with --host: inferences timed per runtime")
    bn.add_argument("--md", metavar="FILE", help="write the table as Markdown")
    bn.add_argument("--png", metavar="FILE", help="draw ours vs TensorFlow Lite Micro")
    bn.add_argument("--anchors", metavar="JSON", help="reference figures (default: ../shared/anchors.json)")
    bn.add_argument("--no-tflm", action="store_true", help="skip measuring TensorFlow Lite Micro's arena")
    bn.add_argument("--backend", choices=["c", "llvm"], default="c", help="library backend of the firmware")
    add_compile_options(bn)
    add_optimize_option(bn)
    bn.set_defaults(fn=cmd_bench)

    f = sub.add_parser("footprint", help="flash, RAM and stack of a built ELF or project")
    f.add_argument("path", metavar="ELF_OR_PROJECT")
    f.add_argument("--board")
    f.add_argument("--json", action="store_true")
    f.set_defaults(fn=cmd_footprint)
