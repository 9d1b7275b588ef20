"""Goldens of the conv family: small f64 cases, inputs and PyTorch outputs.
scripts/make_goldens.py calls make(torch) and writes
tests/golden/conv.safetensors; crates/baracuda-kernels/tests/golden_conv.rs
checks reference::conv against it (same configurations, hard-coded there)."""


def make(torch):
    F = torch.nn.functional
    g = torch.Generator().manual_seed(1234)
    r = lambda *s: torch.rand(*s, generator=g, dtype=torch.float64) * 2 - 1
    out = {}

    # conv2d: groups 2, stride (2,1), padding (1,0), dilation (1,2)
    x, w = r(2, 4, 7, 8).requires_grad_(), r(6, 2, 3, 2).requires_grad_()
    y = F.conv2d(x, w, stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2)
    dy = r(*y.shape)
    dx, dw = torch.autograd.grad(y, (x, w), dy)
    out.update({"conv2d.x": x, "conv2d.w": w, "conv2d.y": y, "conv2d.dy": dy, "conv2d.dx": dx, "conv2d.dw": dw})

    # conv1d: dilation 2, padding 2, stride 3
    x, w = r(2, 3, 17), r(5, 3, 3)
    out.update({"conv1d.x": x, "conv1d.w": w, "conv1d.y": F.conv1d(x, w, stride=3, padding=2, dilation=2)})

    # conv1d padding='same' with an even kernel: 1 before, 2 after
    x, w = r(2, 3, 11), r(4, 3, 4)
    out.update({"conv1d_same.x": x, "conv1d_same.w": w, "conv1d_same.y": F.conv1d(x, w, padding="same")})

    # conv_transpose2d: stride 2, padding 1, output_padding (1, 0), groups 2
    x, w = r(1, 4, 5, 4), r(4, 3, 3, 3)
    out.update({"convt2d.x": x, "convt2d.w": w,
                "convt2d.y": F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=(1, 0), groups=2)})

    # max_pool2d k3 s2 p1 ceil_mode, with indices
    x = r(1, 2, 9, 8)
    y, idx = F.max_pool2d(x, 3, 2, 1, ceil_mode=True, return_indices=True)
    out.update({"maxpool2d.x": x, "maxpool2d.y": y, "maxpool2d.idx": idx.to(torch.float64)})

    # max_pool2d k3 s2 p1 dilation 2, with indices
    x = r(1, 2, 11, 10)
    y, idx = F.max_pool2d(x, 3, 2, 1, dilation=2, return_indices=True)
    out.update({"maxpool2d_dil.x": x, "maxpool2d_dil.y": y, "maxpool2d_dil.idx": idx.to(torch.float64)})

    # avg_pool2d k3 s2 p1 ceil_mode, count_include_pad False; and divisor 5
    x = r(1, 2, 9, 8)
    out.update({"avgpool2d.x": x,
                "avgpool2d.y": F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
                "avgpool2d.y_div": F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, divisor_override=5)})

    # adaptive pools 2d: 7x9 -> 3x4
    x = r(1, 2, 7, 9)
    ym, im = F.adaptive_max_pool2d(x, (3, 4), return_indices=True)
    out.update({"adaptive2d.x": x, "adaptive2d.avg": F.adaptive_avg_pool2d(x, (3, 4)),
                "adaptive2d.max": ym, "adaptive2d.idx": im.to(torch.float64)})

    # lp_pool1d p=2, k 3, stride 2, ceil_mode
    x = r(1, 2, 10).abs() + 0.1
    out.update({"lppool1d.x": x, "lppool1d.y": F.lp_pool1d(x, 2.0, 3, 2, ceil_mode=True)})

    # Cases added after the ones above (the generator's sequence keeps
    # their tensors unchanged).
    # conv2d padding='same' with even kernels (4, 2), dilation (1, 3):
    # (1, 1) before, (2, 2) after; with gradients
    x, w = r(2, 3, 9, 10).requires_grad_(), r(4, 3, 4, 2).requires_grad_()
    y = F.conv2d(x, w, padding="same", dilation=(1, 3))
    dy = r(*y.shape)
    dx, dw = torch.autograd.grad(y, (x, w), dy)
    out.update({"conv2d_same.x": x, "conv2d_same.w": w, "conv2d_same.y": y, "conv2d_same.dy": dy,
                "conv2d_same.dx": dx, "conv2d_same.dw": dw})

    # conv_transpose1d: output_padding 2 >= stride 1 (allowed below dilation 3), padding 1
    x, w = r(1, 2, 5).requires_grad_(), r(2, 3, 3).requires_grad_()
    y = F.conv_transpose1d(x, w, stride=1, padding=1, output_padding=2, dilation=3)
    dy = r(*y.shape)
    dx, dw = torch.autograd.grad(y, (x, w), dy)
    out.update({"convt1d_op.x": x, "convt1d_op.w": w, "convt1d_op.y": y, "convt1d_op.dy": dy,
                "convt1d_op.dx": dx, "convt1d_op.dw": dw})
    return {k: v.detach().contiguous() for k, v in out.items()}
