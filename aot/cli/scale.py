"""CLI commands that run many builds: sweep (the model x board x option matrix), tune (a search
over per-layer schedule knobs) and report (one self-contained HTML page)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from aot.errors import Error
from aot.cli.common import add_optimize_option, add_ram_budget_option, ram_budget


def _add_exec_options(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--ray", metavar="ADDRESS", help="run the builds on a Ray cluster: 'auto' (the cluster "
                    "`ray start` made on this node) or HOST:PORT; default: a local process pool")
    sp.add_argument("--jobs", type=int, help="local worker processes (default: the machine's cores)")
    sp.add_argument("--quiet", action="store_true", help="no progress display")


def cmd_sweep(a: argparse.Namespace) -> int:
    from aot.tools.sweep import run_sweep, sweep_json, write_atomic
    if not a.json and not a.html:
        raise Error("aot sweep needs --json OUT and/or --html OUT")
    from aot.frontend import check_model_file
    for m in a.models:
        check_model_file(m)
    opts = a.opt or ["speed"]
    backends = a.backend or ["c"]
    rows = run_sweep([Path(m) for m in a.models], a.board, opts, backends, with_tflm=not a.no_tflm,
                     jobs=a.jobs, ray=a.ray, progress=not a.quiet)
    if a.json:
        write_atomic(a.json, sweep_json(rows) + "\n")
    if a.html:
        from aot.tools.report import sweep_page
        write_atomic(a.html, sweep_page(rows))
    bad = 0
    for r in rows:
        ok = r["error"] is None and r["bit_exact_with_host"] and r["bit_exact_with_tflm"] is not False
        bad += not ok
        state = ("ok" if ok else "FAIL") + (f" ({r['error']})" if r["error"] else "")
        instr = f"{r['instructions']:,} instr." if r["instructions"] is not None else "-"
        print(f"{r['model']:24} {r['board']:18} {r['opt']:9} {r['backend']:5} {instr:>18}  {state}")
    print(f"{len(rows) - bad}/{len(rows)} cells bit-exact (QEMU = host build"
          f"{'' if a.no_tflm else ' = TFLM'})" + (f"; wrote {a.json}" if a.json else "")
          + (f"; wrote {a.html}" if a.html else ""))
    return 1 if bad else 0


def cmd_report(a: argparse.Namespace) -> int:
    from aot.tools.report import build_report
    from aot.tools.sweep import write_atomic
    from aot.frontend import check_model_file
    check_model_file(a.model)
    sweep = None
    if a.sweep:
        import json
        try:
            sweep = json.loads(Path(a.sweep).read_text())["rows"]
        except (OSError, ValueError, KeyError, TypeError):
            raise Error(f"--sweep {a.sweep}: not the JSON that `aot sweep --json` writes; "
                        f"give the file `aot sweep ... --json OUT` wrote") from None
    html, data = build_report(Path(a.model), a.board, sweep_rows=sweep, opt=a.opt or "speed",
                              progress=not a.quiet, profile=not a.no_profile, ram_budget=ram_budget(a))
    write_atomic(a.output, html)
    if a.json:
        import json
        write_atomic(a.json, json.dumps(data, indent=2, sort_keys=True) + "\n")
    print(f"wrote {a.output}" + (f" and {a.json}" if a.json else ""))
    return 0


def cmd_tune(a: argparse.Namespace) -> int:
    from aot.frontend import check_model_file
    from aot.tools.tune import tune
    check_model_file(a.model)
    options = {"opt": a.opt} if a.opt else {}
    if getattr(a, "optimize", None) is not None:  # resolved for the board by tune
        options["optimize"] = a.optimize
    best = tune(Path(a.model), a.board, Path(a.output), trials=a.trials, budget_flash=a.budget_flash,
                budget_ram=a.budget_ram, seed=a.seed, jobs=a.jobs, ray=a.ray, progress=not a.quiet,
                options=options)
    d, b = best["default"], best["best"]
    if d["instructions"] is None:
        print(f"default: {d['error']}")
    else:
        print(f"default: {d['instructions']:,} instructions, firmware flash {d['flash_bytes']:,} B, "
              f"firmware RAM {d['ram_bytes']:,} B"
              + ("" if d["feasible"] else " (not feasible: over the budgets or not bit-exact)"))
    ratio = f" ({b['instructions'] / d['instructions']:.3f} x default)" if d["instructions"] else ""
    print(f"best (trial {b['trial']}): {b['instructions']:,} instructions{ratio}, firmware flash {b['flash_bytes']:,} B, "
          f"firmware RAM {b['ram_bytes']:,} B; {best['measured']} measured, log {a.output}")
    if b.get("estimated_cycles") is not None:
        print(f"estimated cycles: default {d.get('estimated_cycles') or 0:,}, best {b['estimated_cycles']:,}")
    print(f"apply it: aot project {a.model} --board {a.board} --tuning-log {a.output} -o DIR", file=sys.stderr)
    return 0


def add_commands(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    s = sub.add_parser("sweep", help="the validation and benchmark matrix: models x boards x options, "
                                     "bit-exact vs TFLM and the host build, instructions, flash, RAM")
    s.add_argument("models", nargs="+", metavar="MODEL")
    s.add_argument("--board", action="append", required=True, help="a board (repeat for several)")
    s.add_argument("--opt", action="append", choices=["speed", "size", "reference"], help="repeat for several")
    s.add_argument("--backend", action="append", choices=["c", "llvm"], help="repeat for several")
    s.add_argument("--no-tflm", action="store_true", help="skip TensorFlow Lite Micro (arena, bit-exactness)")
    s.add_argument("--json", metavar="OUT", help='write {"rows": [...]} (the fields of aot bench rows)')
    s.add_argument("--html", metavar="OUT", help="write the table as a self-contained HTML page")
    _add_exec_options(s)
    s.set_defaults(fn=cmd_sweep)

    r = sub.add_parser("report", help="one self-contained HTML page: memory plan, flash, RAM, per-layer "
                                      "speed, the sweep table")
    r.add_argument("model")
    r.add_argument("--board", required=True)
    r.add_argument("-o", "--output", required=True, metavar="REPORT.html")
    r.add_argument("--opt", choices=["speed", "size", "reference"])
    r.add_argument("--sweep", metavar="SWEEP.json", help="add the table of an `aot sweep --json` file")
    r.add_argument("--json", metavar="OUT", help="also write the figures shown, as JSON")
    r.add_argument("--no-profile", action="store_true", help="skip the per-layer instructions (aot profile: "
                   "one more build and QEMU run)")
    add_ram_budget_option(r)  # a patched build adds the unpatched one beside it (one more build and QEMU run)
    r.add_argument("--quiet", action="store_true")
    r.set_defaults(fn=cmd_report)

    t = sub.add_parser("tune", help="search per-layer schedule knobs, scored by QEMU instructions (estimated "
                                    "cycles with --optimize cycles, which auto is on a board whose flash costs cycles); "
                                    "writes a tuning log for --tuning-log")
    t.add_argument("model")
    t.add_argument("--board", required=True)
    t.add_argument("-o", "--output", required=True, metavar="TUNING.json",
                   help="the tuning log (JSON lines, one record per measured candidate; appended)")
    t.add_argument("--trials", type=int, default=16, help="candidates measured, the default schedules included")
    t.add_argument("--budget-flash", type=int, metavar="BYTES", help="refuse candidates with more flash")
    t.add_argument("--budget-ram", type=int, metavar="BYTES", help="refuse candidates with more RAM")
    t.add_argument("--seed", type=int, default=0, help="seed of the search (same seed, same candidates)")
    t.add_argument("--opt", choices=["speed", "size", "reference"], help="the schedules of untuned layers")
    add_optimize_option(t)
    _add_exec_options(t)
    t.set_defaults(fn=cmd_tune)
