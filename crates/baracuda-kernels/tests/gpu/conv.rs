//! GPU tests of the conv family: its rows of the op table, run by the
//! shared table runner (`table.rs`). The family's files:
//!
//! - `conv/convolution.rs`: `conv1d`, `conv2d`, `conv3d` and
//!   `conv_transpose`: samples, device runs and references
//!   (`reference::conv`);
//! - `conv/pool.rs`: `max_pool`, `avg_pool`, `adaptive_avg_pool`,
//!   `adaptive_max_pool` and `lp_pool`;
//! - `conv/bad_inputs.rs`: every row's bad inputs and its check that the
//!   dtypes it does not claim are `Unsupported`;
//!
//! and here, what they share: dense tensors in either layout, outputs
//! between poisoned guards, and the family's tolerance.

/// `$body` with `N` and `R` bound to spatial rank `$rank` (1 to 3) and its
/// tensor rank; `$body` is a `Result<_, String>`.
macro_rules! by_rank {
    ($rank:expr, $n:ident, $r:ident => $body:expr) => {
        match $rank {
            1 => {
                const $n: usize = 1;
                const $r: usize = 3;
                $body
            }
            2 => {
                const $n: usize = 2;
                const $r: usize = 4;
                $body
            }
            3 => {
                const $n: usize = 3;
                const $r: usize = 5;
                $body
            }
            other => Err(format!("spatial rank {other}")),
        }
    };
}

/// `$body` (a `Result<(), String>`) for every spatial rank, `N` and `R`
/// bound; the first error.
macro_rules! every_rank {
    ($n:ident, $r:ident => $body:expr) => {
        (1..=3).try_for_each(|rank| by_rank!(rank, $n, $r => $body))
    };
}

mod bad_inputs;
mod convolution;
mod pool;

use baracuda_kernels::*;

use crate::harness::*;
use crate::table::{InputsFn, OpCase, ReferenceFn, Row, RunFn, Tensors};

/// The conv family's rows of the op table.
pub(crate) static ROWS: &[&dyn Row] = &[
    &convolution::conv_row::<1, 3>("conv1d"),
    &convolution::conv_row::<2, 4>("conv2d"),
    &convolution::conv_row::<3, 5>("conv3d"),
    &convolution::CONV_TRANSPOSE,
    &pool::row::<pool::MaxPool>("max_pool"),
    &pool::row::<pool::AvgPool>("avg_pool"),
    &pool::row::<pool::AdaptiveAvgPool>("adaptive_avg_pool"),
    &pool::row::<pool::AdaptiveMaxPool>("adaptive_max_pool"),
    &pool::row::<pool::LpPool>("lp_pool"),
];

/// The part of a row every op of the family shares: every float dtype,
/// the backward checked, the family's [`tolerance`]; and the op's `inputs`,
/// `run` and `reference`. A row sets its name, samples, bad inputs and
/// dtype check over it (left as here, the runner fails the row).
const fn family_row<S: 'static>(
    inputs: InputsFn<S>,
    run: RunFn<S>,
    reference: ReferenceFn<S>,
) -> OpCase<S> {
    OpCase {
        name: "conv family row",
        dtypes: FLOATS,
        backward: true,
        samples: |_| Vec::new(),
        inputs,
        run,
        reference,
        tolerance: tolerance::<S>,
        bad_inputs: || Ok(0),
        unsupported: |_| Err("the row checks no other dtype".into()),
    }
}

crate::table_tests!(
    ROWS;
    conv1d,
    conv2d,
    conv3d,
    conv_transpose,
    max_pool,
    avg_pool,
    adaptive_avg_pool,
    adaptive_max_pool,
    lp_pool,
);

// ---------------------------------------------------------------------------
// Dense tensors in either layout
// ---------------------------------------------------------------------------

/// The memory orders the samples cycle through.
const LAYOUTS: [ConvLayout; 2] = [ConvLayout::ChannelsFirst, ConvLayout::ChannelsLast];

/// `[n, c, spatial...]`.
fn shape(n: usize, c: usize, spatial: &[usize]) -> Vec<usize> {
    let mut v = vec![n, c];
    v.extend_from_slice(spatial);
    v
}

fn n_elems(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// Dense strides of a logical `[n, c, spatial...]` shape in `layout`.
fn layout_strides(shape: &[usize], layout: ConvLayout) -> Vec<usize> {
    match layout {
        ConvLayout::ChannelsFirst => contiguous(shape),
        ConvLayout::ChannelsLast => {
            let mut strides = vec![1; shape.len()];
            let mut acc = shape[1];
            for a in (2..shape.len()).rev() {
                strides[a] = acc;
                acc *= shape[a];
            }
            strides[0] = acc;
            strides
        }
    }
}

/// A dense view of `data` holding logical `shape` in `layout`.
fn dense_view<'a, T: Element, const R: usize>(
    data: DeviceSlice<'a, T>,
    shape: &[usize],
    layout: ConvLayout,
) -> TensorRef<'a, T, R> {
    let strides = layout_strides(shape, layout);
    TensorRef::new(data, arr(shape), arr(&strides)).expect("dense view")
}

/// An input on the device: logical `[n, c, spatial...]` values stored in
/// the layout's order.
struct Dense<T: Element> {
    buf: DeviceBuffer<T>,
    shape: Vec<usize>,
    layout: ConvLayout,
}

impl<T: Element> Dense<T> {
    fn upload(logical: &[f64], shape: &[usize], layout: ConvLayout) -> Self {
        let physical = scatter(
            logical,
            shape,
            &layout_strides(shape, layout),
            logical.len(),
        );
        Dense {
            buf: upload::<T>(&physical).0,
            shape: shape.to_vec(),
            layout,
        }
    }
    fn view<const R: usize>(&self) -> TensorRef<'_, T, R> {
        dense_view(self.buf.as_slice(), &self.shape, self.layout)
    }
}

/// An output on the device: NaN-poisoned, between poisoned guards.
struct Out<T: Element> {
    buf: Guarded<T>,
    shape: Vec<usize>,
    layout: ConvLayout,
}

impl<T: Element> Out<T> {
    fn new(shape: &[usize], layout: ConvLayout) -> Self {
        Out {
            buf: Guarded::new(n_elems(shape)),
            shape: shape.to_vec(),
            layout,
        }
    }
    fn view<const R: usize>(&self) -> TensorRef<'_, T, R> {
        dense_view(self.buf.slice(), &self.shape, self.layout)
    }
    fn view_mut<const R: usize>(&mut self) -> TensorMut<'_, T, R> {
        let (shape, layout) = (self.shape.clone(), self.layout);
        self.view_mut_as(&shape, layout)
    }
    /// A writable view of the output's elements as another `shape` or
    /// `layout` (for bad inputs).
    fn view_mut_as<const R: usize>(
        &mut self,
        shape: &[usize],
        layout: ConvLayout,
    ) -> TensorMut<'_, T, R> {
        let strides = layout_strides(shape, layout);
        TensorMut::new(self.buf.slice_mut(), arr(shape), arr(&strides)).expect("dense view")
    }
    /// The logical values; an error when a guard was written.
    fn result(&self, what: &str) -> Result<Vec<f64>, String> {
        let physical = self.buf.result(what)?;
        Ok(gather(
            &physical,
            0,
            &self.shape,
            &layout_strides(&self.shape, self.layout),
        ))
    }
}

impl<T: Element> Poisoned for Out<T> {
    fn untouched(&self, what: &str) -> Result<(), String> {
        self.buf.untouched(what)
    }
}

/// `buf` as a workspace.
fn borrowed(buf: &mut DeviceBuffer<u8>) -> Workspace<'_> {
    Workspace::Borrowed(buf.as_slice_mut())
}

/// The family's bound: relative L2 error at most `rtol`, and every
/// |error| at most `rtol |want| + max_frac max|want|` (f32: Winograd and
/// FFT algorithms, IEEE with FMA, reach ~4e-6 relative L2 over reductions
/// of thousands of terms, measured on H200). Argmax indices are exact.
fn tolerance<S>(
    kind: ElementKind,
    _: &S,
    tensor: &str,
    want: &[f64],
    _inputs: &Tensors,
) -> Tolerance {
    if tensor == "indices" {
        return Tolerance::EXACT;
    }
    let (rtol, max_frac) = match kind {
        ElementKind::F64 => (1e-11, 1e-10),
        ElementKind::F32 => (1e-5, 5e-5),
        ElementKind::F16 => (3e-3, 1.5e-2),
        _ => (2e-2, 6e-2),
    };
    Tolerance::of_max(rtol, max_frac, want)
}

/// Preferences no sample shows: TF32 allowed selects, and measured
/// autotuning's cache gives a second select the first one's choice.
#[test]
#[ignore = "needs a CUDA GPU"]
fn conv_preferences() {
    let d =
        Conv2dDescriptor::new(2, 16, 16, [12, 12], [3, 3], ElementKind::F32).with_padding([1, 1]);
    let tf32 = PlanPreference::default().with_allow_tf32(true);
    if let Err(e) = select::<Conv2dPlan<f32>>(&d, &tf32) {
        panic!("TF32 allowed: {e}");
    }
    let measured = PlanPreference::default().with_autotune(Autotune::Measured);
    let a = select::<Conv2dPlan<f32>>(&d, &measured).expect("measured");
    let b = select::<Conv2dPlan<f32>>(&d, &measured).expect("measured again");
    assert_eq!(a.sku().variant, b.sku().variant);
}
