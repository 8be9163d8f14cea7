"""The tools of benchmarks/cpp (scripts, not a package) loaded as modules for their tests."""
import importlib.util
import pathlib

TOOLS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "cpp"


def load(name):
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
