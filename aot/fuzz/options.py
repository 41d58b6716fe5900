"""Random points of the option space a user can reach from `aot compile`/`aot run`: --opt,
--policy, --planner, --stack-limit, --pool (one or several), --prefix, --cpu, the alignment,
--ram-budget (patch plans of the first stage: the default auto, off, min, or bytes), and the
backend (C through gcc, or LLVM)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from aot.lower.schedule.target import CPU_FEATURES, OPT_LEVELS

POLICIES = ("host", "micro", "micro-platform")
PLANNERS = ("best", "greedy-size", "greedy-conflicts", "search")


@dataclass(frozen=True)
class OptionPoint:
    backend: str = "c"
    opt: str = "speed"
    policy: str = "host"
    planner: str = "best"
    stack_limit: int | None = None
    pools: tuple[tuple[str, int | None], ...] = ()  # () = the default pool; else --pool NAME:BYTES...
    prefix: str = "model"
    cpu: str | None = None
    alignment: int = 16
    ram_budget: int | str | None = None  # None: the default (auto)

    def compile_kwargs(self, prefix_suffix: str = "") -> dict[str, Any]:
        """CompileOptions keywords (the prefix made unique within a batch by `prefix_suffix`)."""
        kw: dict[str, Any] = {"prefix": self.prefix + prefix_suffix, "opt": self.opt, "policy": self.policy,
                              "planner": self.planner, "stack_limit": self.stack_limit, "cpu": self.cpu,
                              "alignment": self.alignment}
        if self.ram_budget is not None:
            kw["ram_budget"] = self.ram_budget
        if len(self.pools) == 1:
            kw["pool"], kw["pool_size"] = self.pools[0]
        elif self.pools:
            kw["pools"] = tuple(self.pools)
        return kw

    def cli(self) -> str:
        """The same point as `aot compile` flags (for reports)."""
        out = [f"--backend {self.backend}", f"--opt {self.opt}", f"--policy {self.policy}", f"--planner {self.planner}",
               f"--prefix {self.prefix}"]
        if self.stack_limit is not None:
            out.append(f"--stack-limit {self.stack_limit}")
        out += [f"--pool {n}:{s}" for n, s in self.pools if s is not None]
        if self.cpu:
            out.append(f"--cpu {self.cpu}")
        if self.ram_budget is not None:
            out.append(f"--ram-budget {self.ram_budget}")
        return " ".join(out)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(d: dict[str, Any]) -> "OptionPoint":
        known = {f.name for f in fields(OptionPoint)}
        kw = {k: v for k, v in d.items() if k in known}
        kw["pools"] = tuple((str(n), None if s is None else int(s)) for n, s in kw.get("pools", ()))
        return OptionPoint(**kw)

    def simpler(self) -> list["OptionPoint"]:
        """Points one field closer to the defaults (for shrinking a finding)."""
        base = OptionPoint(backend=self.backend)
        out = []
        for f in fields(self):
            if f.name != "backend" and getattr(self, f.name) != getattr(base, f.name):
                out.append(OptionPoint(**{**asdict(self), "pools": self.pools, f.name: getattr(base, f.name)}))
        return out


def _ident(rng: np.random.Generator) -> str:
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_"
    n = int(rng.integers(1, 12))
    s = "".join(letters[int(rng.integers(len(letters)))] for _ in range(n))
    s += "".join(str(int(rng.integers(10))) for _ in range(int(rng.integers(0, 3))))
    return s if not s.lower().startswith(("aot_", "__")) else "m" + s


def random_point(rng: np.random.Generator, backends: tuple[str, ...] = ("c", "llvm")) -> OptionPoint:
    def pick(seq):  # noqa: ANN001, ANN202
        return seq[int(rng.integers(len(seq)))]

    pools: tuple[tuple[str, int | None], ...] = ()
    r = rng.random()
    if r < 0.2:
        pools = ((_ident(rng), None),)
    elif r < 0.35:
        pools = (("dtcm", int(rng.integers(1, 64)) * 64), ("sram", None))
    return OptionPoint(
        backend=pick(backends), opt=pick(OPT_LEVELS), policy=pick(POLICIES),
        planner=pick(PLANNERS + ("best", "best")),
        stack_limit=pick((None, None, 0, 16, 256, 4096)), pools=pools,
        prefix=pick(("model", _ident(rng))), cpu=pick((None, None) + tuple(CPU_FEATURES)),
        alignment=pick((16, 16, 4, 8, 32)),
        # min: the smallest patch plan; bytes: a budget every generated model meets (the cheapest plan that fits)
        ram_budget=pick((None, None, "off", "min", 1 << 20)))
