"""Join baracuda-bench and torch_baseline JSON lines on (op, pass, dtype,
shape) and print a Markdown table: both times, the speed-up (torch ms /
ours ms, > 1 means we are faster; with several rounds in a file, each
side's fastest time) and our fraction of the hardware ceiling
(measured copy bandwidth for GB/s cases, measured cuBLAS bf16 GEMM rate for
TFLOP/s cases). Usage: compare.py ours.jsonl torch.jsonl"""
import json
import sys


def load(path):
    rows = {}
    for line in open(path):
        line = line.strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        key = (r["op"], r.get("pass", "fw"), r["dtype"], r["shape"])
        old = rows.get(key)
        # repeated rounds: keep the fastest time, and for ceilings the best rate
        if old is None or r["ms"] < old["ms"]:
            rows[key] = r
    return rows


def main():
    ours, torch = load(sys.argv[1]), load(sys.argv[2])
    copy = next((r["gbps"] for k, r in ours.items() if k[0] == "ceiling_copy"), None)
    gemm = next((r["tflops"] for k, r in torch.items() if k[0] == "ceiling_gemm_bf16"), None)
    ceilings = []
    if copy is not None:
        ceilings.append(f"device-to-device copy {copy} GB/s (baracuda copy)")
    if gemm is not None:
        ceilings.append(f"bf16 GEMM {gemm} TFLOP/s (torch 8192^3)")
    print(f"Ceilings: {', '.join(ceilings) or 'none measured'}\n")
    print("| op | pass | dtype | shape | ours ms | torch ms | speed-up | ours rate | of ceiling |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|")
    slower = 0
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
        if speed is not None and speed < 1.0:
            slower += 1
        print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {r['ms']:.4f} | "
              f"{'' if tms is None else f'{tms:.4f}'} | {'' if speed is None else f'{speed:.3f}'} | {rate} | "
              f"{'' if frac is None else f'{100 * frac:.1f}%'} |")
    print(f"\n{slower} case(s) slower than PyTorch")


if __name__ == "__main__":
    main()
