"""Estimated cycles and milliseconds on a board: a timing model per core (cores.py) over the
instructions QEMU executes (trace.py, a TCG plugin) and the board's memory system (memsys.py).

    from aot.timing import estimate_cycles, estimate_model
    est = estimate_cycles("build/firmware.elf", "mps2-an386", entry="model_invoke")
    est.cycles, est.ms, est.cycles_per_instruction, est.to_dict()

Every figure is an estimate from a model, never a measurement.
"""
from aot.timing.model import CycleEstimate

__all__ = ["CycleEstimate", "estimate_cycles", "estimate_model"]


def estimate_cycles(*args, **kwargs) -> CycleEstimate:  # noqa: ANN002, ANN003 - see aot.timing.estimate
    from aot.timing.estimate import estimate_cycles as run
    return run(*args, **kwargs)


def estimate_model(*args, **kwargs):  # noqa: ANN002, ANN003, ANN201 - see aot.timing.estimate
    from aot.timing.estimate import estimate_model as run
    return run(*args, **kwargs)
