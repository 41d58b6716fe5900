"""Kernel schedules: how an op's loop nest is ordered, blocked, unrolled and specialised for a
core (aot.lower.schedule.target), as kernel IR that both backends print.

  target     ScheduleTarget (cpu, features such as "dsp", opt speed|size|reference) and the
             WeightBudget of flash for re-laid-out weights
  requant    the int8 epilogue with compile-time constants (one 64-bit multiply-accumulate)
  gemm       conv2d and fully_connected as a blocked product over packed input columns
  depthwise  depthwise_conv2d with channels innermost and border classes
  helium     Cortex-M55 (MVE): the vector routines of aot.kernel.intrinsics_mve
  kernels    the choice per op, shape and target (SCHEDULES, used by aot.lower.function)
"""
from aot.lower.schedule.target import (CPU_FEATURES, DEFAULT_TARGET, OPT_LEVELS, ScheduleTarget, WeightBudget,
                                       make_target, target_for_board, target_for_cpu)

__all__ = ["CPU_FEATURES", "DEFAULT_TARGET", "OPT_LEVELS", "ScheduleTarget", "WeightBudget", "make_target",
           "target_for_board", "target_for_cpu"]
