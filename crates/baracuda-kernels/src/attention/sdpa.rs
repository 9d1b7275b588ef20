//! Scaled dot-product attention through cuDNN's fused attention
//! ([`SdpaPlan`]): the forward as one cuDNN operation graph (two matmuls
//! around a masked softmax that also writes the row logsumexp), which
//! cuDNN's runtime fusion runs as one flash-attention kernel.

use core::marker::PhantomData;

use baracuda_driver::cudnn::graph::{
    ExecutionPlan, HeurMode, OpKind, OpParams, Operation, OperationGraph, PointwiseMode,
    PointwiseParams, Port, ReductionOp, Tensor, VariantPack,
};
use baracuda_driver::{CudnnHandle, Stream};
use baracuda_kernels_types::{
    BackendKind, Element, ElementKind, Error, Grad, Grads, KernelSku, PlanPreference,
    PrecisionGuarantee, Result, TensorMut, TensorRef, Workspace,
};
use std::sync::Arc;

use super::reference::CausalAlign;
use crate::checks::{byte_span, check_ctx, check_disjoint, check_element, check_shape, ByteSpan};
use crate::{Backward, Plan};

const OP: &str = "sdpa";

/// A scaled dot-product attention problem. Tensors are logical BHSD views
/// (`[batch, heads, seq, head_dim]`) with any strides whose last dim is
/// contiguous, so BSHD memory is a permuted view.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct SdpaDescriptor {
    /// Element type of Q, K, V, O (and the bias).
    pub element: ElementKind,
    /// Batch.
    pub batch: usize,
    /// Query heads (a multiple of `heads_kv`: GQA, MQA).
    pub heads_q: usize,
    /// Key/value heads.
    pub heads_kv: usize,
    /// Queries per sequence.
    pub seq_q: usize,
    /// Keys per sequence.
    pub seq_k: usize,
    /// Head dim of Q and K.
    pub head_dim: usize,
    /// Head dim of V and O.
    pub head_dim_v: usize,
    /// Logit scale; `None`: `1 / sqrt(head_dim)`.
    pub scale: Option<f64>,
    /// Causal mask and its alignment.
    pub causal: Option<CausalAlign>,
    /// An additive bias `[bias_batch, bias_heads, seq_q, seq_k]`, each of
    /// the two 1 (broadcast) or the problem's extent.
    pub bias: Option<(usize, usize)>,
    /// Also write the row logsumexp `[batch, heads_q, seq_q]` (f32), which
    /// the backward reads.
    pub save_lse: bool,
}

impl SdpaDescriptor {
    /// Plain attention, no mask or bias, scale `1 / sqrt(head_dim)`,
    /// saving the logsumexp.
    pub fn new(
        element: ElementKind,
        batch: usize,
        heads_q: usize,
        heads_kv: usize,
        seq_q: usize,
        seq_k: usize,
        head_dim: usize,
    ) -> Self {
        SdpaDescriptor {
            element,
            batch,
            heads_q,
            heads_kv,
            seq_q,
            seq_k,
            head_dim,
            head_dim_v: head_dim,
            scale: None,
            causal: None,
            bias: None,
            save_lse: true,
        }
    }
    /// Mask keys after the diagonal of `align`.
    pub fn with_causal(mut self, align: CausalAlign) -> Self {
        self.causal = Some(align);
        self
    }
    /// Scale the logits by `scale`.
    pub fn with_scale(mut self, scale: f64) -> Self {
        self.scale = Some(scale);
        self
    }
    /// Add a bias broadcast over batch (`batch` 1) and heads (`heads` 1).
    pub fn with_bias(mut self, batch: usize, heads: usize) -> Self {
        self.bias = Some((batch, heads));
        self
    }
    fn q_shape(&self) -> [usize; 4] {
        [self.batch, self.heads_q, self.seq_q, self.head_dim]
    }
    fn k_shape(&self) -> [usize; 4] {
        [self.batch, self.heads_kv, self.seq_k, self.head_dim]
    }
    fn v_shape(&self) -> [usize; 4] {
        [self.batch, self.heads_kv, self.seq_k, self.head_dim_v]
    }
    fn o_shape(&self) -> [usize; 4] {
        [self.batch, self.heads_q, self.seq_q, self.head_dim_v]
    }
    fn bias_shape(&self) -> Option<[usize; 4]> {
        self.bias.map(|(b, h)| [b, h, self.seq_q, self.seq_k])
    }
    fn scale(&self) -> f64 {
        self.scale
            .unwrap_or(1.0 / (self.head_dim as f64).sqrt())
    }
}

/// The tensors of the forward.
#[derive(Debug)]
pub struct SdpaArgs<'a, T> {
    /// `[batch, heads_q, seq_q, head_dim]`.
    pub q: TensorRef<'a, T, 4>,
    /// `[batch, heads_kv, seq_k, head_dim]`.
    pub k: TensorRef<'a, T, 4>,
    /// `[batch, heads_kv, seq_k, head_dim_v]`.
    pub v: TensorRef<'a, T, 4>,
    /// The additive bias, when the descriptor has one.
    pub bias: Option<TensorRef<'a, T, 4>>,
    /// `[batch, heads_q, seq_q, head_dim_v]`, written.
    pub o: TensorMut<'a, T, 4>,
    /// `[batch, heads_q, seq_q]` f32, written, when the descriptor saves it.
    pub lse: Option<TensorMut<'a, f32, 3>>,
}

/// The tensors of the backward.
#[derive(Debug)]
pub struct SdpaBwArgs<'a, T> {
    /// The forward's Q, K, V and output O.
    pub q: TensorRef<'a, T, 4>,
    /// As in [`SdpaArgs`].
    pub k: TensorRef<'a, T, 4>,
    /// As in [`SdpaArgs`].
    pub v: TensorRef<'a, T, 4>,
    /// The forward's output, `[batch, heads_q, seq_q, head_dim_v]`.
    pub o: TensorRef<'a, T, 4>,
    /// The forward's logsumexp, `[batch, heads_q, seq_q]` f32.
    pub lse: TensorRef<'a, f32, 3>,
    /// The bias of the forward, when the descriptor has one.
    pub bias: Option<TensorRef<'a, T, 4>>,
    /// Gradient of the output, O's shape.
    pub d_o: TensorRef<'a, T, 4>,
    /// `dq`, Q's shape, written when given.
    pub dq: Option<TensorMut<'a, T, 4>>,
    /// `dk`, K's shape (summed over the query heads of each KV head).
    pub dk: Option<TensorMut<'a, T, 4>>,
    /// `dv`, V's shape (likewise).
    pub dv: Option<TensorMut<'a, T, 4>>,
}

/// Scaled dot-product attention, forward and backward, through cuDNN's
/// fused attention.
///
/// # Math
/// `o_i = sum_j softmax_j(scale * q_i . k_j + bias_ij, masked) v_j` per
/// query head (query head `h` reads KV head `h / (heads_q / heads_kv)`),
/// and `lse_i = log sum_j exp(logit_ij)`; as `reference::attention::sdpa`.
///
/// # Dtypes
/// f16 and bf16 (f32 softmax and accumulation); others `Unsupported`.
///
/// # Errors
/// `select`: `DtypeMismatch`, `Unsupported` (dtype, a head dim past 256 or
/// not a multiple of 8, no cuDNN engine for the graph), `InvalidDescriptor`
/// (zero extents, heads not a multiple, a bias extent that does not
/// broadcast, a non-finite scale), `PreferenceRejected`, `LibraryNotFound`
/// (cuDNN). `run`: `ShapeMismatch`, `ContextMismatch`, `InvalidArgument`
/// (a last dim that is not contiguous, a bias or logsumexp given or missing
/// against the descriptor, an output overlapping an input),
/// `WorkspaceTooSmall`. `run_bw`: as `run`, and `Unsupported` when cuDNN
/// has no engine for the backward graph (or the plan saves no logsumexp).
/// The backward computes all three gradients in one graph; a gradient not
/// asked for goes to workspace scratch (`bw_workspace_size` counts it).
pub struct SdpaPlan<T: Element> {
    desc: SdpaDescriptor,
    sku: KernelSku,
    graph: ExecutionPlan,
    /// Strides (BHSD order) of Q, K, V, O and the bias the graphs were
    /// built for; dO, dQ, dK and dV take those of O, Q, K and V.
    strides: [[usize; 4]; 5],
    /// The backward graph's plan, or why there is none.
    bw: std::result::Result<ExecutionPlan, String>,
    /// By-value scalars the graph reads (addresses stay put: boxed).
    scalars: Box<Scalars>,
    handle: Arc<CudnnHandle>,
    _t: PhantomData<T>,
}

/// The by-value scalars of the graphs.
#[repr(C)]
struct Scalars {
    scale: f32,
    neg_inf: f32,
    seq_k: i32,
    seq_q: i32,
    one: f32,
}

/// Uids of the graph's tensors that bind memory.
mod uid {
    pub const Q: i64 = 1;
    pub const K: i64 = 2;
    pub const V: i64 = 3;
    pub const O: i64 = 4;
    pub const LSE: i64 = 5;
    pub const BIAS: i64 = 6;
    pub const SCALE: i64 = 7;
    pub const NEG_INF: i64 = 8;
    pub const SEQ_K: i64 = 9;
    pub const DO: i64 = 10;
    pub const DQ: i64 = 11;
    pub const DK: i64 = 12;
    pub const DV: i64 = 13;
    pub const ONE: i64 = 14;
    pub const ROW_SUM: i64 = 15;
    pub const DQ_ACC: i64 = 16;
    pub const SEQ_Q: i64 = 17;
}

/// `InvalidDescriptor` of this op.
fn invalid(field: &'static str, value: String, reason: &str) -> Error {
    crate::checks::invalid_descriptor(OP, field, value, reason)
}

/// The checks `select` runs before it touches the GPU.
pub(crate) fn validate<T: Element>(desc: &SdpaDescriptor) -> Result<()> {
    check_element::<T>(OP, "desc.element", desc.element)?;
    if !matches!(T::KIND, ElementKind::F16 | ElementKind::Bf16) {
        return Err(Error::Unsupported {
            op: OP,
            what: format!("dtype {}; cuDNN's fused attention takes f16 and bf16", T::KIND),
        });
    }
    let d = desc;
    let extents = [
        ("batch", d.batch),
        ("heads_q", d.heads_q),
        ("heads_kv", d.heads_kv),
        ("seq_q", d.seq_q),
        ("seq_k", d.seq_k),
        ("head_dim", d.head_dim),
        ("head_dim_v", d.head_dim_v),
    ];
    if let Some((field, _)) = extents.iter().find(|(_, v)| *v == 0) {
        return Err(invalid(field, "0".into(), "must be at least 1"));
    }
    if d.heads_q % d.heads_kv != 0 {
        return Err(invalid(
            "heads_q",
            d.heads_q.to_string(),
            &format!("must be a multiple of heads_kv {}", d.heads_kv),
        ));
    }
    for (field, v) in [("head_dim", d.head_dim), ("head_dim_v", d.head_dim_v)] {
        if v > 256 || v % 8 != 0 {
            return Err(Error::Unsupported {
                op: OP,
                what: format!("{field} {v}; cuDNN's fused attention takes multiples of 8 up to 256"),
            });
        }
    }
    if let Some((b, h)) = d.bias {
        if !(b == 1 || b == d.batch) || !(h == 1 || h == d.heads_q) {
            return Err(invalid(
                "bias",
                format!("({b}, {h})"),
                &format!("extents broadcast: 1 or {} batch, 1 or {} heads", d.batch, d.heads_q),
            ));
        }
    }
    if !(d.scale().is_finite() && d.scale() > 0.0) {
        return Err(invalid("scale", d.scale().to_string(), "must be finite and > 0"));
    }
    Ok(())
}

/// Row-major strides of `dims`.
fn dense(dims: &[i64]) -> Vec<i64> {
    let mut s = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

fn i64s(v: &[usize]) -> Vec<i64> {
    v.iter().map(|&x| x as i64).collect()
}

/// Builds the forward graph: tensors and operations in order.
struct GraphBuilder {
    next_uid: i64,
    ops: Vec<Operation>,
}

impl GraphBuilder {
    /// A virtual tensor of `dims` (row-major) in `dtype`.
    fn virt(&mut self, dims: &[i64], dtype: ElementKind) -> Result<Tensor> {
        self.next_uid += 1;
        Tensor::builder(self.next_uid, dtype)
            .dims(dims)
            .strides(&dense(dims))
            .is_virtual(true)
            .build()
    }
    /// `y = mode(x, b)` (`t`: a select's condition), computing in
    /// `compute`; `axis` for index generation and the index arithmetic.
    #[allow(clippy::too_many_arguments)]
    fn pointwise(
        &mut self,
        mode: PointwiseMode,
        compute: ElementKind,
        x: &Tensor,
        b: Option<&Tensor>,
        t: Option<&Tensor>,
        y: &Tensor,
        axis: Option<i64>,
    ) -> Result<()> {
        let mut params = PointwiseParams::new(mode, compute);
        params.axis = axis;
        let params = OpParams::pointwise(&params)?;
        let mut op = Operation::builder(OpKind::Pointwise)
            .params(&params)
            .tensor(Port::X, x);
        if let Some(b) = b {
            op = op.tensor(Port::B, b);
        }
        if let Some(t) = t {
            op = op.tensor(Port::T, t);
        }
        self.ops.push(op.tensor(Port::Y, y).build()?);
        Ok(())
    }
    fn matmul(&mut self, a: &Tensor, b: &Tensor, c: &Tensor) -> Result<()> {
        let params = OpParams::matmul(ElementKind::F32)?;
        self.ops.push(
            Operation::builder(OpKind::Matmul)
                .params(&params)
                .tensor(Port::A, a)
                .tensor(Port::B, b)
                .tensor(Port::C, c)
                .build()?,
        );
        Ok(())
    }
    /// `y`: `x` seen with `y`'s dims and strides.
    fn reshape(&mut self, x: &Tensor, y: &Tensor) -> Result<()> {
        self.ops.push(
            Operation::builder(OpKind::Reshape)
                .tensor(Port::X, x)
                .tensor(Port::Y, y)
                .build()?,
        );
        Ok(())
    }
    /// A virtual tensor of `dims` with `strides`.
    fn virt_strided(&mut self, dims: &[i64], strides: &[i64], dtype: ElementKind) -> Result<Tensor> {
        self.next_uid += 1;
        Tensor::builder(self.next_uid, dtype)
            .dims(dims)
            .strides(strides)
            .is_virtual(true)
            .build()
    }
    fn reduce(&mut self, op: ReductionOp, x: &Tensor, y: &Tensor) -> Result<()> {
        let params = OpParams::reduction(op, ElementKind::F32)?;
        self.ops.push(
            Operation::builder(OpKind::Reduction)
                .params(&params)
                .tensor(Port::X, x)
                .tensor(Port::Y, y)
                .build()?,
        );
        Ok(())
    }
}

/// A tensor of the caller's memory: `dims` and element `strides`.
fn io_tensor(uid: i64, e: ElementKind, dims: &[usize], strides: &[usize]) -> Result<Tensor> {
    Tensor::builder(uid, e)
        .dims(&i64s(dims))
        .strides(&i64s(strides))
        .alignment(16)
        .build()
}

/// A `[b, h, s, d]` tensor of the caller's memory seen as `[b, h, d, s]`
/// (the transposed operand cuDNN's attention matmuls take).
fn transposed(uid: i64, e: ElementKind, dims: &[usize; 4], s: &[usize; 4]) -> Result<Tensor> {
    io_tensor(uid, e, &[dims[0], dims[1], dims[3], dims[2]], &[s[0], s[1], s[3], s[2]])
}

/// A by-value host scalar `[1, 1, 1, 1]`.
fn scalar(uid: i64, dtype: ElementKind) -> Result<Tensor> {
    Tensor::builder(uid, dtype)
        .dims(&[1, 1, 1, 1])
        .strides(&[1, 1, 1, 1])
        .by_value(true)
        .build()
}

/// The logits of both graphs: `scale * Q K^T + bias`, minus `stats` (the
/// backward's logsumexp) when given, then the causal mask (-inf), as
/// cuDNN's fused attention matches them.
fn logits(
    g: &mut GraphBuilder,
    desc: &SdpaDescriptor,
    q: &Tensor,
    kt: &Tensor,
    bias_strides: &[usize; 4],
    stats: Option<&Tensor>,
) -> Result<Tensor> {
    let f32_ = ElementKind::F32;
    let scores = [
        desc.batch as i64,
        desc.heads_q as i64,
        desc.seq_q as i64,
        desc.seq_k as i64,
    ];
    let s0 = g.virt(&scores, f32_)?;
    g.matmul(q, kt, &s0)?;
    let scale = scalar(uid::SCALE, f32_)?;
    let mut s = g.virt(&scores, f32_)?;
    g.pointwise(PointwiseMode::Mul, f32_, &s0, Some(&scale), None, &s, None)?;
    if let Some(shape) = desc.bias_shape() {
        let bias = io_tensor(uid::BIAS, desc.element, &shape, bias_strides)?;
        let sb = g.virt(&scores, f32_)?;
        g.pointwise(PointwiseMode::Add, f32_, &s, Some(&bias), None, &sb, None)?;
        s = sb;
    }
    if let Some(stats) = stats {
        let sub = g.virt(&scores, f32_)?;
        g.pointwise(PointwiseMode::Sub, f32_, &s, Some(stats), None, &sub, None)?;
        s = sub;
    }
    if let Some(align) = desc.causal {
        let row = g.virt(&scores, ElementKind::I32)?;
        g.pointwise(PointwiseMode::GenIndex, f32_, &s, None, None, &row, Some(2))?;
        let col = g.virt(&scores, ElementKind::I32)?;
        g.pointwise(PointwiseMode::GenIndex, f32_, &s, None, None, &col, Some(3))?;
        let row = if align == CausalAlign::BottomRight {
            // the diagonal moves right by sk - sq: row + sk - sq (index
            // arithmetic in int32 along the key axis, the form cuDNN's
            // fused attention matches)
            let i32_ = ElementKind::I32;
            let seq_k = scalar(uid::SEQ_K, i32_)?;
            let plus = g.virt(&scores, i32_)?;
            g.pointwise(PointwiseMode::Add, i32_, &row, Some(&seq_k), None, &plus, Some(3))?;
            let seq_q = scalar(uid::SEQ_Q, i32_)?;
            let shifted = g.virt(&scores, i32_)?;
            g.pointwise(PointwiseMode::Sub, i32_, &plus, Some(&seq_q), None, &shifted, Some(3))?;
            shifted
        } else {
            row
        };
        let keep = g.virt(&scores, ElementKind::Bool)?;
        let bool_ = ElementKind::Bool;
        g.pointwise(PointwiseMode::CmpGe, bool_, &row, Some(&col), None, &keep, None)?;
        let neg_inf = scalar(uid::NEG_INF, f32_)?;
        let masked = g.virt(&scores, f32_)?;
        g.pointwise(
            PointwiseMode::BinarySelect,
            f32_,
            &s,
            Some(&neg_inf),
            Some(&keep),
            &masked,
            None,
        )?;
        s = masked;
    }
    Ok(s)
}

/// The forward graph's operations for `desc`, with the strides of the
/// caller's views (BHSD order, last dim contiguous).
fn forward_ops(desc: &SdpaDescriptor, strides: &[[usize; 4]; 5]) -> Result<Vec<Operation>> {
    let e = desc.element;
    let f32_ = ElementKind::F32;
    let [qs, ks, vs, os, bs] = strides;
    let tensor = |uid, dims: &[usize], s: &[usize]| io_tensor(uid, e, dims, s);
    let (b, hq, sq, sk) = (
        desc.batch as i64,
        desc.heads_q as i64,
        desc.seq_q as i64,
        desc.seq_k as i64,
    );
    let q = tensor(uid::Q, &desc.q_shape(), qs)?;
    let kt = transposed(uid::K, e, &desc.k_shape(), ks)?;
    let v = tensor(uid::V, &desc.v_shape(), vs)?;
    let o = tensor(uid::O, &desc.o_shape(), os)?;
    let scores = [b, hq, sq, sk];
    let rows = [b, hq, sq, 1];
    let mut g = GraphBuilder {
        next_uid: 100,
        ops: Vec::new(),
    };
    let s = logits(&mut g, desc, &q, &kt, bs, None)?;
    // softmax with the logsumexp: m = max s, e = exp(s - m), l = sum e,
    // lse = m + log l, p = e / l
    let m = g.virt(&rows, f32_)?;
    g.reduce(ReductionOp::Max, &s, &m)?;
    let z = g.virt(&scores, f32_)?;
    g.pointwise(PointwiseMode::Sub, f32_, &s, Some(&m), None, &z, None)?;
    let ex = g.virt(&scores, f32_)?;
    g.pointwise(PointwiseMode::Exp, f32_, &z, None, None, &ex, None)?;
    let l = g.virt(&rows, f32_)?;
    g.reduce(ReductionOp::Add, &ex, &l)?;
    if desc.save_lse {
        let log_l = g.virt(&rows, f32_)?;
        g.pointwise(PointwiseMode::Log, f32_, &l, None, None, &log_l, None)?;
        let lse = Tensor::builder(uid::LSE, f32_)
            .dims(&rows)
            .strides(&[hq * sq, sq, 1, 1])
            .build()?;
        g.pointwise(PointwiseMode::Add, f32_, &m, Some(&log_l), None, &lse, None)?;
    }
    // P in the element type: the second matmul runs on tensor cores in it
    let p = g.virt(&scores, e)?;
    g.pointwise(PointwiseMode::Div, f32_, &ex, Some(&l), None, &p, None)?;
    g.matmul(&p, &v, &o)?;
    Ok(g.ops)
}


/// The first engine config of `ops` (heuristics mode A, then the fallback
/// list) whose plan finalizes within the workspace cap.
fn choose_plan(
    handle: &CudnnHandle,
    stream: &Stream,
    ops: &[Operation],
    pref: &PlanPreference,
) -> Result<ExecutionPlan> {
    let graph = OperationGraph::new(handle, stream, ops)?;
    let mut last = None;
    for mode in [HeurMode::A, HeurMode::Fallback] {
        let cfgs = match graph.heuristics(mode) {
            Ok(c) => c,
            Err(e) => {
                last = Some(e);
                continue;
            }
        };
        for cfg in cfgs {
            match ExecutionPlan::new(handle, stream, cfg) {
                Ok(p) if pref.max_workspace_bytes.is_none_or(|cap| p.workspace_bytes() <= cap) => {
                    return Ok(p);
                }
                Ok(_) => {}
                Err(e) => last = Some(e),
            }
        }
    }
    Err(Error::Unsupported {
        op: OP,
        what: format!(
            "no cuDNN engine runs this attention graph{}",
            last.map(|e| format!(" (last error: {e})")).unwrap_or_default()
        ),
    })
}

/// Bytes of the backward's f32 scratch in the workspace, after cuDNN's
/// own: the row sums `sum(dO * O)` and the dQ accumulator, each from a
/// 256-byte boundary.
fn bw_scratch(desc: &SdpaDescriptor) -> (usize, usize) {
    let rows = desc.batch * desc.heads_q * desc.seq_q;
    let align = |n: usize| n.next_multiple_of(256);
    (align(rows * 4), align(rows * desc.head_dim * 4))
}

/// The backward graph's operations (FlashAttention-2's, as cuDNN's fused
/// attention backward matches them): `D = sum(dO * O)` per row into
/// `ROW_SUM`; `P = exp(logits - lse)` recomputed; `dV = P^T dO`;
/// `dS = P (dO V^T - D) * scale`; `dK = dS^T Q`; `dQ = dS K` accumulated in
/// f32 (`DQ_ACC`) then converted. GQA sums the per-query-head dK and dV
/// over the heads sharing a KV head.
fn backward_ops(desc: &SdpaDescriptor, strides: &[[usize; 4]; 5]) -> Result<Vec<Operation>> {
    let e = desc.element;
    let f32_ = ElementKind::F32;
    let [qs, ks, vs, os, bs] = strides;
    let (b, hq, hk, sq, sk) = (
        desc.batch as i64,
        desc.heads_q as i64,
        desc.heads_kv as i64,
        desc.seq_q as i64,
        desc.seq_k as i64,
    );
    let (d, dv) = (desc.head_dim as i64, desc.head_dim_v as i64);
    let q = io_tensor(uid::Q, e, &desc.q_shape(), qs)?;
    let kt = transposed(uid::K, e, &desc.k_shape(), ks)?;
    let vt = transposed(uid::V, e, &desc.v_shape(), vs)?;
    let o = io_tensor(uid::O, e, &desc.o_shape(), os)?;
    let d_o = io_tensor(uid::DO, e, &desc.o_shape(), os)?;
    let dq = io_tensor(uid::DQ, e, &desc.q_shape(), qs)?;
    let dk = io_tensor(uid::DK, e, &desc.k_shape(), ks)?;
    let dvt = io_tensor(uid::DV, e, &desc.v_shape(), vs)?;
    let rows = [b, hq, sq, 1];
    let row_strides = [hq * sq, sq, 1, 1];
    let lse = Tensor::builder(uid::LSE, f32_)
        .dims(&rows)
        .strides(&row_strides)
        .build()?;
    let one = scalar(uid::ONE, f32_)?;
    let scale = scalar(uid::SCALE, f32_)?;
    let mut g = GraphBuilder {
        next_uid: 100,
        ops: Vec::new(),
    };
    // D = sum(dO * O) per row, kept in the workspace
    let prod = g.virt_strided(&[b, hq, sq, dv], &[hq * sq * dv, sq * dv, hq * dv, 1], f32_)?;
    g.pointwise(PointwiseMode::Mul, f32_, &d_o, Some(&o), None, &prod, None)?;
    let sum = g.virt_strided(&rows, &row_strides, f32_)?;
    g.reduce(ReductionOp::Add, &prod, &sum)?;
    let row_sum = Tensor::builder(uid::ROW_SUM, f32_)
        .dims(&rows)
        .strides(&row_strides)
        .build()?;
    g.pointwise(PointwiseMode::Mul, f32_, &sum, Some(&one), None, &row_sum, None)?;
    // P = exp(logits - lse)
    let s = logits(&mut g, desc, &q, &kt, bs, Some(&lse))?;
    let scores = [b, hq, sq, sk];
    let p = g.virt(&scores, f32_)?;
    g.pointwise(PointwiseMode::Exp, f32_, &s, None, None, &p, None)?;
    let scores_t = [b, hq, sk, sq];
    let scores_t_strides = [hq * sq * sk, sq * sk, 1, sk];
    // dV = P^T dO (summed over the query heads of each KV head)
    let pt = g.virt_strided(&scores_t, &scores_t_strides, e)?;
    g.reshape(&p, &pt)?;
    let per_head = |g: &mut GraphBuilder, a: &Tensor, bm: &Tensor, out: &Tensor, width: i64| {
        if hq == hk {
            return g.matmul(a, bm, out);
        }
        let dims = [b, hq, sk, width];
        let full = g.virt(&dims, e)?;
        g.matmul(a, bm, &full)?;
        g.reduce(ReductionOp::Add, &full, out)
    };
    per_head(&mut g, &pt, &d_o, &dvt, dv)?;
    // dS = P (dO V^T - D) * scale
    let dp = g.virt(&scores, f32_)?;
    g.matmul(&d_o, &vt, &dp)?;
    let dp_sub = g.virt(&scores, f32_)?;
    g.pointwise(PointwiseMode::Sub, f32_, &dp, Some(&row_sum), None, &dp_sub, None)?;
    let ds0 = g.virt(&scores, f32_)?;
    g.pointwise(PointwiseMode::Mul, f32_, &dp_sub, Some(&p), None, &ds0, None)?;
    let ds = g.virt(&scores, f32_)?;
    g.pointwise(PointwiseMode::Mul, f32_, &ds0, Some(&scale), None, &ds, None)?;
    // dK = dS^T Q
    let dst = g.virt_strided(&scores_t, &scores_t_strides, e)?;
    g.reshape(&ds, &dst)?;
    per_head(&mut g, &dst, &q, &dk, d)?;
    // dQ = dS K, accumulated in f32 in the workspace, then converted
    let [kb, kh, ksk, kd] = desc.k_shape();
    let k = g.virt_strided(&i64s(&[kb, kh, ksk, kd]), &i64s(ks), e)?;
    g.reshape(&kt, &k)?;
    let dq_acc = Tensor::builder(uid::DQ_ACC, f32_)
        .dims(&[b, hq, sq, d])
        .strides(&dense(&[b, hq, sq, d]))
        .build()?;
    g.matmul(&ds, &k, &dq_acc)?;
    g.pointwise(PointwiseMode::Identity, f32_, &dq_acc, None, None, &dq, None)?;
    Ok(g.ops)
}

impl<T: Element> SdpaPlan<T> {
    /// The strides `select` builds the graph for: dense BHSD (views with
    /// other strides need their own plan: `select_strided`).
    fn dense_strides(desc: &SdpaDescriptor) -> [[usize; 4]; 5] {
        let d = |s: [usize; 4]| {
            let v = dense(&i64s(&s));
            [v[0] as usize, v[1] as usize, v[2] as usize, v[3] as usize]
        };
        [
            d(desc.q_shape()),
            d(desc.k_shape()),
            d(desc.v_shape()),
            d(desc.o_shape()),
            d(desc.bias_shape().unwrap_or([1; 4])),
        ]
    }

    /// Select a plan for views with these strides (BHSD order: Q, K, V, O,
    /// bias), e.g. BSHD memory seen through permuted views.
    ///
    /// # Errors
    /// As `select`; `InvalidArgument` for a last-dim stride other than 1.
    pub fn select_strided(
        stream: &Stream,
        desc: &SdpaDescriptor,
        pref: &PlanPreference,
        strides: [[usize; 4]; 5],
    ) -> Result<Self> {
        validate::<T>(desc)?;
        pref.check_backend(OP, &[BackendKind::Cudnn])?;
        if let Some(i) = strides.iter().position(|s| s[3] != 1) {
            return Err(Error::InvalidArgument {
                op: OP,
                arg: ["q", "k", "v", "o", "bias"][i],
                reason: format!("strides {:?}: the head dim must be contiguous", strides[i]),
            });
        }
        let ctx = stream.context();
        let handle = ctx.handle::<CudnnHandle>()?;
        let ops = forward_ops(desc, &strides)?;
        let plan = choose_plan(&handle, stream, &ops, pref)?;
        let bw = if desc.save_lse {
            backward_ops(desc, &strides)
                .and_then(|ops| choose_plan(&handle, stream, &ops, pref))
                .map_err(|e| e.to_string())
        } else {
            Err("the plan saves no logsumexp (save_lse), which the backward reads".into())
        };
        Ok(SdpaPlan {
            desc: *desc,
            sku: KernelSku {
                op: "sdpa.fwd".into(),
                element: T::KIND,
                backend: BackendKind::Cudnn,
                arch: ctx.device().arch,
                variant: format!("cudnn fused attention, {}", plan.tag()),
                precision: PrecisionGuarantee::float(T::KIND, true),
            },
            graph: plan,
            strides,
            bw,
            scalars: Box::new(Scalars {
                scale: desc.scale() as f32,
                neg_inf: f32::NEG_INFINITY,
                seq_k: i32::try_from(desc.seq_k).unwrap_or(i32::MAX),
                seq_q: i32::try_from(desc.seq_q).unwrap_or(i32::MAX),
                one: 1.0,
            }),
            handle,
            _t: PhantomData,
        })
    }
}

impl<T: Element> Plan for SdpaPlan<T> {
    type Descriptor = SdpaDescriptor;
    type Args<'a> = SdpaArgs<'a, T>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        Self::select_strided(stream, desc, pref, Self::dense_strides(desc))
    }

    fn sku(&self) -> &KernelSku {
        &self.sku
    }

    fn workspace_size(&self) -> usize {
        self.graph.workspace_bytes()
    }

    fn run(&self, stream: &Stream, workspace: Workspace<'_>, args: Self::Args<'_>) -> Result<()> {
        let d = &self.desc;
        check_shape(OP, "q", &d.q_shape(), args.q.shape())?;
        check_shape(OP, "k", &d.k_shape(), args.k.shape())?;
        check_shape(OP, "v", &d.v_shape(), args.v.shape())?;
        check_shape(OP, "o", &d.o_shape(), args.o.shape())?;
        for (arg, ctx) in [
            ("q", args.q.data().ctx_id()),
            ("k", args.k.data().ctx_id()),
            ("v", args.v.data().ctx_id()),
            ("o", args.o.data().ctx_id()),
        ] {
            check_ctx(OP, arg, stream, ctx)?;
        }
        let mut inputs = vec![byte_span("q", &args.q), byte_span("k", &args.k), byte_span("v", &args.v)];
        let mut outputs = vec![byte_span("o", &args.o.as_const())];
        let mut binds: Vec<(i64, u64)> = vec![
            (uid::Q, args.q.data().ptr().addr()),
            (uid::K, args.k.data().ptr().addr()),
            (uid::V, args.v.data().ptr().addr()),
            (uid::O, args.o.data().ptr().addr()),
        ];
        let dense = self.strides;
        check_strides("q", args.q.strides(), &dense[0])?;
        check_strides("k", args.k.strides(), &dense[1])?;
        check_strides("v", args.v.strides(), &dense[2])?;
        check_strides("o", args.o.strides(), &dense[3])?;
        self.bind_bias(stream, &args.bias, &mut inputs, &mut binds)?;
        match (d.save_lse, &args.lse) {
            (true, Some(lse)) => {
                check_shape(OP, "lse", &[d.batch, d.heads_q, d.seq_q], lse.shape())?;
                check_ctx(OP, "lse", stream, lse.data().ctx_id())?;
                let dense_lse = [d.heads_q * d.seq_q, d.seq_q, 1];
                if *lse.strides() != dense_lse {
                    return Err(Error::InvalidArgument {
                        op: OP,
                        arg: "lse",
                        reason: format!("strides {:?}; the logsumexp is dense", lse.strides()),
                    });
                }
                outputs.push(byte_span("lse", &lse.as_const()));
                binds.push((uid::LSE, lse.data().ptr().addr()));
            }
            (false, None) => {}
            (want, _) => {
                return Err(Error::InvalidArgument {
                    op: OP,
                    arg: "lse",
                    reason: if want {
                        "the descriptor saves the logsumexp; pass lse".into()
                    } else {
                        "the descriptor does not save the logsumexp".into()
                    },
                })
            }
        }
        check_disjoint(OP, &outputs, &inputs)?;
        let ws = workspace.check_ptr(OP, self.workspace_size(), stream.context().id())?;
        binds.extend(self.scalar_binds(false));
        if d.batch * d.heads_q * d.seq_q == 0 {
            return Ok(());
        }
        let pack = VariantPack::new(&binds, ws.addr())?;
        // SAFETY: every view was bounds-checked at construction and against
        // the plan's shapes and strides (those the graph was built for);
        // the outputs overlap no input; the workspace was checked.
        unsafe { self.graph.execute(&self.handle, stream, &pack) }
    }
}

impl<T: Element> SdpaPlan<T> {
    /// The descriptor.
    pub fn descriptor(&self) -> &SdpaDescriptor {
        &self.desc
    }
}

impl<T: Element> SdpaPlan<T> {
    /// The backward's plan, or `Unsupported` with the reason.
    fn bw_plan(&self) -> Result<&ExecutionPlan> {
        self.bw.as_ref().map_err(|why| Error::Unsupported {
            op: OP,
            what: format!("the backward: {why}"),
        })
    }
    /// Elements of Q, K and V.
    fn qkv_elems(&self) -> [usize; 3] {
        let d = &self.desc;
        [
            d.q_shape().iter().product(),
            d.k_shape().iter().product(),
            d.v_shape().iter().product(),
        ]
    }
    /// Check the bias against the descriptor (given exactly when it has
    /// one) and bind it.
    fn bind_bias(
        &self,
        stream: &Stream,
        bias: &Option<TensorRef<'_, T, 4>>,
        inputs: &mut Vec<ByteSpan>,
        binds: &mut Vec<(i64, u64)>,
    ) -> Result<()> {
        match (self.desc.bias_shape(), bias) {
            (Some(shape), Some(bias)) => {
                check_shape(OP, "bias", &shape, bias.shape())?;
                check_ctx(OP, "bias", stream, bias.data().ctx_id())?;
                check_strides("bias", bias.strides(), &self.strides[4])?;
                inputs.push(byte_span("bias", bias));
                binds.push((uid::BIAS, bias.data().ptr().addr()));
                Ok(())
            }
            (None, None) => Ok(()),
            (want, _) => Err(Error::InvalidArgument {
                op: OP,
                arg: "bias",
                reason: if want.is_some() {
                    "the descriptor adds a bias; pass it".into()
                } else {
                    "the descriptor has no bias".into()
                },
            }),
        }
    }
    /// Host addresses of the by-value scalars of the forward graph, or
    /// of the `backward` one.
    fn scalar_binds(&self, backward: bool) -> Vec<(i64, u64)> {
        let sc: &Scalars = &self.scalars;
        let mut v = vec![(uid::SCALE, &sc.scale as *const f32 as u64)];
        if backward {
            v.push((uid::ONE, &sc.one as *const f32 as u64));
        }
        if self.desc.causal.is_some() {
            v.push((uid::NEG_INF, &sc.neg_inf as *const f32 as u64));
        }
        if self.desc.causal == Some(CausalAlign::BottomRight) {
            v.push((uid::SEQ_K, &sc.seq_k as *const i32 as u64));
            v.push((uid::SEQ_Q, &sc.seq_q as *const i32 as u64));
        }
        v
    }
}

impl<T: Element> Backward for SdpaPlan<T> {
    type BwArgs<'a> = SdpaBwArgs<'a, T>;

    fn grads(&self) -> Grads {
        Grad::Q | Grad::K | Grad::V
    }

    fn bw_workspace_size(&self, wants: Grads) -> usize {
        let Ok(plan) = self.bw_plan() else {
            return 0;
        };
        let (rows, acc) = bw_scratch(&self.desc);
        let scratch: usize = [Grad::Q, Grad::K, Grad::V]
            .iter()
            .zip(self.qkv_elems())
            .filter(|(g, _)| !wants.contains(**g))
            .map(|(_, n)| (n * core::mem::size_of::<T>()).next_multiple_of(256))
            .sum();
        plan.workspace_bytes().next_multiple_of(256) + rows + acc + scratch
    }

    fn run_bw(
        &self,
        stream: &Stream,
        workspace: Workspace<'_>,
        args: Self::BwArgs<'_>,
    ) -> Result<()> {
        let plan = self.bw_plan()?;
        let d = &self.desc;
        let dense = self.strides;
        let reads = [
            ("q", &args.q, d.q_shape(), dense[0]),
            ("k", &args.k, d.k_shape(), dense[1]),
            ("v", &args.v, d.v_shape(), dense[2]),
            ("o", &args.o, d.o_shape(), dense[3]),
            ("d_o", &args.d_o, d.o_shape(), dense[3]),
        ];
        let mut inputs = Vec::new();
        for (arg, view, shape, strides) in reads {
            check_shape(OP, arg, &shape, view.shape())?;
            check_ctx(OP, arg, stream, view.data().ctx_id())?;
            check_strides(arg, view.strides(), &strides)?;
            inputs.push(byte_span(arg, view));
        }
        let lse_shape = [d.batch, d.heads_q, d.seq_q];
        check_shape(OP, "lse", &lse_shape, args.lse.shape())?;
        check_ctx(OP, "lse", stream, args.lse.data().ctx_id())?;
        check_strides("lse", args.lse.strides(), &[d.heads_q * d.seq_q, d.seq_q, 1])?;
        inputs.push(byte_span("lse", &args.lse));
        let mut binds: Vec<(i64, u64)> = vec![
            (uid::Q, args.q.data().ptr().addr()),
            (uid::K, args.k.data().ptr().addr()),
            (uid::V, args.v.data().ptr().addr()),
            (uid::O, args.o.data().ptr().addr()),
            (uid::DO, args.d_o.data().ptr().addr()),
            (uid::LSE, args.lse.data().ptr().addr()),
        ];
        self.bind_bias(stream, &args.bias, &mut inputs, &mut binds)?;
        let grads = [
            (Grad::Q, "dq", &args.dq, d.q_shape(), dense[0], uid::DQ),
            (Grad::K, "dk", &args.dk, d.k_shape(), dense[1], uid::DK),
            (Grad::V, "dv", &args.dv, d.v_shape(), dense[2], uid::DV),
        ];
        let mut outputs = Vec::new();
        let mut wants = Grads::default();
        for (g, arg, view, shape, strides, _) in &grads {
            if let Some(view) = view {
                check_shape(OP, arg, shape, view.shape())?;
                check_ctx(OP, arg, stream, view.data().ctx_id())?;
                check_strides(arg, view.strides(), strides)?;
                outputs.push(byte_span(arg, &view.as_const()));
                wants = wants | *g;
            }
        }
        check_disjoint(OP, &outputs, &inputs)?;
        let need = self.bw_workspace_size(wants);
        let base = workspace.check_ptr(OP, need, stream.context().id())?.addr();
        let (rows, acc) = bw_scratch(d);
        let mut at = base + plan.workspace_bytes().next_multiple_of(256) as u64;
        binds.push((uid::ROW_SUM, at));
        at += rows as u64;
        binds.push((uid::DQ_ACC, at));
        at += acc as u64;
        for ((_, _, view, _, _, id), n) in grads.iter().zip(self.qkv_elems()) {
            match view {
                Some(v) => binds.push((*id, v.data().ptr().addr())),
                None => {
                    binds.push((*id, at));
                    at += (n * core::mem::size_of::<T>()).next_multiple_of(256) as u64;
                }
            }
        }
        binds.extend(self.scalar_binds(true));
        if d.batch * d.heads_q * d.seq_q == 0 || wants.is_empty() {
            return Ok(());
        }
        let pack = VariantPack::new(&binds, base)?;
        // SAFETY: every view was bounds-checked at construction and
        // against the plan's shapes and dense strides (those the graph was
        // built for); the gradients overlap no input; the scratch regions
        // lie inside the checked workspace after cuDNN's own.
        unsafe { plan.execute(&self.handle, stream, &pack) }
    }
}

/// `InvalidArgument` unless a view has the strides the graph was built for.
fn check_strides(arg: &'static str, got: &[usize], want: &[usize]) -> Result<()> {
    if got != want {
        return Err(Error::InvalidArgument {
            op: OP,
            arg,
            reason: format!("strides {got:?}; the plan was built for {want:?} (select_strided)"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_are_checked_before_the_gpu() {
        let d = SdpaDescriptor::new(ElementKind::Bf16, 2, 8, 2, 128, 128, 64);
        assert!(validate::<half::bf16>(&d).is_ok());
        let field = |r: Result<()>| match r {
            Err(Error::InvalidDescriptor { field, .. }) => field,
            other => panic!("expected InvalidDescriptor, got {other:?}"),
        };
        assert_eq!(field(validate::<half::bf16>(&SdpaDescriptor { heads_kv: 3, ..d })), "heads_q");
        assert_eq!(field(validate::<half::bf16>(&SdpaDescriptor { seq_k: 0, ..d })), "seq_k");
        assert_eq!(field(validate::<half::bf16>(&d.with_bias(3, 1))), "bias");
        assert_eq!(field(validate::<half::bf16>(&d.with_scale(f64::NAN))), "scale");
        assert!(matches!(
            validate::<half::bf16>(&SdpaDescriptor { head_dim: 260, ..d }),
            Err(Error::Unsupported { .. })
        ));
        let f32_desc = SdpaDescriptor {
            element: ElementKind::F32,
            ..d
        };
        assert!(matches!(validate::<f32>(&f32_desc), Err(Error::Unsupported { .. })));
        assert!(matches!(validate::<f32>(&d), Err(Error::DtypeMismatch { .. })));
    }
}
