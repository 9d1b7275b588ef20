"""PyTorch baselines of the conv family (same names, shapes, dtypes and
layouts as crates/baracuda-bench/src/conv.rs), with
torch.backends.cudnn.benchmark = True and TF32 off for the IEEE f32 case.

cases() returns [(name, pass, dtype, layout, shape, fn)] where fn() runs
the pass once; run this file to time them (CUDA events, 5 warm-ups, median
of 20) and print one JSON line each."""
import json

RESNET50 = [(3, 64, 7, 2, 224), (64, 64, 1, 1, 56), (64, 64, 3, 1, 56), (64, 256, 1, 1, 56),
            (256, 64, 1, 1, 56), (256, 128, 1, 1, 56), (128, 128, 3, 2, 56), (128, 512, 1, 1, 28),
            (256, 512, 1, 2, 56), (512, 128, 1, 1, 28), (128, 128, 3, 1, 28), (512, 256, 1, 1, 28),
            (256, 256, 3, 2, 28), (256, 1024, 1, 1, 14), (512, 1024, 1, 2, 28), (1024, 256, 1, 1, 14),
            (256, 256, 3, 1, 14), (1024, 512, 1, 1, 14), (512, 512, 3, 2, 14), (512, 2048, 1, 1, 7),
            (1024, 2048, 1, 2, 14), (2048, 512, 1, 1, 7), (512, 512, 3, 1, 7)]
WAV2VEC2 = [(1, 10, 5, 256000), (512, 3, 2, 51199), (512, 3, 2, 25599), (512, 3, 2, 12799),
            (512, 3, 2, 6399), (512, 2, 2, 3199), (512, 2, 2, 1599)]


def _conv_cases(torch, name, x, w, stride, pad, layout, dtype_name):
    F = torch.nn.functional
    nd = x.dim() - 2
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nd]
    y = conv(x, w, stride=stride, padding=pad)
    dy = torch.randn_like(y)
    gi = torch.nn.grad
    in_grad = {1: gi.conv1d_input, 2: gi.conv2d_input, 3: gi.conv3d_input}[nd]
    w_grad = {1: gi.conv1d_weight, 2: gi.conv2d_weight, 3: gi.conv3d_weight}[nd]
    shape = f"x{list(x.shape)} w{list(w.shape)} s{stride} p{pad}"
    # torch.nn.grad.convNd_input/weight call the same cuDNN backward
    # kernels autograd uses (aten convolution_backward).
    return [
        (name, "fw", dtype_name, layout, shape, lambda: conv(x, w, stride=stride, padding=pad)),
        (name, "bw_data", dtype_name, layout, shape,
         lambda: torch.ops.aten.convolution_backward(dy, x, w, None, [stride] * nd, [pad] * nd, [1] * nd,
                                                     False, [0] * nd, 1, [True, False, False])),
        (name, "dw", dtype_name, layout, shape,
         lambda: torch.ops.aten.convolution_backward(dy, x, w, None, [stride] * nd, [pad] * nd, [1] * nd,
                                                     False, [0] * nd, 1, [False, True, False])),
    ]


def cases():
    import torch
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = "cuda"
    out = []
    cl = torch.channels_last
    for ci, co, k, st, hw in RESNET50:
        x = torch.randn(64, ci, hw, hw, device=dev, dtype=torch.bfloat16).to(memory_format=cl)
        w = torch.randn(co, ci, k, k, device=dev, dtype=torch.bfloat16).to(memory_format=cl)
        out += _conv_cases(torch, f"resnet50_conv_{ci}_{co}_k{k}_s{st}_{hw}", x, w, st, k // 2, "ChannelsLast", "bf16")
    x = torch.randn(64, 64, 56, 56, device=dev)
    w = torch.randn(64, 64, 3, 3, device=dev)
    out += _conv_cases(torch, "resnet50_conv3x3_64_nchw_f32", x, w, 1, 1, "ChannelsFirst", "f32")
    for ci, k, st, length in WAV2VEC2:
        x = torch.randn(8, ci, length, device=dev, dtype=torch.bfloat16)
        w = torch.randn(512, ci, k, device=dev, dtype=torch.bfloat16)
        out += _conv_cases(torch, f"wav2vec2_conv_{ci}_k{k}_s{st}_{length}", x, w, st, 0, "ChannelsFirst", "bf16")
    x = torch.randn(2, 64, 64, 64, 64, device=dev, dtype=torch.bfloat16).to(memory_format=torch.channels_last_3d)
    w = torch.randn(64, 64, 3, 3, 3, device=dev, dtype=torch.bfloat16).to(memory_format=torch.channels_last_3d)
    out += _conv_cases(torch, "unet3d_conv3x3x3_64", x, w, 1, 1, "ChannelsLast", "bf16")

    F = torch.nn.functional
    x = torch.randn(64, 64, 112, 112, device=dev, dtype=torch.bfloat16).to(memory_format=cl)
    y, idx = F.max_pool2d(x, 3, 2, 1, return_indices=True)
    dy = torch.randn_like(y)
    shape = f"x{list(x.shape)} y{list(y.shape)}"
    out.append(("resnet50_maxpool3x3s2", "fw", "bf16", "ChannelsLast", shape,
                lambda: F.max_pool2d(x, 3, 2, 1, return_indices=True)))
    out.append(("resnet50_maxpool3x3s2", "bw", "bf16", "ChannelsLast", shape,
                lambda: torch.ops.aten.max_pool2d_with_indices_backward(dy, x, [3, 3], [2, 2], [1, 1], [1, 1], False, idx)))
    x2 = torch.randn(64, 2048, 7, 7, device=dev, dtype=torch.bfloat16).to(memory_format=cl)
    y2 = F.adaptive_avg_pool2d(x2, 1)
    dy2 = torch.randn_like(y2)
    shape2 = f"x{list(x2.shape)} y{list(y2.shape)}"
    out.append(("resnet50_adaptive_avgpool", "fw", "bf16", "ChannelsLast", shape2, lambda: F.adaptive_avg_pool2d(x2, 1)))
    out.append(("resnet50_adaptive_avgpool", "bw", "bf16", "ChannelsLast", shape2,
                lambda: torch.ops.aten._adaptive_avg_pool2d_backward(dy2, x2)))
    return out


def _time(torch, fn):
    for _ in range(5):
        fn()
    ts = []
    for _ in range(20):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]


if __name__ == "__main__":
    import torch
    for name, pas, dt, layout, shape, fn in cases():
        try:
            ms = _time(torch, fn)
            print(json.dumps({"op": name, "pass": pas, "dtype": dt, "layout": layout, "shape": shape, "ms": round(ms, 5)}), flush=True)
        except Exception as e:  # report and continue
            print(json.dumps({"op": name, "pass": pas, "error": str(e)[:200]}), flush=True)
        torch.cuda.empty_cache()
