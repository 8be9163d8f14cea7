"""The tools of benchmarks/ and benchmarks/cpp (scripts, not a package) loaded as modules for their tests."""
import importlib.util
import pathlib

BENCHMARKS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"
TOOLS = BENCHMARKS / "cpp"


def load(name, folder=TOOLS):
    spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
