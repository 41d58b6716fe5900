"""`aot profile`: per-layer QEMU instructions of a model on a board (aot.tools.profile)."""
from __future__ import annotations

import argparse


def cmd_profile(a: argparse.Namespace) -> int:
    from aot.tools.profile import profile_main
    return profile_main(a)


def add_commands(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    s = sub.add_parser("profile", help="per-layer QEMU instructions, MACs, MAC/instruction and share, from one "
                                       "instrumented firmware run")
    s.add_argument("model")
    s.add_argument("--board", required=True, help="an emulated board (aot boards)")
    s.add_argument("--json", action="store_true", help="print the profile as JSON")
    s.add_argument("--compare", metavar="ANCHORS.json",
                   help="line the layers up with TFLite Micro's per-operator counts (rows of this model and board)")
    s.add_argument("--kernels", default="tflm-cmsis-nn", help="the anchors' kernels column to compare with")
    s.add_argument("--opt", choices=["speed", "size", "reference"])
    s.add_argument("--flash-budget", type=int, metavar="BYTES",
                   help="flash for pre-widened weights, as for `aot run` (profile the build a budget gives)")
    s.add_argument("--backend", choices=["c", "llvm"], default="c",
                   help="the library backend (llvm: the kernels noinline, instrumented by LLVM)")
    s.add_argument("--seed", type=int, default=0, help="seed of the random input")
    s.add_argument("--no-plain", action="store_true", help="skip the uninstrumented run (its total instructions)")
    s.set_defaults(fn=cmd_profile)
