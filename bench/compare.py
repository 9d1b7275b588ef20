"""Join baracuda-bench and torch_baseline JSON lines on (op, pass, dtype,
shape) and print a Markdown table: both times, the speed-up (torch ms /
ours ms, > 1 means we are faster; with several rounds in a file, each
side's fastest time) and our fraction of the hardware ceiling
(measured copy bandwidth for GB/s cases, measured cuBLAS bf16 GEMM rate for
TFLOP/s cases). With several rounds, the spread column gives each side's
round-to-round spread (slowest over fastest, minus 1), the noise a
difference between the sides should be read against. Usage: compare.py
ours.jsonl torch.jsonl"""
import json
import sys


def load(path):
    """Rows by key (the fastest round's) and each key's spread over rounds."""
    rows, times = {}, {}
    for line in open(path):
        line = line.strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        key = (r["op"], r.get("pass", "fw"), r["dtype"], r["shape"])
        times.setdefault(key, []).append(r["ms"])
        old = rows.get(key)
        # repeated rounds: keep the fastest time, and for ceilings the best rate
        if old is None or r["ms"] < old["ms"]:
            rows[key] = r
    spread = {k: max(v) / min(v) - 1.0 for k, v in times.items() if len(v) > 1 and min(v) > 0}
    return rows, spread


def main():
    (ours, ours_spread), (torch, torch_spread) = load(sys.argv[1]), load(sys.argv[2])
    copy = next((r["gbps"] for k, r in ours.items() if k[0] == "ceiling_copy"), None)
    gemm = next((r["tflops"] for k, r in torch.items() if k[0] == "ceiling_gemm_bf16"), None)
    ceilings = []
    if copy is not None:
        ceilings.append(f"device-to-device copy {copy} GB/s (baracuda copy)")
    if gemm is not None:
        ceilings.append(f"bf16 GEMM {gemm} TFLOP/s (torch 8192^3)")
    print(f"Ceilings: {', '.join(ceilings) or 'none measured'}\n")
    # torch.compile columns when the PyTorch side timed it for some case
    compiled = any("compile_ms" in r for r in torch.values())
    extra = " compile ms | vs compile |" if compiled else ""
    print(f"| op | pass | dtype | shape | ours ms | torch ms | speed-up |{extra} spread ours / torch | ours rate "
          "| of ceiling |")
    print("|---|---|---|---|---:|---:|---:|" + ("---:|---:|" if compiled else "") + "---:|---:|---:|")
    slower = within_noise = 0
    for key, r in ours.items():
        if key[0].startswith("ceiling"):
            continue
        t = torch.get(key)
        tms = t["ms"] if t else None
        speed = tms / r["ms"] if tms else None
        if "gbps" in r:
            rate, frac = f"{r['gbps']:.0f} GB/s", (r["gbps"] / copy if copy else None)
        elif "tflops" in r:
            rate, frac = f"{r['tflops']:.1f} TFLOP/s", (r["tflops"] / gemm if gemm else None)
        else:
            rate, frac = "", None
        so, st = ours_spread.get(key), torch_spread.get(key)
        if speed is not None and speed < 1.0:
            slower += 1
            if so is not None and st is not None and 1.0 / speed - 1.0 < max(so, st):
                within_noise += 1
        spread = "" if so is None and st is None else \
            f"{'-' if so is None else f'{100 * so:.1f}%'} / {'-' if st is None else f'{100 * st:.1f}%'}"
        cms = t.get("compile_ms") if t else None
        cols = ""
        if compiled:
            vs = None if cms is None else cms / r["ms"]
            cols = f" {'' if cms is None else f'{cms:.4f}'} | {'' if vs is None else f'{vs:.3f}'} |"
        print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {r['ms']:.4f} | "
              f"{'' if tms is None else f'{tms:.4f}'} | {'' if speed is None else f'{speed:.3f}'} |{cols} {spread} | "
              f"{rate} | {'' if frac is None else f'{100 * frac:.1f}%'} |")
    print(f"\n{slower} case(s) slower than PyTorch, {within_noise} of them by less than the larger "
          "round-to-round spread of the two sides")


if __name__ == "__main__":
    main()
