"""PyTorch baselines of the conv family (same names, shapes, dtypes and
layouts as crates/baracuda-bench/src/conv.rs), with
torch.backends.cudnn.benchmark = True and TF32 off for the IEEE f32 case.

cases() returns [(name, pass, dtype, layout, shape, fns)] where each of
fns runs the pass once on its own buffer set (rotation() in
bench/torch_baseline.py, which times them)."""

RESNET50 = [(3, 64, 7, 2, 224), (64, 64, 1, 1, 56), (64, 64, 3, 1, 56), (64, 256, 1, 1, 56),
            (256, 64, 1, 1, 56), (256, 128, 1, 1, 56), (128, 128, 3, 2, 56), (128, 512, 1, 1, 28),
            (256, 512, 1, 2, 56), (512, 128, 1, 1, 28), (128, 128, 3, 1, 28), (512, 256, 1, 1, 28),
            (256, 256, 3, 2, 28), (256, 1024, 1, 1, 14), (512, 1024, 1, 2, 28), (1024, 256, 1, 1, 14),
            (256, 256, 3, 1, 14), (1024, 512, 1, 1, 14), (512, 512, 3, 2, 14), (512, 2048, 1, 1, 7),
            (1024, 2048, 1, 2, 14), (2048, 512, 1, 1, 7), (512, 512, 3, 1, 7)]
WAV2VEC2 = [(1, 10, 5, 256000), (512, 3, 2, 51199), (512, 3, 2, 25599), (512, 3, 2, 12799),
            (512, 3, 2, 6399), (512, 2, 2, 3199), (512, 2, 2, 1599)]


def _conv_cases(torch, name, make, stride, pad, layout, dtype_name):
    """The three passes of a conv case; `make()` returns a fresh random
    (x, w). Each pass gets one callable per buffer set (rotation(), as in
    conv.rs)."""
    from torch_baseline import rotation
    F = torch.nn.functional
    x, w = make()
    nd = x.dim() - 2
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nd]
    y = conv(x, w, stride=stride, padding=pad)
    sets = rotation(torch, (x.numel() + w.numel() + y.numel()) * x.element_size())
    xws = [(x, w)] + [make() for _ in range(sets - 1)]
    dys = [torch.randn_like(y) for _ in range(sets)]
    shape = f"x{list(x.shape)} w{list(w.shape)} s{stride} p{pad}"

    # torch.ops.aten.convolution_backward runs the same cuDNN backward
    # kernels autograd uses.
    def bw(dy, x, w, mask):
        return lambda: torch.ops.aten.convolution_backward(dy, x, w, None, [stride] * nd, [pad] * nd, [1] * nd,
                                                           False, [0] * nd, 1, mask)

    return [
        (name, "fw", dtype_name, layout, shape,
         [(lambda x=x, w=w: conv(x, w, stride=stride, padding=pad)) for x, w in xws]),
        (name, "bw_data", dtype_name, layout, shape,
         [bw(dy, x, w, [True, False, False]) for (x, w), dy in zip(xws, dys)]),
        (name, "dw", dtype_name, layout, shape,
         [bw(dy, x, w, [False, True, False]) for (x, w), dy in zip(xws, dys)]),
    ]


def cases():
    import torch
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = "cuda"
    out = []
    cl = torch.channels_last
    bf = torch.bfloat16
    for ci, co, k, st, hw in RESNET50:
        def make(ci=ci, co=co, k=k, hw=hw):
            return (torch.randn(64, ci, hw, hw, device=dev, dtype=bf).to(memory_format=cl),
                    torch.randn(co, ci, k, k, device=dev, dtype=bf).to(memory_format=cl))
        out += _conv_cases(torch, f"resnet50_conv_{ci}_{co}_k{k}_s{st}_{hw}", make, st, k // 2, "ChannelsLast", "bf16")
    out += _conv_cases(torch, "resnet50_conv3x3_64_nchw_f32",
                       lambda: (torch.randn(64, 64, 56, 56, device=dev), torch.randn(64, 64, 3, 3, device=dev)),
                       1, 1, "ChannelsFirst", "f32")
    for ci, k, st, length in WAV2VEC2:
        def make(ci=ci, k=k, length=length):
            return (torch.randn(8, ci, length, device=dev, dtype=bf), torch.randn(512, ci, k, device=dev, dtype=bf))
        out += _conv_cases(torch, f"wav2vec2_conv_{ci}_k{k}_s{st}_{length}", make, st, 0, "ChannelsFirst", "bf16")
    cl3 = torch.channels_last_3d
    out += _conv_cases(torch, "unet3d_conv3x3x3_64",
                       lambda: (torch.randn(2, 64, 64, 64, 64, device=dev, dtype=bf).to(memory_format=cl3),
                                torch.randn(64, 64, 3, 3, 3, device=dev, dtype=bf).to(memory_format=cl3)),
                       1, 1, "ChannelsLast", "bf16")

    from torch_baseline import rotation
    F = torch.nn.functional
    x = torch.randn(64, 64, 112, 112, device=dev, dtype=bf).to(memory_format=cl)
    y, idx = F.max_pool2d(x, 3, 2, 1, return_indices=True)
    sets = rotation(torch, (x.numel() + y.numel()) * 2 + idx.numel() * 8)
    xs = [x] + [torch.randn_like(x) for _ in range(sets - 1)]
    got = [F.max_pool2d(v, 3, 2, 1, return_indices=True) for v in xs]
    dys = [torch.randn_like(y) for _ in range(sets)]
    shape = f"x{list(x.shape)} y{list(y.shape)}"
    out.append(("resnet50_maxpool3x3s2", "fw", "bf16", "ChannelsLast", shape,
                [(lambda v=v: F.max_pool2d(v, 3, 2, 1, return_indices=True)) for v in xs]))
    out.append(("resnet50_maxpool3x3s2", "bw", "bf16", "ChannelsLast", shape,
                [(lambda v=v, dy=dy, i=i: torch.ops.aten.max_pool2d_with_indices_backward(
                    dy, v, [3, 3], [2, 2], [1, 1], [1, 1], False, i))
                 for v, dy, (_, i) in zip(xs, dys, got)]))
    x2 = torch.randn(64, 2048, 7, 7, device=dev, dtype=bf).to(memory_format=cl)
    y2 = F.adaptive_avg_pool2d(x2, 1)
    sets = rotation(torch, (x2.numel() + y2.numel()) * 2)
    x2s = [x2] + [torch.randn_like(x2) for _ in range(sets - 1)]
    dy2s = [torch.randn_like(y2) for _ in range(sets)]
    shape2 = f"x{list(x2.shape)} y{list(y2.shape)}"
    out.append(("resnet50_adaptive_avgpool", "fw", "bf16", "ChannelsLast", shape2,
                [(lambda v=v: F.adaptive_avg_pool2d(v, 1)) for v in x2s]))
    out.append(("resnet50_adaptive_avgpool", "bw", "bf16", "ChannelsLast", shape2,
                [(lambda v=v, dy=dy: torch.ops.aten._adaptive_avg_pool2d_backward(dy, v)) for v, dy in zip(x2s, dy2s)]))
    return out
