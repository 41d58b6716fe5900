"""The `aot` parser and entry point. Every user error prints one line and exits 2 (--debug
shows the traceback); an unexpected exception prints one line and exits 3; a closed output
pipe ends quietly with 141."""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

from aot.cli import board, cycles, demo, model, profile, quantize, scale, validate
from aot.errors import Error


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="aot", description="microaot: compile neural networks ahead of time to C "
                                                        "and LLVM for microcontrollers")
    p.add_argument("--debug", action="store_true", help="show Python tracebacks on errors")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    model.add_commands(sub)  # run, compile, plan, compare, ops
    demo.add_commands(sub)
    board.add_commands(sub)  # boards, project, bench, footprint
    scale.add_commands(sub)  # sweep, report, tune
    profile.add_commands(sub)  # profile
    cycles.add_commands(sub)  # cycles
    quantize.add_commands(sub)  # quantize
    validate.add_commands(sub)  # validate
    return p


def _closed_pipe() -> int:
    """The reader of our output went away (`aot ... | head`): end quietly with the shell's
    conventional status for SIGPIPE, and keep Python from complaining at exit when it flushes."""
    import os
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 141


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    a = parser.parse_args(argv)
    if not getattr(a, "command", None):
        parser.print_help()
        return 2
    try:
        rc = int(a.fn(a) or 0)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at interpreter exit
        return rc
    except Error as e:
        if a.debug:
            raise
        print(f"aot: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("aot: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _closed_pipe()
    except Exception as e:  # noqa: BLE001 - the contract is one line, never a traceback
        if a.debug:
            raise
        print(f"aot: internal error: {type(e).__name__}: {' '.join(str(e).split())[:500]} "
              f"(rerun with --debug and report it)", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
