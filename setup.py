"""Copy the C asset trees (runtime_c/, platform/, boards/) into the wheel as aot/_assets/."""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ASSETS = ("runtime_c", "platform", "boards")


class BuildWithAssets(build_py):
    def run(self) -> None:
        super().run()
        root = Path(__file__).resolve().parent
        for name in ASSETS:
            src = root / name
            dst = Path(self.build_lib) / "aot" / "_assets" / name
            if dst.exists():
                shutil.rmtree(dst)
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.o", "*.so"))


setup(cmdclass={"build_py": BuildWithAssets})
