//! GPU tests of the driver layer and of the Plan contract: graph capture of
//! several plans, JIT caching (compile once under concurrency, disk cache,
//! corrupt entries), buffers and events.

use std::sync::Arc;

use baracuda_driver::{jit_stats, ModuleSpec};
use baracuda_kernels::reference::elementwise as reference;
use baracuda_kernels::*;
use half::bf16;

use crate::harness::*;

/// Capture unary fw, binary fw and binary bw (with a split reduction and
/// its workspace) into one graph; replay it with fresh inputs copied in
/// between replays; every replay must match the reference.
#[test]
#[ignore = "needs a CUDA GPU"]
fn graph_capture_replays_several_plans() {
    let g = gpu();
    let s = Stream::new(&g.ctx).unwrap();
    let pref = PlanPreference::default();
    let (rows, cols) = (512usize, 1000usize);
    let gelu = UnaryPlan::<f32, 2>::select(
        &s,
        &UnaryDescriptor {
            op: UnaryOp::GeluTanh,
            element: ElementKind::F32,
            shape: [rows, cols],
        },
        &pref,
    )
    .unwrap();
    let bdesc = BinaryDescriptor {
        op: BinaryOp::Mul,
        element: ElementKind::F32,
        a_shape: [rows, cols],
        b_shape: [1, 1],
    };
    let mul = BinaryPlan::<f32, 2>::select(&s, &bdesc, &pref).unwrap();
    let bw_bytes = mul.bw_workspace_size(Grad::A | Grad::B);
    assert!(
        bw_bytes > 0,
        "the scalar gradient should use split partials"
    );

    let n = rows * cols;
    let mut x = DeviceBuffer::<f32>::zeros(&s, n).unwrap();
    let mut w = DeviceBuffer::<f32>::zeros(&s, 1).unwrap();
    let mut h = DeviceBuffer::<f32>::zeros(&s, n).unwrap();
    let mut y = DeviceBuffer::<f32>::zeros(&s, n).unwrap();
    let mut dy = DeviceBuffer::<f32>::zeros(&s, n).unwrap();
    let mut dh = DeviceBuffer::<f32>::zeros(&s, n).unwrap();
    let mut dw = DeviceBuffer::<f32>::zeros(&s, 1).unwrap();
    let mut ws = DeviceBuffer::<u8>::zeros(&s, bw_bytes).unwrap();
    s.synchronize().unwrap();

    s.begin_capture().unwrap();
    gelu.run(
        &s,
        Workspace::None,
        UnaryArgs {
            x: TensorRef::contiguous(x.as_slice(), [rows, cols]).unwrap(),
            y: TensorMut::contiguous(h.as_slice_mut(), [rows, cols]).unwrap(),
        },
    )
    .unwrap();
    mul.run(
        &s,
        Workspace::None,
        BinaryArgs {
            a: TensorRef::contiguous(h.as_slice(), [rows, cols]).unwrap(),
            b: TensorRef::contiguous(w.as_slice(), [1, 1]).unwrap(),
            out: TensorMut::contiguous(y.as_slice_mut(), [rows, cols]).unwrap(),
        },
    )
    .unwrap();
    mul.run_bw(
        &s,
        Workspace::Borrowed(ws.as_slice_mut()),
        BinaryBwArgs {
            a: TensorRef::contiguous(h.as_slice(), [rows, cols]).unwrap(),
            b: TensorRef::contiguous(w.as_slice(), [1, 1]).unwrap(),
            dy: TensorRef::contiguous(dy.as_slice(), [rows, cols]).unwrap(),
            da: Some(TensorMut::contiguous(dh.as_slice_mut(), [rows, cols]).unwrap()),
            db: Some(TensorMut::contiguous(dw.as_slice_mut(), [1, 1]).unwrap()),
        },
    )
    .unwrap();
    let graph = s.end_capture().unwrap();

    let mut rng = Rng::new(7);
    for replay in 0..3 {
        let (xv, xs) = round::<f32>(&rng.vec(n, -3.0, 3.0));
        let (wv, ws_) = round::<f32>(&rng.vec(1, 0.5, 2.0));
        let (dyv, dys) = round::<f32>(&rng.vec(n, -1.0, 1.0));
        x.write_at(&s, 0, &xv).unwrap();
        w.write_at(&s, 0, &wv).unwrap();
        dy.write_at(&s, 0, &dyv).unwrap();
        graph.launch().unwrap();
        s.synchronize().unwrap();
        let hs = reference::unary(UnaryOp::GeluTanh, &xs);
        let tol = pointwise_tol(ElementKind::F32);
        // h as the device computed it feeds the next plans
        let h_dev: Vec<f64> = h.to_host(&s).unwrap().iter().map(|v| *v as f64).collect();
        compare(&format!("replay {replay} gelu"), &h_dev, &hs, tol, None).unwrap();
        let y_want = reference::binary(BinaryOp::Mul, &h_dev, &[rows, cols], &ws_, &[1, 1]);
        compare(
            &format!("replay {replay} mul"),
            &y.to_host(&s)
                .unwrap()
                .iter()
                .map(|v| *v as f64)
                .collect::<Vec<_>>(),
            &y_want,
            tol,
            None,
        )
        .unwrap();
        let gr =
            reference::binary_backward(BinaryOp::Mul, &h_dev, &[rows, cols], &ws_, &[1, 1], &dys);
        let slack: Vec<f64> = gr
            .db_abs
            .iter()
            .map(|a| 2.0 * acc_roundoff(ElementKind::F32) * (n as f64).sqrt() * a)
            .collect();
        compare(
            &format!("replay {replay} dw"),
            &[dw.to_host(&s).unwrap()[0] as f64],
            &gr.db,
            tol,
            Some(&slack),
        )
        .unwrap();
        compare(
            &format!("replay {replay} dh"),
            &dh.to_host(&s)
                .unwrap()
                .iter()
                .map(|v| *v as f64)
                .collect::<Vec<_>>(),
            &gr.da,
            tol,
            None,
        )
        .unwrap();
    }
}

/// Eight threads asking for one new module at once compile it once; a new
/// context loads it from the disk cache; a corrupted entry is compiled again.
#[test]
#[ignore = "needs a CUDA GPU"]
fn jit_compiles_once_and_caches_on_disk() {
    let dir = std::env::temp_dir().join(format!("baracuda-jit-gpu-{}", std::process::id()));
    std::env::set_var("BARACUDA_CACHE_DIR", &dir);
    let dev = Device::get(0).unwrap();
    let ctx = Context::new(&dev).unwrap();
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let spec = baracuda_kernels::all_module_specs()[0]
        .clone()
        .define("BARACUDA_PROBE", nonce);
    let before = jit_stats();
    let modules: Vec<_> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..8)
            .map(|_| sc.spawn(|| ctx.module(&spec).unwrap()))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let after = jit_stats();
    assert_eq!(
        after.compiles - before.compiles,
        1,
        "eight concurrent first uses compile once"
    );
    assert!(modules.iter().all(|m| Arc::ptr_eq(m, &modules[0])));

    let ctx2 = Context::new(&dev).unwrap();
    let t0 = std::time::Instant::now();
    ctx2.module(&spec).unwrap();
    let warm = t0.elapsed();
    let s2 = jit_stats();
    assert_eq!(
        s2.compiles, after.compiles,
        "second context loads from disk"
    );
    assert_eq!(s2.disk_hits, after.disk_hits + 1);
    eprintln!("warm (disk-cached) module load: {warm:?}");

    for entry in std::fs::read_dir(&dir).unwrap().flatten() {
        let mut bytes = std::fs::read(entry.path()).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x5A;
        std::fs::write(entry.path(), bytes).unwrap();
    }
    let ctx3 = Context::new(&dev).unwrap();
    let m = ctx3.module(&spec).unwrap();
    assert_eq!(
        jit_stats().compiles,
        s2.compiles + 1,
        "a corrupt entry is compiled again"
    );
    m.function("unary_fw_contig_relu").unwrap();
    let _: ModuleSpec = spec;
    std::env::remove_var("BARACUDA_CACHE_DIR");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A module's register floor is what the driver allocates (the binary add
/// of every dtype): the floored kernel reports the floor as its register count and fits fewer blocks
/// per SM than the same kernel without it (10 against 16 blocks of 128
/// threads for the binary forward at 48 registers).
#[test]
#[ignore = "needs a CUDA GPU"]
fn register_floor_sets_the_allocation() {
    let g = gpu();
    let specs = baracuda_kernels::all_module_specs();
    let op0 = ("BARACUDA_OP".to_string(), "0".to_string());
    let mut checked = 0;
    for s in specs
        .iter()
        .filter(|s| !s.register_floors.is_empty() && s.defines.contains(&op0))
    {
        let mut plain = s.clone();
        plain.register_floors.clear();
        let (name, regs) = &s.register_floors[0];
        let floored = g.ctx.module(s).unwrap().function(name).unwrap();
        let unfloored = g.ctx.module(&plain).unwrap().function(name).unwrap();
        let what = format!("{name} {:?}", s.defines);
        assert_eq!(floored.num_regs().unwrap(), *regs, "{what}");
        assert!(unfloored.num_regs().unwrap() < *regs, "{what}");
        let (with, without) = (
            floored.max_active_blocks_per_sm(128, 0).unwrap(),
            unfloored.max_active_blocks_per_sm(128, 0).unwrap(),
        );
        // 65536 registers per SM, allocated per warp in units of 256.
        let want = 65536 / (regs.div_ceil(8) * 8 * 128);
        assert_eq!(with, want, "{what}: blocks per SM with the floor");
        assert!(without > with, "{what}: {without} blocks without");
        checked += 1;
    }
    assert_eq!(checked, 4, "the binary add of each dtype");
}

/// Buffers round-trip, partial reads and writes check bounds, events time.
#[test]
#[ignore = "needs a CUDA GPU"]
fn buffers_and_events() {
    let g = gpu();
    let s = &g.stream;
    let host: Vec<bf16> = (0..1000).map(|i| bf16::from_f32(i as f32 * 0.5)).collect();
    let mut b = DeviceBuffer::from_host(s, &host).unwrap();
    assert_eq!(b.to_host(s).unwrap(), host);
    assert!(matches!(
        b.write_at(s, 999, &host[..2]),
        Err(Error::ViewOutOfBounds { .. })
    ));
    assert!(matches!(
        b.read_at(s, 1001, 0),
        Err(Error::ViewOutOfBounds { .. })
    ));
    b.write_at(s, 10, &host[..3]).unwrap();
    assert_eq!(b.read_at(s, 10, 3).unwrap(), host[..3].to_vec());
    let mut c = DeviceBuffer::<bf16>::zeros(s, 1000).unwrap();
    c.copy_from(s, &b).unwrap();
    assert_eq!(c.to_host(s).unwrap(), b.to_host(s).unwrap());
    let short = DeviceBuffer::<bf16>::zeros(s, 3).unwrap();
    assert!(matches!(
        c.copy_from(s, &short),
        Err(Error::ShapeMismatch { .. })
    ));
    let mut p = PinnedBuffer::<bf16>::zeros(&g.ctx, 1000).unwrap();
    p.copy_from_device(s, &b).unwrap();
    s.synchronize().unwrap();
    assert_eq!(p.as_slice(), &b.to_host(s).unwrap()[..]);
    let (e0, e1) = (Event::new(&g.ctx).unwrap(), Event::new(&g.ctx).unwrap());
    e0.record(s).unwrap();
    c.copy_from(s, &b).unwrap();
    e1.record(s).unwrap();
    e1.synchronize().unwrap();
    let ms = e0.elapsed_ms(&e1).unwrap();
    assert!((0.0..1000.0).contains(&ms), "elapsed {ms} ms");
    assert!(matches!(Device::get(1 << 20), Err(Error::NoDevice { .. })));
}

/// Memory owned by cudarc (as candle holds it) runs through a plan without
/// a copy.
#[test]
#[ignore = "needs a CUDA GPU"]
fn cudarc_memory_runs_through_plans() {
    let g = gpu();
    let s = &g.stream;
    let host: Vec<f32> = Rng::new(11)
        .vec(4099, -3.0, 3.0)
        .iter()
        .map(|&v| v as f32)
        .collect();
    let cs = s.cudarc();
    let x = cs.clone_htod(&host).unwrap();
    let mut y = cs.alloc_zeros::<f32>(4099).unwrap();
    let desc = UnaryDescriptor {
        op: UnaryOp::Silu,
        element: ElementKind::F32,
        shape: [4099],
    };
    let plan = UnaryPlan::<f32, 1>::select(s, &desc, &PlanPreference::default()).unwrap();
    plan.run(
        s,
        Workspace::None,
        UnaryArgs {
            x: TensorRef::contiguous(baracuda_driver::cudarc_slice(&x, s), [4099]).unwrap(),
            y: TensorMut::contiguous(baracuda_driver::cudarc_slice_mut(&mut y, s), [4099]).unwrap(),
        },
    )
    .unwrap();
    let got: Vec<f64> = cs
        .clone_dtoh(&y)
        .unwrap()
        .iter()
        .map(|&v| v as f64)
        .collect();
    let xs: Vec<f64> = host.iter().map(|&v| v as f64).collect();
    compare(
        "silu through cudarc memory",
        &got,
        &reference::unary(UnaryOp::Silu, &xs),
        pointwise_tol(ElementKind::F32),
        None,
    )
    .unwrap();
}
