"""The TFLite frontend's handler table: one handler per operator, merged from the family
modules, read-only, and every declared options table and field exists in the schema."""
import importlib
from types import MappingProxyType

import pytest

from aot.frontend.tflite import SUPPORTED_OPS
from aot.frontend.tflite.converter import OpHandler
from aot.frontend.tflite.handlers import FAMILIES, HANDLERS, OPTIONS, _merge


def _noop(cv, op, opts) -> None:  # noqa: ANN001
    pass


def test_an_operator_claimed_twice_is_refused() -> None:
    with pytest.raises(RuntimeError, match="'ADD' has two handlers"):
        _merge(({"ADD": OpHandler(_noop)}, {"SUB": OpHandler(_noop), "ADD": OpHandler(_noop)}))


def test_tables_are_read_only_and_complete() -> None:
    for m in FAMILIES:
        assert isinstance(m.HANDLERS, MappingProxyType), m.__name__
    assert isinstance(HANDLERS, MappingProxyType)
    with pytest.raises(TypeError):
        HANDLERS["ADD"] = OpHandler(_noop)  # type: ignore[index]
    assert sorted(HANDLERS) == sorted(op for m in FAMILIES for op in m.HANDLERS) == list(SUPPORTED_OPS)
    assert OPTIONS.keys() == HANDLERS.keys()


@pytest.mark.parametrize("op", sorted(HANDLERS))
def test_declared_options_exist_in_the_schema(op: str) -> None:
    pytest.importorskip("tflite")
    from tflite.BuiltinOperator import BuiltinOperator
    h = HANDLERS[op]
    if op.startswith("CUSTOM("):  # custom operators carry their own (flexbuffer) options, no options table
        assert h.options is None and not h.fields
        return
    assert hasattr(BuiltinOperator, op)
    if h.options is None:
        assert not h.fields and not h.options_required
        return
    cls = getattr(importlib.import_module("tflite." + h.options), h.options)
    for f in h.fields:
        assert callable(getattr(cls, f, None)), f"{op}: {h.options} has no field {f}"
