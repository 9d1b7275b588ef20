#!/usr/bin/env python3
"""Registers and spills of every kernel of one .cu file, from ptxas (-v)
through NVRTC, for a GPU architecture; no GPU needed.

    scripts/kernel-regs.py softmax/softmax.cu -DBARACUDA_DTYPE=3 -DBARACUDA_OP=0 ...

The file is relative to crates/baracuda-kernels/kernels of the checkout
holding the working directory (its includes resolve there); the -D options are the module's specialisation (its
ModuleSpec defines). One line per kernel: registers a thread, spill
stores and loads in bytes. A register kernel that spills keeps part of
its row in local memory: a slowdown to catch before the GPU run.

Environment: BARACUDA_NVRTC (libnvrtc.so; default the one .ci/run
installs under .ci/pydeps), BARACUDA_CUDA_INCLUDE (CUDA headers; default
beside it), BARACUDA_ARCH (default sm_90). libnvrtc-builtins must be on
LD_LIBRARY_PATH (the pydeps lib folder).
"""
import ctypes
import os
import re
import sys

import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEPS = os.path.join(ROOT, ".ci", "pydeps", "nvidia", "cu13")


def kernels_dir():
    """The kernels of the checkout holding the working directory (a
    worktree), else of this script's."""
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True,
                             text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        top = ROOT
    return os.path.join(top, "crates", "baracuda-kernels", "kernels")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    lib = ctypes.CDLL(os.environ.get("BARACUDA_NVRTC", os.path.join(DEPS, "lib", "libnvrtc.so.13")))
    include = os.environ.get("BARACUDA_CUDA_INCLUDE", os.path.join(DEPS, "include"))
    arch = os.environ.get("BARACUDA_ARCH", "sm_90")
    kernels = kernels_dir()
    path = os.path.join(kernels, sys.argv[1])
    src = open(path, "rb").read()
    prog = ctypes.c_void_p()
    if lib.nvrtcCreateProgram(ctypes.byref(prog), src, os.path.basename(path).encode(), 0, None, None):
        sys.exit("nvrtcCreateProgram failed")
    opts = [f"--gpu-architecture={arch}", "--std=c++17", "--device-as-default-execution-space",
            f"-I{kernels}", f"-I{include}", "--ptxas-options=-v"] + sys.argv[2:]
    arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    buf = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, buf)
    log = buf.value.decode()
    if rc:
        sys.exit(log)
    kernels, cur = {}, None
    for line in log.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            cur = m.group(1)
            kernels[cur] = ["?", 0, 0]
        elif cur:
            m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
            if m:
                kernels[cur][1:] = [int(m.group(1)), int(m.group(2))]
            m = re.search(r"Used (\d+) registers", line)
            if m:
                kernels[cur][0] = m.group(1)
    for name in sorted(kernels):
        regs, st, ld = kernels[name]
        print(f"{name:40s} regs {regs:>3}  spill stores {st:>5}  loads {ld:>5}")


if __name__ == "__main__":
    main()
