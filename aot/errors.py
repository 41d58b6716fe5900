"""The product's error types. The CLI prints `str(err)` on one line and exits 2."""
from __future__ import annotations


class Error(Exception):
    """Base of every error microaot reports to a user (bad model, unsupported op, no fit)."""


class ModelFormatError(Error):
    """The input file is not a valid model of the expected format (truncated, corrupt)."""


class UnsupportedError(Error):
    """The model uses an op, an option or a dtype this compiler does not support."""


class ShapeError(Error):
    """Shapes or dtypes of an op's operands do not agree."""


class VerifyError(Error):
    """An IR verifier rule failed; the message starts with the rule number."""


class FitError(Error):
    """The model does not fit the memory the target or board provides."""


class ToolchainError(Error):
    """An external tool (gcc, arm-none-eabi-gcc, qemu) failed or is missing."""
