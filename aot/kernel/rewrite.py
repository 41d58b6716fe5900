"""Rewriting kernel IR: replace buffers by others throughout a tree."""
from __future__ import annotations

from dataclasses import replace

from aot.kernel import ir as K


_LEAVES = frozenset((K.Const, K.ScalarVar, str, int, float, bool, type(None)))


def swap_buffers(node: object, mapping: dict[int, K.Buffer]) -> object:
    """`node` with each buffer whose id is in `mapping` replaced by its value; unchanged
    subtrees (and so every scalar variable) keep their identity."""
    if type(node) in _LEAVES:  # most of the values: no buffer inside
        return node
    if isinstance(node, K.Buffer):
        return mapping.get(id(node), node)
    if isinstance(node, tuple):
        items = tuple(swap_buffers(x, mapping) for x in node)
        return node if all(a is b for a, b in zip(items, node)) else items
    if isinstance(node, (K.Const, K.ScalarVar)):  # leaves: no buffer inside
        return node
    if isinstance(node, (K.Expr, K.Stmt)):
        changed = {}
        for name in K.init_field_names(type(node)):
            v = getattr(node, name)
            w = swap_buffers(v, mapping)
            if w is not v:
                changed[name] = w
        return replace(node, **changed) if changed else node  # type: ignore[type-var]
    return node
