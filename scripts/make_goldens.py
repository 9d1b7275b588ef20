"""Write tests/golden/<family>.safetensors from PyTorch.

Each module in scripts/goldens/ defines make(torch) -> {name: tensor}
(small f64 cases: inputs and PyTorch's outputs and gradients). The host
tests in crates/baracuda-kernels/tests/golden_*.rs check the f64 reference
oracles against these files, so "matches PyTorch" is tested.

Usage: python3 scripts/make_goldens.py [OUT_DIR]   (default tests/golden)"""
import importlib.util
import pathlib
import sys

import torch
from safetensors.torch import save_file


def main():
    root = pathlib.Path(__file__).resolve().parent
    out = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else root.parent / "tests" / "golden"
    out.mkdir(parents=True, exist_ok=True)
    # family modules may import each other's helpers
    sys.path.insert(0, str(root / "goldens"))
    for path in sorted((root / "goldens").glob("*.py")):
        spec = importlib.util.spec_from_file_location(path.stem, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        # clone: autograd may hand back the same tensor twice (add's gradients)
        tensors = {k: v.detach().cpu().clone().contiguous() for k, v in mod.make(torch).items()}
        save_file(tensors, str(out / f"{path.stem}.safetensors"))
        print(f"{path.stem}: {len(tensors)} tensors -> {out / (path.stem + '.safetensors')}")


if __name__ == "__main__":
    main()
