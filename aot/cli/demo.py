"""CLI command `aot demo`: build the bundled example model, run it and check it."""
from __future__ import annotations

import argparse


def cmd_demo(a: argparse.Namespace) -> int:
    if a.validate:
        from aot.tools.digits_demo import run_digits_demo
        return 0 if run_digits_demo(board=a.board) else 1
    if a.speech:
        from aot.tools.speech.demo import run_speech_demo
        return 0 if run_speech_demo(board=a.board, keep_dir=a.keep, host_only=a.host_only) else 1
    from aot.tools.demo import run_demo
    return run_demo(board=a.board, host_only=a.host_only)


def add_commands(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    d = sub.add_parser("demo", help="build the bundled example model, run and check it")
    d.add_argument("--board", default="mps2-an386")
    d.add_argument("--host-only", action="store_true", help="only the host backends")
    d.add_argument("--speech", action="store_true", help="the micro_speech pipeline instead: TFLM's audio "
                   "preprocessor and keyword model back to back in one firmware, checked against TFLM")
    d.add_argument("--validate", action="store_true", help="a real data set instead: train a classifier on "
                   "scikit-learn's digits, quantize it, validate the test split on the emulated board (aot validate)")
    d.add_argument("--keep", metavar="DIR", help="(--speech) keep the firmware project in DIR")
    d.set_defaults(fn=cmd_demo)
