"""A counted loop for the LLVM vector routines (aot/llvm/helium.py, aot/llvm/x86.py)."""
from __future__ import annotations

from typing import Callable

from llvmlite import ir

I32 = ir.IntType(32)
Body = Callable[[ir.IRBuilder, ir.Value], None]


def counted_loop(b: ir.IRBuilder, n: ir.Value, body: Body, start: ir.Value | None = None, step: int = 1) -> None:
    """for (i = start; i < n; i += step) body(b, i); the builder ends after the loop."""
    fn = b.function
    pre = b.block
    head, blk, done = fn.append_basic_block("head"), fn.append_basic_block("body"), fn.append_basic_block("done")
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(I32)
    i.add_incoming(start if start is not None else ir.Constant(I32, 0), pre)
    b.cbranch(b.icmp_signed("<", i, n), blk, done)
    b.position_at_end(blk)
    body(b, i)
    i.add_incoming(b.add(i, ir.Constant(I32, step)), b.block)
    b.branch(head)
    b.position_at_end(done)
