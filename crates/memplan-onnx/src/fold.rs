//! Constant folding: computing the contents of small tensors (at most
//! [`MAX_FOLD_ELEMENTS`](crate::infer::MAX_FOLD_ELEMENTS) elements) so that shape operands
//! computed inside the graph become known. Every function answers `None` when it cannot
//! fold (contents unknown, too many elements, an overflow, a division by zero); the shape
//! is inferred regardless, so a `None` here only matters to operators that read the
//! contents, which then report the input they miss.

use memplan_graph::{DType, TensorData};

use crate::infer::{elements, Info, SliceAxis, MAX_FOLD_ELEMENTS};

/// Known contents of a tensor, row-major.
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    /// Integer and bool elements.
    Ints(Vec<i64>),
    /// Floating-point elements.
    Floats(Vec<f64>),
}

impl Data {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Data::Ints(v) => v.len(),
            Data::Floats(v) => v.len(),
        }
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// From the IR's representation (`Unknown` is `None`).
    pub fn from_tensor_data(data: &TensorData) -> Option<Data> {
        match data {
            TensorData::Ints(v) => Some(Data::Ints(v.clone())),
            TensorData::Floats(v) => Some(Data::Floats(v.clone())),
            TensorData::Unknown => None,
        }
    }

    /// To the IR's representation.
    pub fn to_tensor_data(&self) -> TensorData {
        match self {
            Data::Ints(v) => TensorData::Ints(v.clone()),
            Data::Floats(v) => TensorData::Floats(v.clone()),
        }
    }

    fn pick(&self, indices: &[usize]) -> Option<Data> {
        Some(match self {
            Data::Ints(v) => Data::Ints(
                indices
                    .iter()
                    .map(|&i| v.get(i).copied())
                    .collect::<Option<_>>()?,
            ),
            Data::Floats(v) => Data::Floats(
                indices
                    .iter()
                    .map(|&i| v.get(i).copied())
                    .collect::<Option<_>>()?,
            ),
        })
    }
}

/// Folding is skipped above this rank, which bounds the per-element index work.
pub const MAX_FOLD_RANK: usize = 16;

/// Element count of `shape` as `usize` when it may be folded.
fn foldable(shape: &[u64]) -> Option<usize> {
    if shape.len() > MAX_FOLD_RANK {
        return None;
    }
    elements(shape)
        .filter(|&n| n <= MAX_FOLD_ELEMENTS)
        .and_then(|n| usize::try_from(n).ok())
}

fn strides(shape: &[u64]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1].saturating_mul(shape[i + 1] as usize);
    }
    s
}

/// Calls `f` with every multi-index of `shape` in row-major order (shape already checked
/// to be foldable).
fn for_each_index(shape: &[u64], mut f: impl FnMut(&[u64])) {
    let Some(n) = foldable(shape) else { return };
    let mut idx = vec![0u64; shape.len()];
    for _ in 0..n {
        f(&idx);
        for i in (0..shape.len()).rev() {
            idx[i] += 1;
            if idx[i] < shape[i] {
                break;
            }
            idx[i] = 0;
        }
    }
}

/// Source positions of a broadcast from `from` to `to` (numpy rules, already checked).
fn broadcast_positions(from: &[u64], to: &[u64]) -> Option<Vec<usize>> {
    foldable(to)?;
    let offset = to.len().checked_sub(from.len())?;
    let st = strides(from);
    let mut out = Vec::new();
    for_each_index(to, |idx| {
        let mut p = 0usize;
        for (i, &d) in from.iter().enumerate() {
            if d != 1 {
                p += idx[offset + i] as usize * st[i];
            }
        }
        out.push(p);
    });
    Some(out)
}

/// Identity, Neg, Abs, Sqrt, Floor, Ceil, Not, Reciprocal, Round (half to even), Sign,
/// Exp, Log, Relu.
pub fn unary(op: &str, d: &Data) -> Option<Data> {
    let floats = |f: fn(f64) -> f64| match d {
        Data::Floats(v) => Some(Data::Floats(v.iter().map(|&x| f(x)).collect())),
        Data::Ints(_) => None,
    };
    match op {
        "Reciprocal" => return floats(|x| 1.0 / x),
        "Round" => return floats(f64::round_ties_even),
        "Exp" => return floats(f64::exp),
        "Log" => return floats(f64::ln),
        _ => {}
    }
    Some(match (op, d) {
        ("Sign", Data::Ints(v)) => Data::Ints(v.iter().map(|x| x.signum()).collect()),
        ("Sign", Data::Floats(v)) => Data::Floats(
            v.iter()
                .map(|&x| {
                    if x == 0.0 || x.is_nan() {
                        x
                    } else {
                        x.signum()
                    }
                })
                .collect(),
        ),
        ("Relu", Data::Ints(v)) => Data::Ints(v.iter().map(|&x| x.max(0)).collect()),
        ("Relu", Data::Floats(v)) => Data::Floats(v.iter().map(|&x| x.max(0.0)).collect()),
        ("Identity", d) => d.clone(),
        ("Neg", Data::Ints(v)) => {
            Data::Ints(v.iter().map(|x| x.checked_neg()).collect::<Option<_>>()?)
        }
        ("Neg", Data::Floats(v)) => Data::Floats(v.iter().map(|x| -x).collect()),
        ("Abs", Data::Ints(v)) => {
            Data::Ints(v.iter().map(|x| x.checked_abs()).collect::<Option<_>>()?)
        }
        ("Abs", Data::Floats(v)) => Data::Floats(v.iter().map(|x| x.abs()).collect()),
        ("Sqrt", Data::Floats(v)) => Data::Floats(v.iter().map(|x| x.sqrt()).collect()),
        ("Floor", Data::Floats(v)) => Data::Floats(v.iter().map(|x| x.floor()).collect()),
        ("Ceil", Data::Floats(v)) => Data::Floats(v.iter().map(|x| x.ceil()).collect()),
        ("Not", Data::Ints(v)) => Data::Ints(v.iter().map(|&x| i64::from(x == 0)).collect()),
        _ => return None,
    })
}

fn int_op(op: &str, a: i64, b: i64) -> Option<i64> {
    Some(match op {
        "Add" => a.checked_add(b)?,
        "Sub" => a.checked_sub(b)?,
        "Mul" => a.checked_mul(b)?,
        // Integer Div truncates toward zero, like C.
        "Div" => a.checked_div(b)?,
        // Integer Mod (fmod = 0) takes the divisor's sign, like Python.
        "Mod" => {
            let r = a.checked_rem(b)?;
            if r != 0 && ((r < 0) != (b < 0)) {
                r + b
            } else {
                r
            }
        }
        "Max" => a.max(b),
        "Min" => a.min(b),
        "Equal" => i64::from(a == b),
        "Less" => i64::from(a < b),
        "Greater" => i64::from(a > b),
        "LessOrEqual" => i64::from(a <= b),
        "GreaterOrEqual" => i64::from(a >= b),
        "And" => i64::from(a != 0 && b != 0),
        "Or" => i64::from(a != 0 || b != 0),
        _ => return None,
    })
}

enum FloatResult {
    F(f64),
    B(bool),
}

fn float_op(op: &str, a: f64, b: f64) -> Option<FloatResult> {
    use FloatResult::{B, F};
    Some(match op {
        "Add" => F(a + b),
        "Sub" => F(a - b),
        "Mul" => F(a * b),
        "Div" => F(a / b),
        "Pow" => F(a.powf(b)),
        "Max" => F(a.max(b)),
        "Min" => F(a.min(b)),
        "Equal" => B(a == b),
        "Less" => B(a < b),
        "Greater" => B(a > b),
        "LessOrEqual" => B(a <= b),
        "GreaterOrEqual" => B(a >= b),
        _ => return None,
    })
}

/// A binary elementwise operator on two known inputs, broadcast to `shape`.
pub fn binary(op: &str, a: &Info, b: &Info, shape: &[u64], out: DType) -> Option<Data> {
    let pa = broadcast_positions(&a.shape, shape)?;
    let pb = broadcast_positions(&b.shape, shape)?;
    match (a.data.as_ref()?, b.data.as_ref()?) {
        (Data::Ints(x), Data::Ints(y)) => Some(Data::Ints(
            pa.iter()
                .zip(&pb)
                .map(|(&i, &j)| int_op(op, *x.get(i)?, *y.get(j)?))
                .collect::<Option<_>>()?,
        )),
        (Data::Floats(x), Data::Floats(y)) => {
            let r: Vec<FloatResult> = pa
                .iter()
                .zip(&pb)
                .map(|(&i, &j)| float_op(op, *x.get(i)?, *y.get(j)?))
                .collect::<Option<_>>()?;
            if out == DType::Bool {
                Some(Data::Ints(
                    r.iter()
                        .map(|v| match v {
                            FloatResult::B(b) => Some(i64::from(*b)),
                            FloatResult::F(_) => None,
                        })
                        .collect::<Option<_>>()?,
                ))
            } else {
                Some(Data::Floats(
                    r.iter()
                        .map(|v| match v {
                            FloatResult::F(f) => Some(*f),
                            FloatResult::B(_) => None,
                        })
                        .collect::<Option<_>>()?,
                ))
            }
        }
        _ => None,
    }
}

/// `Where(c, x, y)` broadcast to `shape`.
pub fn where_(c: &Info, x: &Info, y: &Info, shape: &[u64]) -> Option<Data> {
    let pc = broadcast_positions(&c.shape, shape)?;
    let px = broadcast_positions(&x.shape, shape)?;
    let py = broadcast_positions(&y.shape, shape)?;
    let Some(Data::Ints(cv)) = &c.data else {
        return None;
    };
    let mut pick = Vec::with_capacity(pc.len());
    let mut from_x = Vec::with_capacity(pc.len());
    for ((&i, &j), &k) in pc.iter().zip(&px).zip(&py) {
        let take_x = *cv.get(i)? != 0;
        from_x.push(take_x);
        pick.push(if take_x { j } else { k });
    }
    match (x.data.as_ref()?, y.data.as_ref()?) {
        (Data::Ints(a), Data::Ints(b)) => Some(Data::Ints(
            pick.iter()
                .zip(&from_x)
                .map(|(&p, &fx)| if fx { a.get(p) } else { b.get(p) }.copied())
                .collect::<Option<_>>()?,
        )),
        (Data::Floats(a), Data::Floats(b)) => Some(Data::Floats(
            pick.iter()
                .zip(&from_x)
                .map(|(&p, &fx)| if fx { a.get(p) } else { b.get(p) }.copied())
                .collect::<Option<_>>()?,
        )),
        _ => None,
    }
}

/// Converts contents to `to`'s class (integers truncate floats toward zero; bool is 0/1).
pub fn cast(d: &Data, to: DType) -> Option<Data> {
    if to == DType::String {
        return None;
    }
    Some(match d {
        Data::Ints(v) if to == DType::Bool => {
            Data::Ints(v.iter().map(|&x| i64::from(x != 0)).collect())
        }
        Data::Ints(v) if to.is_float() => Data::Floats(v.iter().map(|&x| x as f64).collect()),
        Data::Ints(v) => Data::Ints(v.clone()),
        Data::Floats(v) if to.is_float() => Data::Floats(v.clone()),
        Data::Floats(v) if to == DType::Bool => {
            Data::Ints(v.iter().map(|&x| i64::from(x != 0.0)).collect())
        }
        Data::Floats(v) => Data::Ints(
            v.iter()
                .map(|&x| {
                    let t = x.trunc();
                    (t.is_finite() && t.abs() < 9.2e18).then_some(t as i64)
                })
                .collect::<Option<_>>()?,
        ),
    })
}

/// `Concat` of known inputs along `axis` into `shape`.
pub fn concat(parts: &[&Info], axis: usize, shape: &[u64]) -> Option<Data> {
    foldable(shape)?;
    let mut sources: Vec<(usize, usize)> = Vec::new();
    let outer = elements(&shape[..axis])? as usize;
    for o in 0..outer {
        for (p, part) in parts.iter().enumerate() {
            let block = elements(&part.shape[axis..])? as usize;
            for i in 0..block {
                sources.push((p, o * block + i));
            }
        }
    }
    let all_ints = parts.iter().all(|p| matches!(p.data, Some(Data::Ints(_))));
    let all_floats = parts
        .iter()
        .all(|p| matches!(p.data, Some(Data::Floats(_))));
    if all_ints {
        Some(Data::Ints(
            sources
                .iter()
                .map(|&(p, i)| match &parts[p].data {
                    Some(Data::Ints(v)) => v.get(i).copied(),
                    _ => None,
                })
                .collect::<Option<_>>()?,
        ))
    } else if all_floats {
        Some(Data::Floats(
            sources
                .iter()
                .map(|&(p, i)| match &parts[p].data {
                    Some(Data::Floats(v)) => v.get(i).copied(),
                    _ => None,
                })
                .collect::<Option<_>>()?,
        ))
    } else {
        None
    }
}

/// `Slice` of a known input.
pub fn slice(x: &Info, axes: &[SliceAxis], shape: &[u64]) -> Option<Data> {
    let data = x.data.as_ref()?;
    foldable(shape)?;
    let st = strides(&x.shape);
    let mut picks = Vec::new();
    let mut ok = true;
    for_each_index(shape, |idx| {
        let mut p: i128 = 0;
        for (i, a) in axes.iter().enumerate() {
            p += (a.start + i128::from(idx[i]) * a.step) * st[i] as i128;
        }
        match usize::try_from(p) {
            Ok(p) => picks.push(p),
            Err(_) => ok = false,
        }
    });
    if !ok {
        return None;
    }
    data.pick(&picks)
}

/// `Gather` of a known input with known indices.
pub fn gather(x: &Info, idx: &Info, axis: usize, shape: &[u64]) -> Option<Data> {
    let data = x.data.as_ref()?;
    let Some(Data::Ints(ix)) = &idx.data else {
        return None;
    };
    foldable(shape)?;
    let outer = elements(&x.shape[..axis])? as usize;
    let dim = x.shape[axis] as i64;
    let inner = elements(&x.shape[axis + 1..])? as usize;
    let mut picks = Vec::new();
    for o in 0..outer {
        for &i in ix {
            let i = if i < 0 { i.checked_add(dim)? } else { i };
            let i = usize::try_from(i).ok().filter(|&i| (i as i64) < dim)?;
            for k in 0..inner {
                picks.push((o * dim as usize + i) * inner + k);
            }
        }
    }
    data.pick(&picks)
}

/// `Transpose` of a known input.
pub fn transpose(x: &Info, perm: &[usize], shape: &[u64]) -> Option<Data> {
    let data = x.data.as_ref()?;
    foldable(shape)?;
    let st = strides(&x.shape);
    let mut picks = Vec::new();
    for_each_index(shape, |idx| {
        picks.push(
            perm.iter()
                .enumerate()
                .map(|(o, &p)| idx[o] as usize * st[p])
                .sum(),
        );
    });
    data.pick(&picks)
}

/// `Expand` of a known input to `shape`.
pub fn expand(x: &Info, shape: &[u64]) -> Option<Data> {
    let data = x.data.as_ref()?;
    data.pick(&broadcast_positions(&x.shape, shape)?)
}

/// A one-element `fill` repeated to `shape` (`ConstantOfShape`).
pub fn fill(fill: &Data, shape: &[u64]) -> Option<Data> {
    let n = foldable(shape)?;
    Some(match fill {
        Data::Ints(v) => Data::Ints(vec![*v.first()?; n]),
        Data::Floats(v) => Data::Floats(vec![*v.first()?; n]),
    })
}

/// `Range(start, limit, delta)`: its length, and its contents when small.
/// Each input holds one element (the first is used).
pub fn range(start: &Data, limit: &Data, delta: &Data) -> Result<(u64, Option<Data>), String> {
    let empty = || "start, limit and delta must each hold one value".to_string();
    match (start, limit, delta) {
        (Data::Ints(s), Data::Ints(l), Data::Ints(d)) => {
            let (s, l, d) = (
                i128::from(*s.first().ok_or_else(empty)?),
                i128::from(*l.first().ok_or_else(empty)?),
                i128::from(*d.first().ok_or_else(empty)?),
            );
            if d == 0 {
                return Err("delta (input 2) is 0".into());
            }
            let n = ((l - s + d - d.signum()) / d).max(0);
            let n = u64::try_from(n).map_err(|_| "the length overflows".to_string())?;
            let data = (n <= MAX_FOLD_ELEMENTS)
                .then(|| Data::Ints((0..n as i128).map(|i| (s + i * d) as i64).collect()));
            Ok((n, data))
        }
        (Data::Floats(s), Data::Floats(l), Data::Floats(d)) => {
            let (s, l, d) = (
                *s.first().ok_or_else(empty)?,
                *l.first().ok_or_else(empty)?,
                *d.first().ok_or_else(empty)?,
            );
            if !(s.is_finite() && l.is_finite() && d.is_finite()) {
                return Err(format!(
                    "start {s}, limit {l} and delta {d} must all be finite numbers"
                ));
            }
            let n = ((l - s) / d).ceil().max(0.0);
            if !n.is_finite() || d == 0.0 || n >= 1.8e19 {
                return Err(format!(
                    "start {s}, limit {l} and delta {d} give no finite length"
                ));
            }
            let n = n as u64;
            let data = (n <= MAX_FOLD_ELEMENTS)
                .then(|| Data::Floats((0..n).map(|i| s + i as f64 * d).collect()));
            Ok((n, data))
        }
        _ => Err("start, limit and delta must have one type".into()),
    }
}

/// `Clip(x, min, max)` of known contents; a missing bound is unbounded.
pub fn clip(x: &Data, min: Option<&Data>, max: Option<&Data>) -> Option<Data> {
    match x {
        Data::Ints(v) => {
            let lo = match min {
                Some(Data::Ints(m)) => *m.first()?,
                None => i64::MIN,
                _ => return None,
            };
            let hi = match max {
                Some(Data::Ints(m)) => *m.first()?,
                None => i64::MAX,
                _ => return None,
            };
            Some(Data::Ints(v.iter().map(|&e| e.max(lo).min(hi)).collect()))
        }
        Data::Floats(v) => {
            let lo = match min {
                Some(Data::Floats(m)) => *m.first()?,
                None => f64::NEG_INFINITY,
                _ => return None,
            };
            let hi = match max {
                Some(Data::Floats(m)) => *m.first()?,
                None => f64::INFINITY,
                _ => return None,
            };
            Some(Data::Floats(v.iter().map(|&e| e.max(lo).min(hi)).collect()))
        }
    }
}

/// A reduction (ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd) of known contents
/// over `axes` (all distinct, below the rank), into `out_shape` (keepdims or not: the order
/// of the kept elements is the same).
pub fn reduce(op: &str, x: &Info, axes: &[usize], out_shape: &[u64]) -> Option<Data> {
    let data = x.data.as_ref()?;
    let n_out = foldable(out_shape)?;
    foldable(&x.shape)?;
    // Position of each input element in the output: its index with the reduced axes dropped.
    let kept: Vec<u64> = x
        .shape
        .iter()
        .enumerate()
        .map(|(i, &d)| if axes.contains(&i) { 1 } else { d })
        .collect();
    let st = strides(&kept);
    let mut slots = Vec::new();
    for_each_index(&x.shape, |idx| {
        let mut p = 0usize;
        for (i, &v) in idx.iter().enumerate() {
            if !axes.contains(&i) {
                p += v as usize * st[i];
            }
        }
        slots.push(p);
    });
    let group = (elements(&x.shape)? as usize)
        .checked_div(n_out)
        .unwrap_or(0);
    match data {
        Data::Ints(v) => {
            let init: i64 = match op {
                "ReduceSum" | "ReduceMean" => 0,
                "ReduceProd" => 1,
                "ReduceMax" => i64::MIN,
                "ReduceMin" => i64::MAX,
                _ => return None,
            };
            let mut acc = vec![init; n_out];
            for (&slot, &e) in slots.iter().zip(v) {
                let a = acc.get_mut(slot)?;
                *a = match op {
                    "ReduceSum" | "ReduceMean" => a.checked_add(e)?,
                    "ReduceProd" => a.checked_mul(e)?,
                    "ReduceMax" => (*a).max(e),
                    _ => (*a).min(e),
                };
            }
            if op == "ReduceMean" {
                let g = i64::try_from(group).ok().filter(|&g| g > 0)?;
                acc.iter_mut().for_each(|a| *a /= g);
            }
            Some(Data::Ints(acc))
        }
        Data::Floats(v) => {
            let init = match op {
                "ReduceSum" | "ReduceMean" => 0.0,
                "ReduceProd" => 1.0,
                "ReduceMax" => f64::NEG_INFINITY,
                "ReduceMin" => f64::INFINITY,
                _ => return None,
            };
            let mut acc = vec![init; n_out];
            for (&slot, &e) in slots.iter().zip(v) {
                let a = acc.get_mut(slot)?;
                *a = match op {
                    "ReduceSum" | "ReduceMean" => *a + e,
                    "ReduceProd" => *a * e,
                    "ReduceMax" => a.max(e),
                    _ => a.min(e),
                };
            }
            if op == "ReduceMean" {
                acc.iter_mut().for_each(|a| *a /= group as f64);
            }
            Some(Data::Floats(acc))
        }
    }
}
