"""LLVM compilation: verify, optimise, JIT on the host, or emit an object for a target."""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import llvmlite.binding as llvm
import numpy as np

from aot.errors import Error, ToolchainError
from aot.kernel import ir as K
from aot.llvm.printer import print_module


@functools.lru_cache(maxsize=None)
def _init_targets() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()


@dataclass(frozen=True)
class LLVMTarget:
    """A target for object emission, e.g. thumbv7em-none-eabihf / cortex-m4 / +vfp4d16sp."""
    triple: str
    cpu: str = ""
    features: str = ""
    float_abi: str = ""  # "hard" | "soft" | "" (from the triple)

    @property
    def pointer_bits(self) -> int:
        return 32 if self.triple.startswith(("thumb", "arm", "i386", "riscv32")) else 64


def _target_machine(target: LLVMTarget | None, opt: int = 3) -> "llvm.TargetMachine":
    _init_targets()
    if target is None:
        t = llvm.Target.from_default_triple()
        return t.create_target_machine(cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
                                       opt=opt, jit=True)
    try:
        t = llvm.Target.from_triple(target.triple)
    except RuntimeError as e:
        raise ToolchainError(f"LLVM has no target for triple {target.triple!r}: {e}") from None
    return t.create_target_machine(cpu=target.cpu, features=target.features, opt=opt, reloc="static",
                                   codemodel="small")


def compile_ir(module: K.KernelModule, target: LLVMTarget | None = None, opt: int = 3
               ) -> tuple["llvm.ModuleRef", "llvm.TargetMachine"]:
    tm = _target_machine(target, opt)
    triple = target.triple if target else llvm.get_process_triple()
    bits = target.pointer_bits if target else ctypes.sizeof(ctypes.c_void_p) * 8
    mod_ir = print_module(module, triple, str(tm.target_data), bits)
    try:
        ref = llvm.parse_assembly(str(mod_ir))
        ref.verify()
    except RuntimeError as e:
        raise Error(f"LLVM rejected the generated IR of {module.prefix}: {e}") from None
    if target is not None and target.float_abi:
        pass  # the eabihf / eabi triple selects the float ABI
    pto = llvm.create_pipeline_tuning_options(speed_level=min(opt, 3))
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(ref, pb)
    return ref, tm


def llvm_ir_text(module: K.KernelModule, target: LLVMTarget | None = None, optimized: bool = True) -> str:
    if not optimized:
        return str(print_module(module, target.triple if target else "", "", target.pointer_bits if target else 64))
    ref, _ = compile_ir(module, target)
    return str(ref)


def emit_object_bytes(module: K.KernelModule, target: LLVMTarget) -> bytes:
    ref, tm = compile_ir(module, target)
    obj = tm.emit_object(ref)
    if target.triple.startswith(("thumb", "arm")) and target.triple.endswith("eabihf"):
        from aot.llvm.armattrs import mark_hard_float
        obj = mark_hard_float(obj)
    return obj


@functools.lru_cache(maxsize=None)
def _host_runtime_library() -> str:
    """runtime_c + platform/host built once per process, loaded so JIT code finds its symbols."""
    from aot.runners.host import _gcc, runtime_sources

    tmp = Path(tempfile.mkdtemp(prefix="aot_llvm_rt_"))
    srcs, incs = runtime_sources("host")
    so = tmp / "libaot_runtime_host.so"
    _gcc(["-O2", "-std=c99", "-fPIC", "-shared"] + [f"-I{i}" for i in incs] + [str(s) for s in srcs]
         + ["-lm", "-o", str(so)], "the host runtime for the LLVM JIT")
    llvm.load_library_permanently(str(so))
    libm = ctypes.util.find_library("m")
    if libm:
        llvm.load_library_permanently(libm)
    import atexit
    atexit.register(shutil.rmtree, str(tmp), True)
    return str(so)


class LLVMJit:
    """JIT-compiled model in this process: call with input arrays, get output arrays."""

    def __init__(self, module: K.KernelModule, in_specs: Sequence, out_specs: Sequence) -> None:
        from aot.runners.host import CtypesModel

        _init_targets()
        _host_runtime_library()
        ref, tm = compile_ir(module, None)
        self._engine = llvm.create_mcjit_compiler(ref, tm)
        self._engine.finalize_object()
        self._engine.run_static_constructors()
        addr = self._engine.get_function_address(f"{module.prefix}_run")
        if not addr:
            raise Error("LLVM JIT: entry point not found")
        self._ref = ref
        self.model = CtypesModel(addr, in_specs, out_specs, self._engine)

    def __call__(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return self.model(inputs)
