//! GPU tests of [`BinaryLogicPlan`] and [`UnaryLogicPlan`]: every
//! comparison, logical, bitwise and integer op and every predicate over
//! every dtype it claims, against `reference::elementwise`'s
//! `binary_logic` and `unary_logic`, exactly (the outputs are booleans and
//! integers; `isclose`'s roundings are the reference's too).
//!
//! Samples: empty outputs (an empty input, and an empty input broadcast),
//! size 1, tails of every vector width, several blocks, row and column
//! broadcasts and both inputs broadcast, a scalar-like `b`, a transposed
//! `a` (and `x`), a stride-0 `a`, strided outputs (the elements between
//! stay untouched), misaligned operands (the strided kernel), rank 1 and
//! rank 8, and one realistic large shape (a `[1024, 4096]` tensor against
//! a `[1, 4096]` row). Values: clustered around a few bases so that ties
//! and near ties are common, or the special values: ±0, NaN, ±inf, the
//! largest finite values and subnormals of the floats; the integer types'
//! minimum and maximum; shift counts at, past and below the width, and
//! negative. The bitwise ops also run in place (`out = a`,
//! `bitwise_not_`) wherever the written input has the output's shape.
//!
//! Bool outputs live in `Guarded<u8>` buffers viewed as bool, so the
//! poison (0xFF, not a valid bool) is only ever read back as u8.

use baracuda_kernels::reference::elementwise as r;
use baracuda_kernels::*;

use crate::harness::*;
use crate::reduce::{out_layout, view_result, x_layout, Layout};
use crate::table::{BadInputs, OpCase, Row, Tensors};

/// The op of a row: a binary case of `r::binary_logic_cases()` or a
/// unary op of `UnaryLogicOp::ALL`, by index.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Case {
    Binary(usize),
    Unary(usize),
}

impl Case {
    fn binary(self) -> Option<BinaryLogicOp> {
        match self {
            Case::Binary(i) => Some(r::binary_logic_cases()[i].1),
            Case::Unary(_) => None,
        }
    }
    fn unary(self) -> Option<UnaryLogicOp> {
        match self {
            Case::Unary(i) => Some(UnaryLogicOp::ALL[i]),
            Case::Binary(_) => None,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Case::Binary(i) => r::binary_logic_cases()[i].0,
            Case::Unary(i) => UnaryLogicOp::ALL[i].name(),
        }
    }
    /// The output's element type for inputs of `kind`.
    fn output(self, kind: ElementKind) -> ElementKind {
        match (self.binary(), self.unary()) {
            (Some(op), _) => op.output(kind),
            (_, Some(op)) => op.output(kind),
            _ => unreachable!("a case is binary or unary"),
        }
    }
    /// How the inputs are drawn.
    fn values(self) -> Draw {
        use BinaryLogicOp as B;
        match (self.binary(), self.unary()) {
            (Some(B::BitwiseLeftShift | B::BitwiseRightShift), _) => Draw::Shift,
            (Some(B::Gcd | B::Lcm), _) => Draw::Divisors,
            (Some(B::BitwiseAnd | B::BitwiseOr | B::BitwiseXor), _)
            | (_, Some(UnaryLogicOp::BitwiseNot)) => Draw::Bits,
            _ => Draw::Clustered,
        }
    }
}

/// The dtypes of binary case `i` (isclose's for the extra isclose cases).
const fn binary_kinds(i: usize) -> &'static [ElementKind] {
    let all = BinaryLogicOp::ALL;
    if i < all.len() {
        all[i].kinds()
    } else {
        all[6].kinds()
    }
}

/// How a row draws its inputs (before rounding to the dtype).
#[derive(Copy, Clone, Debug, PartialEq)]
enum Draw {
    /// A few bases plus small offsets (ties and near ties for the
    /// comparisons and isclose; zeros for the logical ops), and for the
    /// integers the whole range half the time.
    Clustered,
    /// The integers' whole range; bool 0 or 1.
    Bits,
    /// `a` over the whole range; `b` counts mostly inside the width, some
    /// past it and some negative.
    Shift,
    /// Small multiples of a common factor, zeros and signs.
    Divisors,
}

/// Which values a sample holds.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Values {
    /// Drawn as the row's [`Draw`] says.
    Random,
    /// Every pair of the dtype's special values (see the module doc).
    Special,
}

/// One problem of a row.
#[derive(Clone, Debug)]
pub struct LogicSample {
    case: Case,
    kind: ElementKind,
    /// Shape of `a` (`x` for a unary op).
    a: Vec<usize>,
    /// Shape of `b` (empty for a unary op).
    b: Vec<usize>,
    layout: Layout,
    values: Values,
}

impl LogicSample {
    fn out_shape(&self) -> Vec<usize> {
        if self.b.is_empty() {
            return self.a.clone();
        }
        self.a
            .iter()
            .zip(&self.b)
            .map(|(&x, &y)| if x == 1 { y } else { x })
            .collect()
    }
}

/// The row of binary case `I` of `r::binary_logic_cases()`.
pub const fn binary_row<const I: usize>(name: &'static str) -> OpCase<LogicSample> {
    OpCase {
        name,
        dtypes: binary_kinds(I),
        backward: false,
        samples: |kind| samples(Case::Binary(I), kind),
        inputs,
        run,
        reference,
        tolerance: |_, _, _, _, _| Tolerance::EXACT,
        bad_inputs: binary_bad_inputs,
        unsupported: |kind| unsupported_case(Case::Binary(I), kind),
    }
}

/// The row of `UnaryLogicOp::ALL[I]`.
pub const fn unary_row<const I: usize>(name: &'static str) -> OpCase<LogicSample> {
    OpCase {
        name,
        dtypes: UnaryLogicOp::ALL[I].kinds(),
        backward: false,
        samples: |kind| samples(Case::Unary(I), kind),
        inputs,
        run,
        reference,
        tolerance: |_, _, _, _, _| Tolerance::EXACT,
        bad_inputs: unary_bad_inputs,
        unsupported: |kind| unsupported_case(Case::Unary(I), kind),
    }
}

/// The logic ops' rows of the op table: one per binary case of
/// `r::binary_logic_cases()` (in its order) and per unary op.
pub(crate) static ROWS: &[&dyn Row] = &[
    &binary_row::<0>("logic_eq"),
    &binary_row::<1>("logic_ne"),
    &binary_row::<2>("logic_lt"),
    &binary_row::<3>("logic_le"),
    &binary_row::<4>("logic_gt"),
    &binary_row::<5>("logic_ge"),
    &binary_row::<6>("logic_isclose"),
    &binary_row::<7>("logic_logical_and"),
    &binary_row::<8>("logic_logical_or"),
    &binary_row::<9>("logic_logical_xor"),
    &binary_row::<10>("logic_bitwise_and"),
    &binary_row::<11>("logic_bitwise_or"),
    &binary_row::<12>("logic_bitwise_xor"),
    &binary_row::<13>("logic_bitwise_left_shift"),
    &binary_row::<14>("logic_bitwise_right_shift"),
    &binary_row::<15>("logic_gcd"),
    &binary_row::<16>("logic_lcm"),
    &binary_row::<17>("logic_isclose_loose"),
    &binary_row::<18>("logic_isclose_atol"),
    &binary_row::<19>("logic_isclose_exact"),
    &unary_row::<0>("logic_isnan"),
    &unary_row::<1>("logic_isinf"),
    &unary_row::<2>("logic_isfinite"),
    &unary_row::<3>("logic_isposinf"),
    &unary_row::<4>("logic_isneginf"),
    &unary_row::<5>("logic_signbit"),
    &unary_row::<6>("logic_logical_not"),
    &unary_row::<7>("logic_bitwise_not"),
];

crate::table_tests!(
    ROWS;
    logic_eq,
    logic_ne,
    logic_lt,
    logic_le,
    logic_gt,
    logic_ge,
    logic_isclose,
    logic_logical_and,
    logic_logical_or,
    logic_logical_xor,
    logic_bitwise_and,
    logic_bitwise_or,
    logic_bitwise_xor,
    logic_bitwise_left_shift,
    logic_bitwise_right_shift,
    logic_gcd,
    logic_lcm,
    logic_isclose_loose,
    logic_isclose_atol,
    logic_isclose_exact,
    logic_isnan,
    logic_isinf,
    logic_isfinite,
    logic_isposinf,
    logic_isneginf,
    logic_signbit,
    logic_logical_not,
    logic_bitwise_not,
);

/// Every row is named after its case, and every case of the reference
/// has its row.
#[test]
fn rows_are_the_reference_cases() {
    let cases = r::binary_logic_cases();
    let names: Vec<String> = cases
        .iter()
        .map(|(name, _)| format!("logic_{name}"))
        .chain(
            UnaryLogicOp::ALL
                .iter()
                .map(|op| format!("logic_{}", op.name())),
        )
        .collect();
    let rows: Vec<&str> = ROWS.iter().map(|r| r.name()).collect();
    assert_eq!(rows, names);
    for (i, (_, op)) in cases.iter().enumerate() {
        assert_eq!(binary_kinds(i), op.kinds(), "{}", rows[i]);
    }
}

fn samples(case: Case, kind: ElementKind) -> Vec<LogicSample> {
    use Layout::*;
    use Values::*;
    let unary = case.unary().is_some();
    let s = |a: &[usize], b: &[usize], layout, values| LogicSample {
        case,
        kind,
        a: a.to_vec(),
        b: if unary { Vec::new() } else { b.to_vec() },
        layout,
        values,
    };
    let mut v = vec![
        // empty, and empty against a broadcast row
        s(&[1, 0], &[1, 0], Contiguous, Random),
        s(&[0, 3], &[1, 3], Contiguous, Random),
        // size 1, tails of every vector width, several blocks
        s(&[1, 1], &[1, 1], Contiguous, Special),
        s(&[1, 37], &[1, 37], Contiguous, Special),
        s(&[3, 100_003], &[3, 100_003], Contiguous, Random),
        // transposed a, stride-0 a, strided out, misaligned operands
        s(&[64, 33], &[64, 33], Transposed, Random),
        s(&[8, 300], &[8, 300], Broadcast, Random),
        s(&[19, 37], &[19, 37], StridedOut, Special),
        s(&[5, 1029], &[5, 1029], Misaligned, Special),
        s(&[5, 1029], &[5, 1029], Misaligned, Random),
        // rank 1 and rank 8
        s(&[1000], &[1000], Contiguous, Special),
        s(
            &[2, 3, 1, 2, 3, 2, 1, 5],
            &[2, 3, 1, 2, 3, 2, 1, 5],
            StridedOut,
            Random,
        ),
    ];
    if unary {
        // the realistic shape
        v.push(s(&[1024, 4096], &[], Contiguous, Random));
        v.push(s(&[6, 50, 70], &[], Transposed, Special));
    } else {
        v.extend([
            // row, column and both broadcast, a scalar-like b
            s(&[257, 131], &[1, 131], Contiguous, Random),
            s(&[257, 1], &[257, 131], Contiguous, Random),
            s(&[64, 1, 33], &[1, 17, 33], Contiguous, Random),
            s(&[1000], &[1], Contiguous, Special),
            s(&[19, 37], &[1, 37], StridedOut, Special),
            s(
                &[2, 3, 1, 2, 3, 2, 1, 5],
                &[2, 1, 4, 2, 1, 2, 3, 5],
                Contiguous,
                Random,
            ),
            // the realistic shape: a [1024, 4096] tensor against a row
            s(&[1024, 4096], &[1, 4096], Contiguous, Random),
        ]);
    }
    v
}

/// The largest finite value of a float kind.
fn largest(kind: ElementKind) -> f64 {
    match kind {
        ElementKind::F64 => f64::MAX,
        ElementKind::F32 => f64::from(f32::MAX),
        ElementKind::F16 => 65504.0,
        _ => (2.0 - 2f64.powi(-7)) * 2f64.powi(127),
    }
}

/// The range of an integer kind (bool: 0 and 1).
fn int_range(kind: ElementKind) -> (f64, f64) {
    match kind {
        ElementKind::I8 => (-128.0, 127.0),
        ElementKind::U8 => (0.0, 255.0),
        ElementKind::I16 => (-32768.0, 32767.0),
        ElementKind::I32 => (f64::from(i32::MIN), f64::from(i32::MAX)),
        // i64::MAX rounds to 2^63, which an i64 buffer saturates to it
        ElementKind::I64 => (i64::MIN as f64, i64::MAX as f64),
        _ => (0.0, 1.0),
    }
}

/// Bits of an integer kind.
fn width(kind: ElementKind) -> f64 {
    (kind.size_bytes() * 8) as f64
}

/// The special values of `kind` an input cycles through (`count`: a
/// shift's count).
fn specials(kind: ElementKind, draw: Draw, count: bool) -> Vec<f64> {
    if kind.is_float() {
        let m = largest(kind);
        return vec![
            0.0,
            -0.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            m,
            -m,
            1e-40,
            -1e-40,
            1.0,
            -1.0,
            0.5,
        ];
    }
    if kind == ElementKind::Bool {
        return vec![0.0, 1.0];
    }
    let (lo, hi) = int_range(kind);
    if count && draw == Draw::Shift {
        let w = width(kind);
        let mut v = vec![0.0, 1.0, w - 2.0, w - 1.0, w, w + 1.0, 2.0 * w];
        if kind == ElementKind::U8 {
            // 128 and more read as negative counts
            v.extend([127.0, 128.0, 200.0, 255.0]);
        } else {
            v.extend([-1.0, -w, lo, hi]);
        }
        return v;
    }
    let mut v = vec![lo, hi, 0.0, 1.0, lo + 1.0, hi - 1.0, 6.0, 127.0];
    if lo < 0.0 {
        v.extend([-1.0, -6.0]);
    }
    v
}

/// One value of `kind` drawn as `draw` says (`second`: the op's second
/// input).
fn draw_one(kind: ElementKind, draw: Draw, second: bool, rng: &mut Rng) -> f64 {
    if kind == ElementKind::Bool {
        return (rng.below(2)) as f64;
    }
    let (lo, hi) = int_range(kind);
    let whole = |rng: &mut Rng| {
        if kind == ElementKind::I64 {
            rng.next_u64() as i64 as f64
        } else {
            (lo + rng.below((hi - lo) as u64 + 1) as f64).min(hi)
        }
    };
    match draw {
        Draw::Clustered => {
            const BASES: [f64; 6] = [-2.0, -0.5, 0.0, 0.25, 1.0, 3.0];
            const OFFSETS: [f64; 9] = [
                0.0,
                0.00390625,
                -0.00390625,
                0.015625,
                -0.015625,
                0.0625,
                -0.0625,
                0.25,
                -0.25,
            ];
            let base = BASES[rng.below(6) as usize];
            if kind.is_float() {
                base + OFFSETS[rng.below(9) as usize]
            } else if rng.below(2) == 0 {
                whole(rng)
            } else {
                (base + rng.below(5) as f64 - 2.0).clamp(lo, hi)
            }
        }
        Draw::Bits => whole(rng),
        Draw::Shift if second => {
            let w = width(kind);
            match rng.below(8) {
                0 => w + rng.below(8) as f64,
                1 if lo < 0.0 => -1.0 - rng.below(8) as f64,
                1 => 128.0 + rng.below(128) as f64,
                _ => rng.below(w as u64) as f64,
            }
        }
        Draw::Shift => whole(rng),
        Draw::Divisors => {
            let factor = [1.0, 2.0, 3.0, 6.0, 12.0][rng.below(5) as usize];
            let k = rng.below(21) as f64 - if lo < 0.0 { 10.0 } else { 0.0 };
            (k * factor).clamp(lo, hi)
        }
    }
}

fn inputs(s: &LogicSample, rng: &mut Rng) -> Tensors {
    let draw = s.case.values();
    let mut make = |shape: &[usize], second: bool| -> Vec<f64> {
        let n: usize = shape.iter().product();
        match s.values {
            Values::Random => (0..n)
                .map(|_| draw_one(s.kind, draw, second, rng))
                .collect(),
            Values::Special => {
                // a runs through the specials, b through them at every
                // position of a's cycle: every pair where n allows
                let sp = specials(s.kind, draw, second);
                let m = sp.len();
                (0..n)
                    .map(|i| if second { sp[(i / m) % m] } else { sp[i % m] })
                    .collect()
            }
        }
    };
    let mut a = make(&s.a, false);
    if s.layout == Layout::Broadcast {
        // a stride-0 dim 0: the values repeat along it
        let inner = a.len() / s.a[0].max(1);
        for i in inner..a.len() {
            a[i] = a[i % inner];
        }
    }
    let mut t = Tensors::default();
    t.push("a", a);
    if !s.b.is_empty() {
        t.push("b", make(&s.b, true));
    }
    t
}

fn reference(kind: ElementKind, s: &LogicSample, inputs: &Tensors, _: &Tensors) -> Tensors {
    let a = inputs.get("a");
    let out = match (s.case.binary(), s.case.unary()) {
        (Some(op), _) => r::binary_logic(op, kind, a, &s.a, inputs.get("b"), &s.b),
        (_, Some(op)) => r::unary_logic(op, kind, a),
        _ => unreachable!("a case is binary or unary"),
    };
    let mut t = Tensors::default();
    t.push("out", out);
    t
}

fn run(kind: ElementKind, s: &LogicSample, inputs: &Tensors, _: bool) -> Result<Tensors, String> {
    let bool_out = s.case.output(kind) == ElementKind::Bool;
    crate::with_kinds!(kind, T => match (bool_out, s.a.len()) {
        (true, 1) => run_ranked::<T, bool, u8, 1>(s, inputs),
        (true, 2) => run_ranked::<T, bool, u8, 2>(s, inputs),
        (true, 3) => run_ranked::<T, bool, u8, 3>(s, inputs),
        (true, 8) => run_ranked::<T, bool, u8, 8>(s, inputs),
        (false, 1) => run_ranked::<T, T, T, 1>(s, inputs),
        (false, 2) => run_ranked::<T, T, T, 2>(s, inputs),
        (false, 3) => run_ranked::<T, T, T, 3>(s, inputs),
        (false, 8) => run_ranked::<T, T, T, 8>(s, inputs),
        (_, n) => Err(format!("no test instance for rank {n}")),
    };
        F32 => f32, F64 => f64, F16 => half::f16, Bf16 => half::bf16,
        I8 => i8, U8 => u8, I16 => i16, I32 => i32, I64 => i64, Bool => bool;
        other => Err(format!("{other} is not a logic op input"))
    )
}

/// Run one sample with inputs of `T` and an output of `O` (written into a
/// `Guarded<B>` of `O`'s size: u8 for bool), and, where `O` is `T` and the
/// written input has the output's shape, in place.
fn run_ranked<T: Element, O: Element, B: Element, const N: usize>(
    s: &LogicSample,
    inputs: &Tensors,
) -> Result<Tensors, String> {
    let g = gpu();
    let what = format!(
        "{} {} {:?} x {:?} {:?}",
        s.case.name(),
        T::KIND,
        s.a,
        s.b,
        s.layout
    );
    let out_shape = s.out_shape();
    let (a_strides, a_len, a_off) = x_layout(s.layout, &s.a);
    let abuf = upload_strided::<T>(inputs.get("a"), &s.a, &a_strides, a_len, a_off);
    let a = abuf.view::<N>(&s.a)?;
    let (os, o_len) = out_layout(s.layout, &out_shape);
    let mut out = Guarded::<B>::new(o_len);
    let (o_shape, o_strides) = (arr::<N>(&out_shape), arr::<N>(&os));
    let pref = PlanPreference::default();
    let mut t = Tensors::default();
    // in place over a when it has the output's shape and no stride 0
    let in_place = O::KIND == T::KIND && s.a == out_shape && s.layout != Layout::Broadcast;
    let inout = || InPlace::<T>::new(inputs.get("a"), &s.a, &a_strides, a_len, a_off);
    match (s.case.binary(), s.case.unary()) {
        (Some(op), _) => {
            let b_layout = if s.layout == Layout::Misaligned {
                Layout::Misaligned
            } else {
                Layout::Contiguous
            };
            let (b_strides, b_len, b_off) = x_layout(b_layout, &s.b);
            let bbuf = upload_strided::<T>(inputs.get("b"), &s.b, &b_strides, b_len, b_off);
            let b = bbuf.view::<N>(&s.b)?;
            let desc = BinaryLogicDescriptor {
                op,
                element: T::KIND,
                a_shape: arr::<N>(&s.a),
                b_shape: arr::<N>(&s.b),
            };
            let plan = select::<BinaryLogicPlan<T, O, N>>(&desc, &pref)?;
            let args = BinaryLogicArgs {
                a,
                b,
                out: TensorMut::new(out.slice_mut_as::<O>(), o_shape, o_strides)
                    .map_err(|e| e.to_string())?,
            };
            plan.run(&g.stream, Workspace::None, args)
                .map_err(|e| format!("{what}: {e}"))?;
            if in_place {
                // O is T: the plan is a BinaryLogicPlan<T, T, N>
                let plan = select::<BinaryLogicPlan<T, T, N>>(&desc, &pref)?;
                let got = inout().run::<N>(&s.a, |v| {
                    plan.run_in_place_a(&g.stream, Workspace::None, v, b)
                        .map_err(|e| format!("{what} in place: {e}"))
                })?;
                t.push("out in place", got);
            }
        }
        (_, Some(op)) => {
            let desc = UnaryLogicDescriptor {
                op,
                element: T::KIND,
                shape: arr::<N>(&s.a),
            };
            let plan = select::<UnaryLogicPlan<T, O, N>>(&desc, &pref)?;
            let args = UnaryLogicArgs {
                x: a,
                y: TensorMut::new(out.slice_mut_as::<O>(), o_shape, o_strides)
                    .map_err(|e| e.to_string())?,
            };
            plan.run(&g.stream, Workspace::None, args)
                .map_err(|e| format!("{what}: {e}"))?;
            if in_place {
                let plan = select::<UnaryLogicPlan<T, T, N>>(&desc, &pref)?;
                let got = inout().run::<N>(&s.a, |v| {
                    plan.run_in_place(&g.stream, Workspace::None, v)
                        .map_err(|e| format!("{what} in place: {e}"))
                })?;
                t.push("out in place", got);
            }
        }
        _ => unreachable!("a case is binary or unary"),
    }
    t.push("out", view_result(&what, &out, &out_shape, &os)?);
    Ok(t)
}

/// An input uploaded to be written over in place: its buffer, the
/// view's strides and its first element's offset.
struct InPlace<T: Element> {
    buf: DeviceBuffer<T>,
    strides: Vec<usize>,
    offset: usize,
}

impl<T: Element> InPlace<T> {
    /// `logical` of `shape` at `strides` in a buffer of `len` elements,
    /// `offset` elements in (the input's own layout).
    fn new(logical: &[f64], shape: &[usize], strides: &[usize], len: usize, offset: usize) -> Self {
        let mut host = vec![0.0; offset];
        host.extend(scatter(logical, shape, strides, len));
        InPlace {
            buf: upload::<T>(&host).0,
            strides: strides.to_vec(),
            offset,
        }
    }

    /// `f` on the writable view of `shape`; the view's values afterwards.
    fn run<const N: usize>(
        mut self,
        shape: &[usize],
        f: impl FnOnce(TensorMut<'_, T, N>) -> Result<(), String>,
    ) -> Result<Vec<f64>, String> {
        let (_, data) = self
            .buf
            .as_slice_mut()
            .split_at(self.offset)
            .ok_or("offset past the buffer")?;
        let v = TensorMut::new(data, arr::<N>(shape), arr::<N>(&self.strides))
            .map_err(|e| e.to_string())?;
        f(v)?;
        Ok(gather(
            &download(&self.buf),
            self.offset,
            shape,
            &self.strides,
        ))
    }
}

/// Select case `case` on `kind`, which its row does not claim:
/// `Unsupported`.
fn unsupported_case(case: Case, kind: ElementKind) -> Result<(), String> {
    let bool_out = case.output(kind) == ElementKind::Bool;
    let what = format!("{} on {kind}", case.name());
    crate::with_element!(kind, T => match (case.binary(), case.unary(), bool_out) {
        (Some(op), _, out) => {
            let desc = BinaryLogicDescriptor { op, element: kind, a_shape: [4], b_shape: [4] };
            if out {
                expect_unsupported::<BinaryLogicPlan<T, bool, 1>>(&what, &desc)
            } else {
                expect_unsupported::<BinaryLogicPlan<T, T, 1>>(&what, &desc)
            }
        }
        (_, Some(op), out) => {
            let desc = UnaryLogicDescriptor { op, element: kind, shape: [4] };
            if out {
                expect_unsupported::<UnaryLogicPlan<T, bool, 1>>(&what, &desc)
            } else {
                expect_unsupported::<UnaryLogicPlan<T, T, 1>>(&what, &desc)
            }
        }
        _ => unreachable!("a case is binary or unary"),
    })
}

/// A view of `buf` of `shape` (test data: always fits).
fn view<T: Element, const N: usize>(
    buf: &DeviceBuffer<T>,
    shape: [usize; N],
) -> TensorRef<'_, T, N> {
    TensorRef::contiguous(buf.as_slice(), shape).expect("view")
}

/// A writable view of `out` of `shape` (test data: always fits).
fn view_mut<B: Element, O: Element, const N: usize>(
    out: &mut Guarded<B>,
    shape: [usize; N],
) -> TensorMut<'_, O, N> {
    TensorMut::contiguous(out.slice_mut_as::<O>(), shape).expect("view")
}

/// Matches `ContextMismatch` naming argument `arg`.
fn context_mismatch(arg: &'static str) -> impl Fn(&Error) -> bool {
    move |e| matches!(e, Error::ContextMismatch { arg: a, .. } if *a == arg)
}

/// `len` elements of `O` at byte `at` of `buf`'s memory, on context `ctx`.
///
/// # Safety
/// Only for calls that must reject the view (its aliasing or its context)
/// before anything is enqueued: nothing may read or write through it.
unsafe fn raw_view<O: Element, T>(
    buf: DeviceSlice<'_, T>,
    at: u64,
    len: usize,
    ctx: usize,
) -> DeviceSliceMut<'_, O> {
    // SAFETY: the caller's contract.
    unsafe { DeviceSliceMut::<O>::from_raw_parts(buf.addr() + at, len, ctx) }
}

/// Every select and run check of the binary plan, each returning its
/// error and writing nothing.
fn binary_bad_inputs() -> Result<usize, String> {
    let g = gpu();
    let s = &g.stream;
    let mut b = BadInputs::default();
    let pref = PlanPreference::default();
    let lt = BinaryLogicDescriptor {
        op: BinaryLogicOp::Lt,
        element: ElementKind::F32,
        a_shape: [4, 96],
        b_shape: [1, 96],
    };
    let f64_lt = BinaryLogicDescriptor {
        element: ElementKind::F64,
        ..lt
    };
    b.own_kernel_select::<BinaryLogicPlan<f32, bool, 2>>(&lt, &f64_lt)?;
    let r = BinaryLogicPlan::<f32, f32, 2>::select(s, &lt, &pref);
    b.expect("lt with an f32 output", r, dtype_mismatch, &[])?;
    let and = BinaryLogicDescriptor {
        op: BinaryLogicOp::BitwiseAnd,
        element: ElementKind::I32,
        ..lt
    };
    let r = BinaryLogicPlan::<i32, bool, 2>::select(s, &and, &pref);
    b.expect(
        "bitwise_and of i32 with a bool output",
        r,
        dtype_mismatch,
        &[],
    )?;
    let bad = BinaryLogicDescriptor {
        b_shape: [2, 96],
        ..lt
    };
    let r = BinaryLogicPlan::<f32, bool, 2>::select(s, &bad, &pref);
    let broadcast = |e: &Error| matches!(e, Error::BroadcastMismatch { op: "logic", .. });
    b.expect("shapes that do not broadcast", r, broadcast, &[])?;
    for (what, rtol, atol) in [
        ("isclose rtol -1e-5", -1e-5, 1e-8),
        ("isclose atol -1", 1e-5, -1.0),
        ("isclose rtol NaN", f64::NAN, 1e-8),
    ] {
        let op = BinaryLogicOp::IsClose {
            rtol,
            atol,
            equal_nan: false,
        };
        let r =
            BinaryLogicPlan::<f32, bool, 2>::select(s, &BinaryLogicDescriptor { op, ..lt }, &pref);
        b.expect(what, r, invalid_descriptor("op"), &[])?;
    }
    let rank9 = BinaryLogicDescriptor {
        op: BinaryLogicOp::Eq,
        element: ElementKind::F32,
        a_shape: [1; 9],
        b_shape: [1; 9],
    };
    let r = BinaryLogicPlan::<f32, bool, 9>::select(s, &rank9, &pref);
    b.expect("rank 9", r, unsupported, &[])?;

    // run: shapes, context, a bool out over an f32 input
    let plan = select::<BinaryLogicPlan<f32, bool, 2>>(&lt, &pref)?;
    let mut rng = Rng::new(0x10C1);
    let (xa, _) = upload::<f32>(&rng.vec(4 * 96, -1.0, 1.0));
    let (xb, _) = upload::<f32>(&rng.vec(96, -1.0, 1.0));
    let mut out = Guarded::<u8>::new(4 * 96);
    // (what, shapes of a, b and out, the argument named)
    let cases = [
        ("a [1, 96]", [[1, 96], [1, 96], [4, 96]], "a"),
        ("b [4, 96]", [[4, 96], [4, 96], [4, 96]], "b"),
        ("out [96, 4]", [[4, 96], [1, 96], [96, 4]], "out"),
    ];
    for (what, [a_shape, b_shape, o_shape], arg) in cases {
        let args = BinaryLogicArgs {
            a: view(&xa, a_shape),
            b: view(if b_shape[0] == 1 { &xb } else { &xa }, b_shape),
            out: view_mut(&mut out, o_shape),
        };
        let r = plan.run(s, Workspace::None, args);
        b.expect(what, r, shape_mismatch(arg), &[&out])?;
    }
    let o = out.slice();
    // SAFETY: a bad-input test: the context is rejected first.
    let foreign = unsafe { raw_view::<bool, u8>(o, 0, 4 * 96, 0xDEAD) };
    let args = BinaryLogicArgs {
        a: view(&xa, [4, 96]),
        b: view(&xb, [1, 96]),
        out: TensorMut::contiguous(foreign, [4, 96]).map_err(|e| e.to_string())?,
    };
    let r = plan.run(s, Workspace::None, args);
    b.expect(
        "out on another context",
        r,
        context_mismatch("out"),
        &[&out],
    )?;
    let shared = Guarded::<f32>::new(4 * 96);
    let sh = shared.slice();
    // SAFETY: a bad-input test: the overlap is rejected first.
    let alias = unsafe { raw_view::<bool, f32>(sh, 64, 4 * 96, sh.ctx_id()) };
    let args = BinaryLogicArgs {
        a: TensorRef::contiguous(sh, [4, 96]).map_err(|e| e.to_string())?,
        b: view(&xb, [1, 96]),
        out: TensorMut::contiguous(alias, [4, 96]).map_err(|e| e.to_string())?,
    };
    let r = plan.run(s, Workspace::None, args);
    b.expect(
        "bool out inside f32 a",
        r,
        invalid_argument("out"),
        &[&shared],
    )?;

    // one element type: out may be an input only as the same view
    let and_plan = select::<BinaryLogicPlan<i32, i32, 2>>(&and, &pref)?;
    let (ia, _) = upload::<i32>(&[5.0; 4 * 96]);
    let (ib, _) = upload::<i32>(&[3.0; 96]);
    let mut io = Guarded::<i32>::new(4 * 96 + 1);
    let io_s = io.slice();
    // SAFETY: a bad-input test: the overlap is rejected first.
    let shifted = unsafe { raw_view::<i32, i32>(io_s, 4, 4 * 96, io_s.ctx_id()) };
    let args = BinaryLogicArgs {
        a: TensorRef::contiguous(io_s.slice(0..4 * 96).unwrap(), [4, 96])
            .map_err(|e| e.to_string())?,
        b: view(&ib, [1, 96]),
        out: TensorMut::contiguous(shifted, [4, 96]).map_err(|e| e.to_string())?,
    };
    let r = and_plan.run(s, Workspace::None, args);
    b.expect("out one element past a", r, invalid_argument("out"), &[&io])?;
    let r = and_plan.run_in_place_b(
        s,
        Workspace::None,
        view(&ia, [4, 96]),
        view_mut(&mut io, [1, 96]),
    );
    b.expect(
        "in place over a broadcast b",
        r,
        invalid_argument("b"),
        &[&io],
    )?;
    let r = and_plan.run_in_place_a(
        s,
        Workspace::None,
        view_mut(&mut io, [96, 4]),
        view(&ib, [1, 96]),
    );
    b.expect("in place into a [96, 4]", r, shape_mismatch("a"), &[&io])?;
    b.done()
}

/// Every select and run check of the unary plan, each returning its error
/// and writing nothing.
fn unary_bad_inputs() -> Result<usize, String> {
    let g = gpu();
    let s = &g.stream;
    let mut b = BadInputs::default();
    let pref = PlanPreference::default();
    let isnan = UnaryLogicDescriptor {
        op: UnaryLogicOp::IsNan,
        element: ElementKind::F32,
        shape: [4, 96],
    };
    let f16 = UnaryLogicDescriptor {
        element: ElementKind::F16,
        ..isnan
    };
    b.own_kernel_select::<UnaryLogicPlan<f32, bool, 2>>(&isnan, &f16)?;
    let r = UnaryLogicPlan::<f32, u8, 2>::select(s, &isnan, &pref);
    b.expect("isnan with a u8 output", r, dtype_mismatch, &[])?;
    let not = UnaryLogicDescriptor {
        op: UnaryLogicOp::BitwiseNot,
        element: ElementKind::I16,
        ..isnan
    };
    let r = UnaryLogicPlan::<i16, bool, 2>::select(s, &not, &pref);
    b.expect(
        "bitwise_not of i16 with a bool output",
        r,
        dtype_mismatch,
        &[],
    )?;
    let signbit = UnaryLogicDescriptor {
        op: UnaryLogicOp::Signbit,
        element: ElementKind::Bool,
        ..isnan
    };
    let r = UnaryLogicPlan::<bool, bool, 2>::select(s, &signbit, &pref);
    b.expect("signbit of bool (PyTorch has none)", r, unsupported, &[])?;
    let rank9 = UnaryLogicDescriptor {
        op: UnaryLogicOp::IsNan,
        element: ElementKind::F32,
        shape: [1; 9],
    };
    let r = UnaryLogicPlan::<f32, bool, 9>::select(s, &rank9, &pref);
    b.expect("rank 9", r, unsupported, &[])?;

    let plan = select::<UnaryLogicPlan<f32, bool, 2>>(&isnan, &pref)?;
    let (xb, _) = upload::<f32>(&Rng::new(0x10C2).vec(4 * 96, -1.0, 1.0));
    let mut y = Guarded::<u8>::new(4 * 96);
    let args = UnaryLogicArgs {
        x: view(&xb, [96, 4]),
        y: view_mut(&mut y, [4, 96]),
    };
    let r = plan.run(s, Workspace::None, args);
    b.expect("x [96, 4]", r, shape_mismatch("x"), &[&y])?;
    let args = UnaryLogicArgs {
        x: view(&xb, [4, 96]),
        y: view_mut(&mut y, [96, 4]),
    };
    let r = plan.run(s, Workspace::None, args);
    b.expect("y [96, 4]", r, shape_mismatch("y"), &[&y])?;
    let ys = y.slice();
    // SAFETY: a bad-input test: the context is rejected first.
    let foreign = unsafe { raw_view::<bool, u8>(ys, 0, 4 * 96, 0xDEAD) };
    let args = UnaryLogicArgs {
        x: view(&xb, [4, 96]),
        y: TensorMut::contiguous(foreign, [4, 96]).map_err(|e| e.to_string())?,
    };
    let r = plan.run(s, Workspace::None, args);
    b.expect("y on another context", r, context_mismatch("y"), &[&y])?;
    let shared = Guarded::<f32>::new(4 * 96);
    let sh = shared.slice();
    // SAFETY: a bad-input test: the overlap is rejected first.
    let alias = unsafe { raw_view::<bool, f32>(sh, 0, 4 * 96, sh.ctx_id()) };
    let args = UnaryLogicArgs {
        x: TensorRef::contiguous(sh, [4, 96]).map_err(|e| e.to_string())?,
        y: TensorMut::contiguous(alias, [4, 96]).map_err(|e| e.to_string())?,
    };
    let r = plan.run(s, Workspace::None, args);
    b.expect("bool y over f32 x", r, invalid_argument("y"), &[&shared])?;
    let not_plan = select::<UnaryLogicPlan<i16, i16, 2>>(&not, &pref)?;
    let mut xy = Guarded::<i16>::new(4 * 96);
    let r = not_plan.run_in_place(s, Workspace::None, view_mut(&mut xy, [96, 4]));
    b.expect("xy [96, 4]", r, shape_mismatch("xy"), &[&xy])?;
    b.done()
}
