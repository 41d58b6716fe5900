"""Lowering: graph-IR primitive functions -> kernel-IR functions, the entry function, schedules."""
