//! Host test: the conv family's f64 oracles against PyTorch goldens
//! (`tests/golden/conv.safetensors`, written by `scripts/make_goldens.py`
//! from `scripts/goldens/conv.py`; same configurations as there).

use baracuda_kernels::reference::conv::{self as r, ConvGeometry, PoolGeometry, PoolKind};
use safetensors::SafeTensors;

#[path = "support/golden.rs"]
mod golden;
use golden::{close, get};

fn geom(
    input: &[usize],
    filter: &[usize],
    pad: &[usize],
    stride: &[usize],
    dil: &[usize],
    c: (usize, usize, usize, usize),
) -> ConvGeometry {
    ConvGeometry {
        batch: c.0,
        c_in: c.1,
        c_out: c.2,
        groups: c.3,
        output_padding: Vec::new(),
        input: input.to_vec(),
        filter: filter.to_vec(),
        padding: pad.to_vec(),
        padding_end: pad.to_vec(),
        stride: stride.to_vec(),
        dilation: dil.to_vec(),
    }
}

fn pool(
    input: &[usize],
    output: &[usize],
    k: &[usize],
    s: &[usize],
    p: &[usize],
    kind: PoolKind,
) -> PoolGeometry {
    PoolGeometry {
        batch: 1,
        channels: 2,
        input: input.to_vec(),
        output: output.to_vec(),
        window: k.to_vec(),
        stride: s.to_vec(),
        padding: p.to_vec(),
        padding_end: p.to_vec(),
        dilation: vec![1; p.len()],
        kind,
        count_include_pad: true,
        divisor_override: None,
    }
}

/// `{name}.y`, `.dx` and `.dw` against the reference's convolution `g`
/// and its gradients on `{name}.x`, `.w` and `.dy`.
fn conv_with_gradients(t: &SafeTensors<'_>, name: &str, g: &ConvGeometry) {
    let key = |k: &str| format!("{name}.{k}");
    let (x, w, dy) = (get(t, &key("x")), get(t, &key("w")), get(t, &key("dy")));
    close(&key("y"), &r::conv_fw(g, &x, &w), &get(t, &key("y")));
    close(
        &key("dx"),
        &r::conv_bw_data(g, &w, &dy),
        &get(t, &key("dx")),
    );
    close(
        &key("dw"),
        &r::conv_bw_filter(g, &x, &dy),
        &get(t, &key("dw")),
    );
}

#[test]
fn reference_matches_pytorch_goldens() {
    let bytes = golden::bytes("conv");
    let t = SafeTensors::deserialize(&bytes).expect("safetensors");

    let g = geom(&[7, 8], &[3, 2], &[1, 0], &[2, 1], &[1, 2], (2, 4, 6, 2));
    conv_with_gradients(&t, "conv2d", &g);

    let g = geom(&[17], &[3], &[2], &[3], &[2], (2, 3, 5, 1));
    close(
        "conv1d.y",
        &r::conv_fw(&g, &get(&t, "conv1d.x"), &get(&t, "conv1d.w")),
        &get(&t, "conv1d.y"),
    );

    let mut g = geom(&[11], &[4], &[1], &[1], &[1], (2, 3, 4, 1));
    g.padding_end = vec![2];
    close(
        "conv1d_same.y",
        &r::conv_fw(&g, &get(&t, "conv1d_same.x"), &get(&t, "conv1d_same.w")),
        &get(&t, "conv1d_same.y"),
    );

    let g = ConvGeometry::for_transpose(
        1,
        4,
        6,
        &[5, 4],
        &[3, 3],
        &[1, 1],
        &[2, 2],
        &[1, 1],
        &[1, 0],
        2,
    );
    close(
        "convt2d.y",
        &r::conv_bw_data(&g, &get(&t, "convt2d.w"), &get(&t, "convt2d.x")),
        &get(&t, "convt2d.y"),
    );

    let pg = pool(&[9, 8], &[5, 5], &[3, 3], &[2, 2], &[1, 1], PoolKind::Max);
    let (y, idx) = r::pool_fw(&pg, &get(&t, "maxpool2d.x"));
    close("maxpool2d.y", &y, &get(&t, "maxpool2d.y"));
    close(
        "maxpool2d.idx",
        &idx.iter().map(|&v| v as f64).collect::<Vec<_>>(),
        &get(&t, "maxpool2d.idx"),
    );

    let mut pg = pool(&[11, 10], &[5, 4], &[3, 3], &[2, 2], &[1, 1], PoolKind::Max);
    pg.dilation = vec![2, 2];
    let (y, idx) = r::pool_fw(&pg, &get(&t, "maxpool2d_dil.x"));
    close("maxpool2d_dil.y", &y, &get(&t, "maxpool2d_dil.y"));
    close(
        "maxpool2d_dil.idx",
        &idx.iter().map(|&v| v as f64).collect::<Vec<_>>(),
        &get(&t, "maxpool2d_dil.idx"),
    );

    let mut pg = pool(&[9, 8], &[5, 5], &[3, 3], &[2, 2], &[1, 1], PoolKind::Avg);
    pg.count_include_pad = false;
    close(
        "avgpool2d.y",
        &r::pool_fw(&pg, &get(&t, "avgpool2d.x")).0,
        &get(&t, "avgpool2d.y"),
    );
    pg.count_include_pad = true;
    pg.divisor_override = Some(5);
    close(
        "avgpool2d.y_div",
        &r::pool_fw(&pg, &get(&t, "avgpool2d.x")).0,
        &get(&t, "avgpool2d.y_div"),
    );

    let x = get(&t, "adaptive2d.x");
    let pa = pool(
        &[7, 9],
        &[3, 4],
        &[1, 1],
        &[1, 1],
        &[0, 0],
        PoolKind::AdaptiveAvg,
    );
    close(
        "adaptive2d.avg",
        &r::pool_fw(&pa, &x).0,
        &get(&t, "adaptive2d.avg"),
    );
    let pm = pool(
        &[7, 9],
        &[3, 4],
        &[1, 1],
        &[1, 1],
        &[0, 0],
        PoolKind::AdaptiveMax,
    );
    let (y, idx) = r::pool_fw(&pm, &x);
    close("adaptive2d.max", &y, &get(&t, "adaptive2d.max"));
    close(
        "adaptive2d.idx",
        &idx.iter().map(|&v| v as f64).collect::<Vec<_>>(),
        &get(&t, "adaptive2d.idx"),
    );

    let pl = pool(&[10], &[5], &[3], &[2], &[0], PoolKind::Lp(2.0));
    close(
        "lppool1d.y",
        &r::pool_fw(&pl, &get(&t, "lppool1d.x")).0,
        &get(&t, "lppool1d.y"),
    );
}

/// The cases whose plans run through a padded copy (`conv/staging.rs`):
/// `padding='same'` with even kernels in 2-D, forward and gradients, and a
/// transposed conv with `output_padding` past its stride.
#[test]
fn padded_copy_cases_match_pytorch_goldens() {
    let bytes = golden::bytes("conv");
    let t = SafeTensors::deserialize(&bytes).expect("safetensors");

    let mut g = geom(&[9, 10], &[4, 2], &[1, 1], &[1, 1], &[1, 3], (2, 3, 4, 1));
    g.padding_end = vec![2, 2];
    conv_with_gradients(&t, "conv2d_same", &g);

    // The transposed conv is the data gradient of `c`; its gradients are
    // c's forward and filter gradient.
    let c = ConvGeometry::for_transpose(1, 2, 3, &[5], &[3], &[1], &[1], &[3], &[2], 1);
    let (x, w, dy) = (
        get(&t, "convt1d_op.x"),
        get(&t, "convt1d_op.w"),
        get(&t, "convt1d_op.dy"),
    );
    close(
        "convt1d_op.y",
        &r::conv_bw_data(&c, &w, &x),
        &get(&t, "convt1d_op.y"),
    );
    close(
        "convt1d_op.dx",
        &r::conv_fw(&c, &dy, &w),
        &get(&t, "convt1d_op.dx"),
    );
    close(
        "convt1d_op.dw",
        &r::conv_bw_filter(&c, &dy, &x),
        &get(&t, "convt1d_op.dw"),
    );
}
