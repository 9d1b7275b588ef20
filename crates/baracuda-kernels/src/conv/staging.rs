//! Padding cuDNN does not run, through a zero-padded copy in the workspace.
//!
//! A plan runs the three cuDNN directions of one convolution `C` (its own,
//! or for a transposed plan the one it is the data gradient of). Per
//! spatial axis `C` pads `pb` before its input and `pe` after, where
//! - a convolution has `pb = padding`, `pe = padding_end`;
//! - a transposed convolution with `output_padding` `q` has `pb = padding`
//!   and `pe = padding_end + min(q, stride - 1) - q`: the output extent
//!   then maps back onto the transposed input exactly (the `min` keeps
//!   `pe = padding_end` for `q < stride`, where cuDNN's floor absorbs `q`),
//!   and `pe` is negative when `q` exceeds `padding_end + stride - 1`
//!   (PyTorch allows `q < max(stride, dilation)`): the last `-pe` elements
//!   of the output lie outside every window and receive only the bias.
//!
//! cuDNN runs the symmetric padding `m = max(0, min(pb, pe))`, which needs
//! no copy when `pb == pe`. Otherwise `C`'s input is staged: an input is
//! copied with `pb - m` zeros before and `pe - m` after (cut off when
//! negative) into the workspace, and an input gradient is computed there
//! and cropped back. This is what PyTorch does for `padding='same'` with
//! an even kernel. cuDNN itself is never given unequal pre and post
//! padding: some of cuDNN 9.14's engines divide by zero (SIGFPE in
//! `EngineInterface::isSupported`) on such problems.

use baracuda_driver::{Function, LaunchArgs, LaunchConfig, Stream};
use baracuda_kernels_types::{DevPtr, DevPtrMut, Result};

use super::window::Window;
use super::ConvLayout;

/// Byte alignment of the staged copy's size in the workspace (the parts
/// after it stay aligned for every element type and for cuDNN).
const STAGE_ALIGN: usize = 256;

/// `C`'s input staged through the workspace: its extents as the caller
/// holds it and as cuDNN sees it.
#[derive(Clone, Debug)]
pub(crate) struct Staging<const N: usize> {
    batch: usize,
    channels: usize,
    /// `C`'s input extents as the plan's operand has them.
    input: [usize; N],
    /// The extents cuDNN sees: `input + pb + pe - 2m` per axis.
    padded: [usize; N],
    /// Zeros before the input in the padded copy (`pb - m`).
    offset: [usize; N],
    layout: ConvLayout,
    /// `pad_copy` of `kernels/conv/bias.cu`.
    copy: Function,
}

/// The geometry of `C`'s padding on `input` (module doc): the symmetric
/// padding cuDNN runs, the extents it sees and the offset of the input in
/// them. `padded == input` and `offset == 0` when nothing is staged.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct CudnnPadding<const N: usize> {
    pub pad: [usize; N],
    pub padded: [usize; N],
    pub offset: [usize; N],
}

impl<const N: usize> CudnnPadding<N> {
    /// The padding of `C` with `window` over `input`, for a transposed
    /// plan's `output_padding` (zeros for a convolution).
    pub(crate) fn of(window: &Window<N>, input: &[usize; N], output_padding: &[usize; N]) -> Self {
        let mut r = CudnnPadding {
            pad: [0; N],
            padded: *input,
            offset: [0; N],
        };
        for a in 0..N {
            let q = output_padding[a] as i64;
            let pb = window.padding[a] as i64;
            let pe = window.padding_end[a] as i64 + q.min(window.stride[a] as i64 - 1) - q;
            let m = pb.min(pe).max(0);
            r.pad[a] = m as usize;
            r.offset[a] = (pb - m) as usize;
            // At least the window span for every valid descriptor (C's
            // output is at least 1); the floor keeps 0 from cuDNN.
            r.padded[a] = (input[a] as i64 + pb + pe - 2 * m).max(1) as usize;
        }
        r
    }

    /// True when cuDNN runs `C`'s input as the caller holds it.
    pub(crate) fn is_direct(&self, input: &[usize; N]) -> bool {
        self.offset == [0; N] && self.padded == *input
    }

    /// The window cuDNN runs: `window` with the symmetric padding.
    pub(crate) fn window(&self, window: &Window<N>) -> Window<N> {
        window.with_padding(self.pad)
    }
}

/// What [`Staging::copy`] launches with; the layout of `PadGeometry` in
/// `kernels/conv/bias.cu`.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
struct PadGeometry {
    batch: i64,
    channels: i64,
    src: [i64; 3],
    dst: [i64; 3],
    off: [i64; 3],
    channels_last: i32,
}

/// `v` as the three axes of `PadGeometry`, led by `fill`.
fn three(v: &[usize], fill: i64) -> [i64; 3] {
    let mut o = [fill; 3];
    for (slot, &e) in o[3 - v.len()..].iter_mut().zip(v) {
        *slot = e as i64;
    }
    o
}

impl<const N: usize> Staging<N> {
    /// The staging of `C`'s input `[batch, channels, input...]` under
    /// `padding`, or None when cuDNN runs it directly.
    pub(crate) fn new(
        (batch, channels): (usize, usize),
        input: &[usize; N],
        padding: &CudnnPadding<N>,
        layout: ConvLayout,
        copy: impl FnOnce() -> Result<Function>,
    ) -> Result<Option<Self>> {
        if padding.is_direct(input) {
            return Ok(None);
        }
        Ok(Some(Staging {
            batch,
            channels,
            input: *input,
            padded: padding.padded,
            offset: padding.offset,
            layout,
            copy: copy()?,
        }))
    }

    /// Workspace bytes of the padded copy of `T` elements.
    pub(crate) fn bytes<T>(&self) -> usize {
        let n = self.batch * self.channels * self.padded.iter().product::<usize>();
        (n * std::mem::size_of::<T>()).next_multiple_of(STAGE_ALIGN)
    }

    /// Copy the caller's operand `src` into the padded buffer `dst`, zeros
    /// around it.
    pub(crate) fn pad<T: Copy + 'static>(
        &self,
        stream: &Stream,
        src: DevPtr<T>,
        dst: DevPtrMut<T>,
    ) -> Result<()> {
        let off = three(&self.offset, 0);
        self.copy(stream, src, dst, (&self.input, &self.padded), off)
    }

    /// Copy the padded buffer `src` back to the caller's operand `dst`
    /// (zeros where `dst` reaches past it).
    pub(crate) fn crop<T: Copy + 'static>(
        &self,
        stream: &Stream,
        src: DevPtr<T>,
        dst: DevPtrMut<T>,
    ) -> Result<()> {
        let off = three(&self.offset, 0).map(|o| -o);
        self.copy(stream, src, dst, (&self.padded, &self.input), off)
    }

    fn copy<T: Copy + 'static>(
        &self,
        stream: &Stream,
        src: DevPtr<T>,
        dst: DevPtrMut<T>,
        (from, to): (&[usize; N], &[usize; N]),
        off: [i64; 3],
    ) -> Result<()> {
        let g = PadGeometry {
            batch: self.batch as i64,
            channels: self.channels as i64,
            src: three(from, 1),
            dst: three(to, 1),
            off,
            channels_last: (self.layout == ConvLayout::ChannelsLast) as i32,
        };
        let n = self.batch * self.channels * to.iter().product::<usize>();
        if n == 0 {
            return Ok(());
        }
        let mut a = LaunchArgs::new();
        a.push(src)?.push(dst)?.push(g)?;
        // SAFETY: src holds batch x channels x `from` elements and dst
        // batch x channels x `to` in `layout` (a checked operand, or the
        // workspace part `bytes` sized); the kernel reads src only inside
        // `from` and writes dst only inside `to`; the arguments match
        // pad_copy's signature.
        unsafe {
            self.copy
                .launch(stream, elementwise_grid(n as u64), &mut a)
        }
    }
}

/// Grid of the elementwise kernels of `bias.cu` (grid-stride loops).
pub(crate) fn elementwise_grid(n: u64) -> LaunchConfig {
    let threads = 256u32;
    LaunchConfig::linear(n.div_ceil(threads as u64).min(65535 * 8) as u32, threads)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::conv::{conv_bw_data, conv_bw_filter, conv_fw, ConvGeometry};

    /// The host model of `pad_copy` over channels-first `[1, 1, ...]` data.
    fn copy(src: &[f64], from: &[usize], to: &[usize], off: &[i64]) -> Vec<f64> {
        let n: usize = to.iter().product();
        (0..n)
            .map(|i| {
                let mut rem = i;
                let mut idx = vec![0usize; to.len()];
                for a in (0..to.len()).rev() {
                    idx[a] = rem % to[a];
                    rem /= to[a];
                }
                let mut j = 0usize;
                for a in 0..to.len() {
                    let k = idx[a] as i64 - off[a];
                    if k < 0 || k >= from[a] as i64 {
                        return 0.0;
                    }
                    j = j * from[a] + k as usize;
                }
                src[j]
            })
            .collect()
    }

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(p, q)| (p - q).abs() < 1e-12)
    }

    fn values(n: usize, seed: u64) -> Vec<f64> {
        (0..n)
            .map(|i| (((i as u64 + 1) * 2654435761 + seed) % 1000) as f64 / 500.0 - 1.0)
            .collect()
    }

    #[test]
    fn pad_geometry_layout_is_c_compatible() {
        // bias.cu: 11 long longs and an int, padded to 96 bytes for the
        // 8-byte alignment, as nvcc lays the struct out.
        assert_eq!(std::mem::size_of::<PadGeometry>(), 96);
        assert_eq!(std::mem::align_of::<PadGeometry>(), 8);
        assert_eq!(three(&[4, 5], 1), [1, 4, 5]);
    }

    /// `g` (1-D; the conv of a transposed conv with `output_padding` `q`)
    /// as cuDNN runs it: the symmetric geometry over the padded extent,
    /// which must give `g`'s output; that extent and the input's offset.
    fn staged(g: &ConvGeometry, q: usize) -> (ConvGeometry, usize, i64) {
        let window = Window::new([g.filter[0]])
            .with_stride([g.stride[0]])
            .with_dilation([g.dilation[0]])
            .with_padding_ends([g.padding[0]], [g.padding_end[0]]);
        let cp = CudnnPadding::of(&window, &[g.input[0]], &[q]);
        let staged = ConvGeometry {
            input: cp.padded.to_vec(),
            padding: cp.pad.to_vec(),
            padding_end: cp.pad.to_vec(),
            output_padding: Vec::new(),
            ..g.clone()
        };
        assert_eq!(staged.output(), g.output(), "{g:?} {cp:?}");
        (staged, cp.padded[0], cp.offset[0] as i64)
    }

    /// Unequal padding as a padded copy and a symmetric convolution gives
    /// the reference's forward and both gradients.
    #[test]
    fn staged_convolution_matches_the_reference() {
        for (input, k, s, d, pb, pe) in [
            (9, 4, 1, 1, 1, 2),
            (9, 4, 1, 2, 3, 3),
            (10, 3, 2, 1, 0, 2),
            (7, 2, 1, 3, 2, 0),
            (6, 5, 3, 1, 4, 1),
        ] {
            let g = ConvGeometry {
                batch: 1,
                c_in: 1,
                c_out: 1,
                input: vec![input],
                filter: vec![k],
                padding: vec![pb],
                padding_end: vec![pe],
                stride: vec![s],
                dilation: vec![d],
                groups: 1,
                output_padding: Vec::new(),
            };
            let (staged, padded, off) = staged(&g, 0);
            let (x, w) = (values(input, 1), values(k, 2));
            let xp = copy(&x, &[input], &[padded], &[off]);
            let dy = values(g.output()[0], 3);
            assert!(close(&conv_fw(&staged, &xp, &w), &conv_fw(&g, &x, &w)));
            let dx = copy(&conv_bw_data(&staged, &w, &dy), &[padded], &[input], &[-off]);
            assert!(close(&dx, &conv_bw_data(&g, &w, &dy)), "{g:?}");
            assert!(close(
                &conv_bw_filter(&staged, &xp, &dy),
                &conv_bw_filter(&g, &x, &dy)
            ));
        }
    }

    /// A transposed convolution with `output_padding` up to the dilation
    /// runs as the staged data gradient of a symmetric convolution.
    #[test]
    fn staged_transpose_matches_the_reference() {
        for (inp, k, s, d, p, q) in [
            (5, 3, 1, 3, 0, 2),
            (5, 3, 1, 3, 1, 1),
            (4, 2, 2, 4, 1, 3),
            (6, 3, 2, 3, 2, 2),
            (5, 3, 2, 1, 1, 1),
        ] {
            let c = ConvGeometry::for_transpose(1, 1, 1, &[inp], &[k], &[p], &[s], &[d], &[q], 1);
            assert_eq!(c.output(), vec![inp]);
            let out = c.input[0];
            let (staged, padded, off) = staged(&c, q);
            let (x, w) = (values(inp, 1), values(k, 2));
            // forward: the data gradient into the padded buffer, cropped
            let y = copy(&conv_bw_data(&staged, &w, &x), &[padded], &[out], &[-off]);
            assert!(close(&y, &conv_bw_data(&c, &w, &x)), "{c:?}");
            // backward: dy padded, then C's forward and filter gradient
            let dy = values(out, 3);
            let dyp = copy(&dy, &[out], &[padded], &[off]);
            assert!(close(&conv_fw(&staged, &dyp, &w), &conv_fw(&c, &dy, &w)));
            assert!(close(
                &conv_bw_filter(&staged, &dyp, &x),
                &conv_bw_filter(&c, &dy, &x)
            ));
        }
    }
}
