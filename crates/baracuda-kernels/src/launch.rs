//! What the plans of the hand-written kernels share when they launch: the
//! fixed-rank arrays of their parameter structs, the grid's x extent, and
//! the launch of a kernel that takes one parameter struct.

use baracuda_driver::{Function, LaunchArgs, LaunchConfig, Stream};
use baracuda_kernels_types::{Result, MAX_RANK};

/// `v` padded with zeros to [`MAX_RANK`] entries (the kernels' arrays).
pub(crate) fn padded<E: Copy + Default>(v: impl Iterator<Item = E>) -> [E; MAX_RANK] {
    let mut a = [E::default(); MAX_RANK];
    for (s, e) in a.iter_mut().zip(v) {
        *s = e;
    }
    a
}

/// Blocks in x for `blocks` of work: at least 1, at most `i32::MAX` (the
/// kernels loop over the rest).
pub(crate) fn grid_x(blocks: usize) -> u32 {
    blocks.clamp(1, i32::MAX as usize) as u32
}

/// Blocks of `f` (`threads` per block, no dynamic shared memory) resident
/// on `stream`'s device at once: the most a grid-stride loop launches.
pub(crate) fn resident_blocks(stream: &Stream, f: &Function, threads: u32) -> Result<u32> {
    let per_sm = f.max_active_blocks_per_sm(threads, 0)?.max(1);
    Ok(stream.context().device().sm_count.max(1) * per_sm)
}

/// Enqueue `f`, whose one parameter is the `#[repr(C)]` struct `p`, with
/// launch shape `cfg`.
///
/// # Safety
/// Every address in `p` must hold what the kernel reaches with `p` under
/// `cfg`.
pub(crate) unsafe fn launch_params<P: Copy + 'static>(
    stream: &Stream,
    f: &Function,
    cfg: LaunchConfig,
    p: P,
) -> Result<()> {
    let mut args = LaunchArgs::new();
    args.push(p)?;
    // SAFETY: forwarded from the caller's contract.
    unsafe { f.launch(stream, cfg, &mut args) }
}
