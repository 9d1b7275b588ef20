"""PyTorch sides of the benchmark families. The cases themselves are in
bench/cases/<family>.json, which crates/baracuda-bench reads too; caselist
reads and checks them. Each family module (elementwise, conv, gemm)
imports torch only inside cases(), so that the case list can be read and
checked where torch is not installed. A family module has:

- SETTINGS: {name: type} of the family-level fields of its file;
- OPS: {op: caselist.Op}, what it can build and time;
- rows(case): the case's result rows, one per pass, with the work its rate
  comes from (the formulas in bench/cases/README.md);
- cases(torch, settings, cases): (row, fn) per case and pass, in file
  order, where fn is a callable, or a list of callables, one per buffer set,
  that runs the pass once (bench/torch_baseline.py times them).
"""
