//! f64 oracles of the attention family: scaled dot-product attention
//! forward (output and row logsumexp) and backward (dQ, dK, dV, dbias) with
//! every feature the plans take (GQA, causal masks of both alignments,
//! sliding windows, additive and boolean masks that broadcast, ALiBi, logit
//! softcap, dropout from a given keep mask), packed variable-length
//! batches, paged KV caches, rotary embeddings and the KV append.
//!
//! Dense tensors are row-major in BHSD order: Q `[b, hq, sq, d]`, K
//! `[b, hkv, sk, d]`, V `[b, hkv, sk, dv]`, O `[b, hq, sq, dv]`, the
//! logsumexp `[b, hq, sq]`.
//!
//! The logits of query `i` and key `j` in query head `h` (KV head
//! `h / (hq / hkv)`):
//!
//! ```text
//! s0 = scale * q_i . k_j
//! s1 = cap * tanh(s0 / cap)                  (softcap; s1 = s0 without)
//! s  = s1 + bias[b, h, i, j] - slope_h * |i + sk - sq - j|   (bias, ALiBi)
//! s  = -inf where the causal mask, the window or the boolean mask hides j
//! p  = softmax_j(s),  o_i = sum_j p_ij * keep_ij / (1 - p_drop) * v_j
//! lse_i = log sum_j exp(s_ij)
//! ```
//!
//! A row that sees no key has output 0 and logsumexp +inf (so
//! `exp(s - lse)` is 0 in a backward that recomputes `p`), and no gradient.

/// Which diagonal a causal mask keeps when `sq != sk`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CausalAlign {
    /// Key `j` is visible to query `i` when `j <= i` (PyTorch's
    /// `is_causal=True`).
    TopLeft,
    /// Key `j` is visible to query `i` when `j <= i + sk - sq`
    /// (FlashAttention's, PyTorch's `causal_lower_right`).
    BottomRight,
}

/// A per-`(batch, head)` tensor of `[sq, sk]` matrices that broadcasts:
/// `batch` is 1 or the problem's batch, `heads` 1 or its query heads.
#[derive(Clone, Debug, PartialEq)]
pub struct Broadcast<T> {
    /// Batch extent (1 broadcasts).
    pub batch: usize,
    /// Head extent (1 broadcasts).
    pub heads: usize,
    /// `[batch, heads, sq, sk]`, row-major.
    pub values: Vec<T>,
}

impl<T: Copy> Broadcast<T> {
    /// The element for batch `b`, query head `h`, query `i`, key `j`.
    fn at(&self, p: &Attention, b: usize, h: usize, i: usize, j: usize) -> T {
        let bb = if self.batch == 1 { 0 } else { b };
        let hh = if self.heads == 1 { 0 } else { h };
        self.values[((bb * self.heads + hh) * p.seq_q + i) * p.seq_k + j]
    }
}

/// One attention problem.
#[derive(Clone, Debug, PartialEq)]
pub struct Attention {
    /// Batch.
    pub batch: usize,
    /// Query heads (a multiple of `heads_kv`).
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
    /// Logit scale (1 / sqrt(head_dim) by default).
    pub scale: f64,
    /// Causal mask and its alignment.
    pub causal: Option<CausalAlign>,
    /// Sliding window `(left, right)`: key `j` is visible to query `i` when
    /// `i + sk - sq - left <= j <= i + sk - sq + right` (FlashAttention's,
    /// aligned bottom-right); `None` leaves that side open.
    pub window: (Option<usize>, Option<usize>),
    /// Logit softcap `cap`: `s1 = cap * tanh(s0 / cap)`.
    pub softcap: Option<f64>,
    /// ALiBi slope of each query head.
    pub alibi: Option<Vec<f64>>,
    /// Additive bias on the logits (a learned bias has a gradient).
    pub bias: Option<Broadcast<f64>>,
    /// Boolean mask: `true` keeps the key (PyTorch's boolean `attn_mask`).
    pub mask: Option<Broadcast<bool>>,
    /// Dropout: the probability and the keep mask `[b, hq, sq, sk]`.
    pub dropout: Option<(f64, Vec<bool>)>,
}

impl Attention {
    /// A plain problem: no mask, bias or dropout, scale `1 / sqrt(d)`.
    pub fn new(
        batch: usize,
        heads_q: usize,
        heads_kv: usize,
        seq_q: usize,
        seq_k: usize,
        head_dim: usize,
    ) -> Attention {
        Attention {
            batch,
            heads_q,
            heads_kv,
            seq_q,
            seq_k,
            head_dim,
            head_dim_v: head_dim,
            scale: 1.0 / (head_dim as f64).sqrt(),
            causal: None,
            window: (None, None),
            softcap: None,
            alibi: None,
            bias: None,
            mask: None,
            dropout: None,
        }
    }

    /// Elements of Q, K, V and O.
    pub fn sizes(&self) -> [usize; 4] {
        let (b, hq, hk) = (self.batch, self.heads_q, self.heads_kv);
        [
            b * hq * self.seq_q * self.head_dim,
            b * hk * self.seq_k * self.head_dim,
            b * hk * self.seq_k * self.head_dim_v,
            b * hq * self.seq_q * self.head_dim_v,
        ]
    }

    /// Whether query `i` sees key `j` in batch `b`, query head `h`.
    fn visible(&self, b: usize, h: usize, i: usize, j: usize) -> bool {
        // the bottom-right diagonal: i + sk - sq, in signed arithmetic
        let diag = i as i64 + self.seq_k as i64 - self.seq_q as i64;
        let j = j as i64;
        let causal = match self.causal {
            None => true,
            Some(CausalAlign::TopLeft) => j <= i as i64,
            Some(CausalAlign::BottomRight) => j <= diag,
        };
        let left = self.window.0.is_none_or(|l| j >= diag - l as i64);
        let right = self.window.1.is_none_or(|r| j <= diag + r as i64);
        let keep = self
            .mask
            .as_ref()
            .is_none_or(|m| m.at(self, b, h, i, j as usize));
        causal && left && right && keep
    }

    /// The KV head of query head `h`.
    fn kv_head(&self, h: usize) -> usize {
        h / (self.heads_q / self.heads_kv)
    }

    /// `(s0, s)` of query `i` and key `j` (before the softcap, and the
    /// final logit, -inf when hidden).
    fn logit(&self, q: &[f64], k: &[f64], b: usize, h: usize, i: usize, j: usize) -> (f64, f64) {
        let d = self.head_dim;
        let qi = &q[((b * self.heads_q + h) * self.seq_q + i) * d..][..d];
        let kj = &k[((b * self.heads_kv + self.kv_head(h)) * self.seq_k + j) * d..][..d];
        let s0 = self.scale * qi.iter().zip(kj).map(|(a, c)| a * c).sum::<f64>();
        if !self.visible(b, h, i, j) {
            return (s0, f64::NEG_INFINITY);
        }
        let mut s = self.softcap.map_or(s0, |cap| cap * (s0 / cap).tanh());
        if let Some(bias) = &self.bias {
            s += bias.at(self, b, h, i, j);
        }
        if let Some(slopes) = &self.alibi {
            let dist = (i as i64 + self.seq_k as i64 - self.seq_q as i64 - j as i64).abs();
            s -= slopes[h] * dist as f64;
        }
        (s0, s)
    }

    /// The dropout factor of `(b, h, i, j)`: `keep / (1 - p)`.
    fn drop_factor(&self, b: usize, h: usize, i: usize, j: usize) -> f64 {
        match &self.dropout {
            None => 1.0,
            Some((p, keep)) => {
                let at = ((b * self.heads_q + h) * self.seq_q + i) * self.seq_k + j;
                if keep[at] {
                    1.0 / (1.0 - p)
                } else {
                    0.0
                }
            }
        }
    }

    /// Row `(b, h, i)`: the probabilities over the keys and the logsumexp
    /// (+inf, all zeros, when no key is visible), with `s0` per key.
    fn row(&self, q: &[f64], k: &[f64], b: usize, h: usize, i: usize) -> (Vec<f64>, f64, Vec<f64>) {
        let (s0, s): (Vec<f64>, Vec<f64>) =
            (0..self.seq_k).map(|j| self.logit(q, k, b, h, i, j)).unzip();
        let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if m == f64::NEG_INFINITY {
            return (vec![0.0; self.seq_k], f64::INFINITY, s0);
        }
        let e: Vec<f64> = s.iter().map(|&x| (x - m).exp()).collect();
        let sum: f64 = e.iter().sum();
        (e.iter().map(|x| x / sum).collect(), m + sum.ln(), s0)
    }
}

/// The forward: `(o, lse)`.
pub fn sdpa(p: &Attention, q: &[f64], k: &[f64], v: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let dv = p.head_dim_v;
    let mut o = vec![0.0; p.sizes()[3]];
    let mut lse = vec![0.0; p.batch * p.heads_q * p.seq_q];
    for b in 0..p.batch {
        for h in 0..p.heads_q {
            let kvh = p.kv_head(h);
            for i in 0..p.seq_q {
                let row = (b * p.heads_q + h) * p.seq_q + i;
                let (pr, l, _) = p.row(q, k, b, h, i);
                lse[row] = l;
                for (j, &pj) in pr.iter().enumerate() {
                    let w = pj * p.drop_factor(b, h, i, j);
                    let vj = &v[((b * p.heads_kv + kvh) * p.seq_k + j) * dv..][..dv];
                    for (oe, ve) in o[row * dv..][..dv].iter_mut().zip(vj) {
                        *oe += w * ve;
                    }
                }
            }
        }
    }
    (o, lse)
}

/// Gradients of `sum(dO * O)`.
#[derive(Clone, Debug, PartialEq)]
pub struct SdpaGrads {
    /// `dQ`, Q's shape.
    pub dq: Vec<f64>,
    /// `dK`, K's shape (summed over the query heads of each KV head).
    pub dk: Vec<f64>,
    /// `dV`, V's shape (likewise).
    pub dv: Vec<f64>,
    /// The additive bias's gradient in its broadcast shape (summed over
    /// the dims it broadcasts), when the problem has one.
    pub dbias: Option<Vec<f64>>,
}

/// The backward from `dO` (O's shape).
pub fn sdpa_backward(p: &Attention, q: &[f64], k: &[f64], v: &[f64], d_o: &[f64]) -> SdpaGrads {
    let (d, dvd) = (p.head_dim, p.head_dim_v);
    let [nq, nk, nv, _] = p.sizes();
    let (mut dq, mut dk, mut dv) = (vec![0.0; nq], vec![0.0; nk], vec![0.0; nv]);
    let mut dbias = p.bias.as_ref().map(|b| vec![0.0; b.values.len()]);
    for b in 0..p.batch {
        for h in 0..p.heads_q {
            let kvh = p.kv_head(h);
            for i in 0..p.seq_q {
                let row = (b * p.heads_q + h) * p.seq_q + i;
                let (pr, lse, s0) = p.row(q, k, b, h, i);
                if lse == f64::INFINITY {
                    continue;
                }
                let doi = &d_o[row * dvd..][..dvd];
                // dP_ij = dO_i . V_j * drop_ij; D = sum_j P_ij dP_ij
                let dp: Vec<f64> = (0..p.seq_k)
                    .map(|j| {
                        let vj = &v[((b * p.heads_kv + kvh) * p.seq_k + j) * dvd..][..dvd];
                        let dot: f64 = doi.iter().zip(vj).map(|(a, c)| a * c).sum();
                        dot * p.drop_factor(b, h, i, j)
                    })
                    .collect();
                let big_d: f64 = pr.iter().zip(&dp).map(|(a, c)| a * c).sum();
                for j in 0..p.seq_k {
                    let kv_at = (b * p.heads_kv + kvh) * p.seq_k + j;
                    let w = pr[j] * p.drop_factor(b, h, i, j);
                    for (dve, de) in dv[kv_at * dvd..][..dvd].iter_mut().zip(doi) {
                        *dve += w * de;
                    }
                    if pr[j] == 0.0 {
                        continue;
                    }
                    let ds = pr[j] * (dp[j] - big_d);
                    if let (Some(db), Some(bias)) = (dbias.as_mut(), p.bias.as_ref()) {
                        let bb = if bias.batch == 1 { 0 } else { b };
                        let hh = if bias.heads == 1 { 0 } else { h };
                        db[((bb * bias.heads + hh) * p.seq_q + i) * p.seq_k + j] += ds;
                    }
                    let ds0 = match p.softcap {
                        Some(cap) => ds * (1.0 - (s0[j] / cap).tanh().powi(2)),
                        None => ds,
                    };
                    let qi = &q[row * d..][..d];
                    let kj = &k[kv_at * d..][..d];
                    for (dqe, ke) in dq[row * d..][..d].iter_mut().zip(kj) {
                        *dqe += p.scale * ds0 * ke;
                    }
                    for (dke, qe) in dk[kv_at * d..][..d].iter_mut().zip(qi) {
                        *dke += p.scale * ds0 * qe;
                    }
                }
            }
        }
    }
    SdpaGrads { dq, dk, dv, dbias }
}

/// A packed variable-length batch: sequence `s` holds queries
/// `cu_q[s]..cu_q[s + 1]` and keys `cu_k[s]..cu_k[s + 1]` of tensors laid
/// out `[tokens, heads, dim]` (BSHD without the batch dim). `p` gives the
/// heads, dims, scale and masks (its batch and sequence lengths are
/// ignored; a bias, boolean mask or dropout is not taken here).
pub struct Varlen<'a> {
    /// The shared settings.
    pub p: &'a Attention,
    /// Cumulative query offsets, `sequences + 1` entries from 0.
    pub cu_q: &'a [usize],
    /// Cumulative key offsets.
    pub cu_k: &'a [usize],
}

impl Varlen<'_> {
    /// The dense problem of sequence `s`.
    fn seq(&self, s: usize) -> Attention {
        let mut a = self.p.clone();
        a.batch = 1;
        a.seq_q = self.cu_q[s + 1] - self.cu_q[s];
        a.seq_k = self.cu_k[s + 1] - self.cu_k[s];
        a.bias = None;
        a.mask = None;
        a.dropout = None;
        a
    }

    /// Tokens `range` of a packed `[tokens, heads, dim]` tensor as
    /// `[1, heads, len, dim]`.
    fn unpack(x: &[f64], range: std::ops::Range<usize>, heads: usize, dim: usize) -> Vec<f64> {
        let len = range.len();
        let mut out = vec![0.0; heads * len * dim];
        for (t, tok) in range.enumerate() {
            for h in 0..heads {
                let src = &x[(tok * heads + h) * dim..][..dim];
                out[(h * len + t) * dim..][..dim].copy_from_slice(src);
            }
        }
        out
    }

    /// Add `[1, heads, len, dim]` back into tokens `start..` of a packed
    /// tensor.
    fn pack(into: &mut [f64], x: &[f64], start: usize, heads: usize, dim: usize) {
        let len = x.len() / (heads * dim).max(1);
        for t in 0..len {
            for h in 0..heads {
                let src = &x[(h * len + t) * dim..][..dim];
                into[((start + t) * heads + h) * dim..][..dim].copy_from_slice(src);
            }
        }
    }

    fn sequences(&self) -> usize {
        self.cu_q.len() - 1
    }

    /// The forward: packed O `[tokens_q, hq, dv]` and the logsumexp
    /// `[hq, tokens_q]` (FlashAttention's varlen layout).
    pub fn forward(&self, q: &[f64], k: &[f64], v: &[f64]) -> (Vec<f64>, Vec<f64>) {
        let p = self.p;
        let tq = self.cu_q[self.sequences()];
        let mut o = vec![0.0; tq * p.heads_q * p.head_dim_v];
        let mut lse = vec![0.0; p.heads_q * tq];
        for s in 0..self.sequences() {
            let a = self.seq(s);
            let (rq, rk) = (self.cu_q[s]..self.cu_q[s + 1], self.cu_k[s]..self.cu_k[s + 1]);
            let qs = Self::unpack(q, rq.clone(), p.heads_q, p.head_dim);
            let ks = Self::unpack(k, rk.clone(), p.heads_kv, p.head_dim);
            let vs = Self::unpack(v, rk, p.heads_kv, p.head_dim_v);
            let (os, ls) = sdpa(&a, &qs, &ks, &vs);
            Self::pack(&mut o, &os, rq.start, p.heads_q, p.head_dim_v);
            for h in 0..p.heads_q {
                for i in 0..a.seq_q {
                    lse[h * tq + rq.start + i] = ls[h * a.seq_q + i];
                }
            }
        }
        (o, lse)
    }

    /// The backward from packed `dO`: packed `(dq, dk, dv)`.
    pub fn backward(
        &self,
        q: &[f64],
        k: &[f64],
        v: &[f64],
        d_o: &[f64],
    ) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let p = self.p;
        let (mut dq, mut dk, mut dv) = (vec![0.0; q.len()], vec![0.0; k.len()], vec![0.0; v.len()]);
        for s in 0..self.sequences() {
            let a = self.seq(s);
            let (rq, rk) = (self.cu_q[s]..self.cu_q[s + 1], self.cu_k[s]..self.cu_k[s + 1]);
            let qs = Self::unpack(q, rq.clone(), p.heads_q, p.head_dim);
            let ks = Self::unpack(k, rk.clone(), p.heads_kv, p.head_dim);
            let vs = Self::unpack(v, rk.clone(), p.heads_kv, p.head_dim_v);
            let dos = Self::unpack(d_o, rq.clone(), p.heads_q, p.head_dim_v);
            let g = sdpa_backward(&a, &qs, &ks, &vs, &dos);
            Self::pack(&mut dq, &g.dq, rq.start, p.heads_q, p.head_dim);
            Self::pack(&mut dk, &g.dk, rk.start, p.heads_kv, p.head_dim);
            Self::pack(&mut dv, &g.dv, rk.start, p.heads_kv, p.head_dim_v);
        }
        (dq, dk, dv)
    }
}

/// A paged KV cache `[pages, page_size, heads, dim]` read through a block
/// table: sequence `b`'s token `t` lives in page `table[b][t / page_size]`
/// at row `t % page_size`. Returns `[batch, heads, max_len, dim]` (BHSD),
/// zeros past each sequence's `lens[b]`.
pub fn gather_paged(
    cache: &[f64],
    page_size: usize,
    heads: usize,
    dim: usize,
    table: &[Vec<usize>],
    lens: &[usize],
) -> Vec<f64> {
    let max_len = lens.iter().copied().max().unwrap_or(0);
    let mut out = vec![0.0; table.len() * heads * max_len * dim];
    for (b, pages) in table.iter().enumerate() {
        for t in 0..lens[b] {
            let (page, row) = (pages[t / page_size], t % page_size);
            for h in 0..heads {
                let src = &cache[((page * page_size + row) * heads + h) * dim..][..dim];
                out[((b * heads + h) * max_len + t) * dim..][..dim].copy_from_slice(src);
            }
        }
    }
    out
}

/// The KV append: new tokens `[batch, new, heads, dim]` written into a
/// paged cache (as [`gather_paged`] lays it out) at positions
/// `start[b]..start[b] + new` of each sequence. Pages the table does not
/// reach are left as they are.
pub fn kv_append_paged(
    cache: &mut [f64],
    page_size: usize,
    heads: usize,
    dim: usize,
    table: &[Vec<usize>],
    start: &[usize],
    new: &[f64],
) {
    let per_seq = new.len() / table.len().max(1) / (heads * dim).max(1);
    for (b, pages) in table.iter().enumerate() {
        for n in 0..per_seq {
            let t = start[b] + n;
            let (page, row) = (pages[t / page_size], t % page_size);
            for h in 0..heads {
                let src = &new[((b * per_seq + n) * heads + h) * dim..][..dim];
                cache[((page * page_size + row) * heads + h) * dim..][..dim].copy_from_slice(src);
            }
        }
    }
}

/// How a rotary embedding pairs the elements of a head.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum RopeStyle {
    /// GPT-NeoX: element `e` pairs with `e + rotary_dim / 2`.
    NeoX,
    /// GPT-J: elements `2e` and `2e + 1` pair (interleaved).
    GptJ,
}

/// A rotary embedding of tensors `[tokens, heads, dim]`: the first
/// `rotary_dim` elements of each head rotate pair by pair, the rest pass
/// through.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Rope {
    /// How elements pair.
    pub style: RopeStyle,
    /// Heads per token.
    pub heads: usize,
    /// Elements per head.
    pub dim: usize,
    /// Leading elements of each head that rotate (even).
    pub rotary_dim: usize,
    /// Pair `e` of a token at position `pos` rotates by
    /// `pos * theta^(-2e / rotary_dim)`.
    pub theta: f64,
}

impl Rope {
    /// `x` (token `t` at `positions[t]`) rotated; `inverse` rotates the
    /// other way: the backward (the rotation is orthogonal, so `dx` is `dy`
    /// rotated back).
    pub fn apply(&self, x: &[f64], positions: &[f64], inverse: bool) -> Vec<f64> {
        let mut y = x.to_vec();
        let half = self.rotary_dim / 2;
        for (t, &pos) in positions.iter().enumerate() {
            for h in 0..self.heads {
                let base = (t * self.heads + h) * self.dim;
                for e in 0..half {
                    let angle = pos * self.theta.powf(-2.0 * e as f64 / self.rotary_dim as f64);
                    let (sin, cos) = if inverse { (-angle).sin_cos() } else { angle.sin_cos() };
                    let (a, b) = match self.style {
                        RopeStyle::NeoX => (base + e, base + e + half),
                        RopeStyle::GptJ => (base + 2 * e, base + 2 * e + 1),
                    };
                    y[a] = x[a] * cos - x[b] * sin;
                    y[b] = x[b] * cos + x[a] * sin;
                }
            }
        }
        y
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finite_diff::check_grad;

    /// Seeded values in [-1, 1).
    fn vals(n: usize, seed: u64) -> Vec<f64> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
            })
            .collect()
    }

    fn dot(a: &[f64], b: &[f64]) -> f64 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    /// Every gradient of `p` against finite differences.
    fn check_problem(p: &Attention, seed: u64) {
        let [nq, nk, nv, no] = p.sizes();
        let (q, k, v, w) = (vals(nq, seed), vals(nk, seed + 1), vals(nv, seed + 2), vals(no, seed + 3));
        let g = sdpa_backward(p, &q, &k, &v, &w);
        check_grad("dq", &q, &g.dq, 1e-6, |x| dot(&sdpa(p, x, &k, &v).0, &w));
        check_grad("dk", &k, &g.dk, 1e-6, |x| dot(&sdpa(p, &q, x, &v).0, &w));
        check_grad("dv", &v, &g.dv, 1e-6, |x| dot(&sdpa(p, &q, &k, x).0, &w));
        if let (Some(bias), Some(db)) = (&p.bias, &g.dbias) {
            check_grad("dbias", &bias.values, db, 1e-6, |x| {
                let mut a = p.clone();
                a.bias.as_mut().expect("bias").values = x.to_vec();
                dot(&sdpa(&a, &q, &k, &v).0, &w)
            });
        }
    }

    #[test]
    fn gradients_match_finite_differences() {
        // GQA (4 query heads on 2 KV heads), sq != sk, dv != d
        let mut p = Attention::new(2, 4, 2, 3, 5, 4);
        p.head_dim_v = 3;
        check_problem(&p, 1);
        // causal of both alignments, a window, softcap, ALiBi, a bias that
        // broadcasts over the batch
        p.causal = Some(CausalAlign::BottomRight);
        p.softcap = Some(2.0);
        p.alibi = Some(vec![0.5, 0.25, 0.125, 0.0625]);
        p.bias = Some(Broadcast {
            batch: 1,
            heads: 4,
            values: vals(4 * 3 * 5, 9),
        });
        check_problem(&p, 2);
        p.causal = Some(CausalAlign::TopLeft);
        p.window = (Some(2), Some(0));
        check_problem(&p, 3);
        // a boolean mask broadcast over heads, dropout
        let mut d = Attention::new(1, 2, 1, 4, 4, 3);
        d.mask = Some(Broadcast {
            batch: 1,
            heads: 1,
            values: (0..16).map(|i| i % 3 != 1).collect(),
        });
        d.dropout = Some((0.25, (0..2 * 16).map(|i| i % 4 != 2).collect()));
        check_problem(&d, 4);
    }

    #[test]
    fn masks_follow_their_definitions() {
        // sq 2, sk 4: top-left sees j <= i, bottom-right j <= i + 2
        let mut p = Attention::new(1, 1, 1, 2, 4, 1);
        p.causal = Some(CausalAlign::TopLeft);
        let seen = |p: &Attention, i| (0..4).filter(|&j| p.visible(0, 0, i, j)).count();
        assert_eq!((seen(&p, 0), seen(&p, 1)), (1, 2));
        p.causal = Some(CausalAlign::BottomRight);
        assert_eq!((seen(&p, 0), seen(&p, 1)), (3, 4));
        // a window of one key to the left, none to the right
        p.causal = None;
        p.window = (Some(1), Some(0));
        assert_eq!((seen(&p, 0), seen(&p, 1)), (2, 2));
    }

    #[test]
    fn a_row_that_sees_no_key_is_zero_with_infinite_logsumexp() {
        // sq 3 > sk 1 bottom-right: query 0 and 1 see nothing
        let mut p = Attention::new(1, 1, 1, 3, 1, 2);
        p.causal = Some(CausalAlign::BottomRight);
        let (q, k, v) = (vals(6, 5), vals(2, 6), vals(2, 7));
        let (o, lse) = sdpa(&p, &q, &k, &v);
        assert_eq!(&o[..4], &[0.0; 4]);
        assert_eq!(&lse[..2], &[f64::INFINITY; 2]);
        // the last query sees its one key: o = v, lse = its logit
        assert!((o[4] - v[0]).abs() < 1e-15 && (o[5] - v[1]).abs() < 1e-15);
        let g = sdpa_backward(&p, &q, &k, &v, &vals(6, 8));
        assert!(g.dq[..4].iter().all(|&x| x == 0.0));
    }

    #[test]
    fn softmax_rows_sum_to_one_and_lse_is_the_log_partition() {
        let p = Attention::new(1, 2, 2, 3, 7, 4);
        let [nq, nk, _, _] = p.sizes();
        let (q, k) = (vals(nq, 11), vals(nk, 12));
        // V of ones in one column: O's column is the row sum of P
        let mut v = vec![0.0; p.sizes()[2]];
        v.iter_mut().step_by(4).for_each(|x| *x = 1.0);
        let (o, lse) = sdpa(&p, &q, &k, &v);
        for r in 0..6 {
            assert!((o[r * 4] - 1.0).abs() < 1e-14);
            let (h, i) = (r / 3, r % 3);
            let z: f64 = (0..7).map(|j| p.logit(&q, &k, 0, h, i, j).1.exp()).sum();
            assert!((lse[r] - z.ln()).abs() < 1e-13);
        }
    }

    #[test]
    fn varlen_matches_each_dense_sequence() {
        let mut p = Attention::new(1, 2, 1, 0, 0, 3);
        p.causal = Some(CausalAlign::BottomRight);
        let (cu_q, cu_k) = ([0, 2, 2, 5], [0, 3, 4, 8]);
        let vl = Varlen {
            p: &p,
            cu_q: &cu_q,
            cu_k: &cu_k,
        };
        let (q, k, v) = (vals(5 * 2 * 3, 21), vals(8 * 3, 22), vals(8 * 3, 23));
        let (o, lse) = vl.forward(&q, &k, &v);
        // sequence 2: queries 2..5, keys 4..8, checked densely
        let a = vl.seq(2);
        let qs = Varlen::unpack(&q, 2..5, 2, 3);
        let ks = Varlen::unpack(&k, 4..8, 1, 3);
        let vs = Varlen::unpack(&v, 4..8, 1, 3);
        let (os, ls) = sdpa(&a, &qs, &ks, &vs);
        assert_eq!(Varlen::unpack(&o, 2..5, 2, 3), os);
        assert_eq!(lse[5 + 2..5 + 5], ls[3..6]);
        // gradients against finite differences through the packed forward
        let w = vals(o.len(), 24);
        let (dq, dk, dv) = vl.backward(&q, &k, &v, &w);
        check_grad("varlen dq", &q, &dq, 1e-6, |x| {
            dot(&vl.forward(x, &k, &v).0, &w)
        });
        check_grad("varlen dk", &k, &dk, 1e-6, |x| {
            dot(&vl.forward(&q, x, &v).0, &w)
        });
        check_grad("varlen dv", &v, &dv, 1e-6, |x| {
            dot(&vl.forward(&q, &k, x).0, &w)
        });
    }

    #[test]
    fn paged_cache_round_trips_through_append_and_gather() {
        // 2 sequences, pages of 2 tokens, 1 head of dim 2
        let table = vec![vec![3, 0], vec![1, 2]];
        let mut cache = vec![0.0; 4 * 2 * 2];
        let new = vals(2 * 3 * 2, 31);
        kv_append_paged(&mut cache, 2, 1, 2, &table, &[0, 1], &new);
        let dense = gather_paged(&cache, 2, 1, 2, &table, &[3, 4]);
        // sequence 0 holds new tokens 0..3 at positions 0..3
        assert_eq!(&dense[..6], &new[..6]);
        // sequence 1 holds them at positions 1..4
        assert_eq!(&dense[8 + 2..8 + 8], &new[6..12]);
    }

    #[test]
    fn rope_rotates_pairs_and_its_inverse_is_the_backward() {
        let (heads, dim) = (2, 6);
        let x = vals(3 * heads * dim, 41);
        let pos = [0.0, 1.0, 7.0];
        for style in [RopeStyle::NeoX, RopeStyle::GptJ] {
            let r = Rope {
                style,
                heads,
                dim,
                rotary_dim: 4,
                theta: 10000.0,
            };
            let y = r.apply(&x, &pos, false);
            // position 0 and the pass-through tail are unchanged
            assert_eq!(&y[..heads * dim], &x[..heads * dim]);
            assert_eq!(y[heads * dim + 4], x[heads * dim + 4]);
            // a rotation keeps each pair's norm
            let back = r.apply(&y, &pos, true);
            for (a, b) in back.iter().zip(&x) {
                assert!((a - b).abs() < 1e-14);
            }
            // the inverse is the gradient: <dy, rope(x)> = <rope^-1(dy), x>
            let dy = vals(x.len(), 42);
            let dx = r.apply(&dy, &pos, true);
            assert!((dot(&dy, &y) - dot(&dx, &x)).abs() < 1e-12);
        }
        // NeoX pairs e with e + 2, GPT-J 2e with 2e + 1
        let mut one = vec![0.0; dim];
        one[0] = 1.0;
        let angle = 1.0f64;
        let one_head = |style| Rope {
            style,
            heads: 1,
            dim,
            rotary_dim: 4,
            theta: 10000.0,
        };
        let y = one_head(RopeStyle::NeoX).apply(&one, &[angle], false);
        assert!((y[0] - angle.cos()).abs() < 1e-15 && (y[2] - angle.sin()).abs() < 1e-15);
        let y = one_head(RopeStyle::GptJ).apply(&one, &[angle], false);
        assert!((y[0] - angle.cos()).abs() < 1e-15 && (y[1] - angle.sin()).abs() < 1e-15);
    }
}
