//! The preset metrics that order the rectangles of [`super::Strip`].
//!
//! A metric is one to three *base* metrics joined by one *combination*:
//!
//! | base | value of buffer `i` |
//! |---|---|
//! | `length` | lifetime length `end - start` (gaps included) |
//! | `size` | bytes |
//! | `overlap` | sum over every other buffer `j` of the steps at which `i` and `j` are both live |
//!
//! | written | combination | key (larger goes first) |
//! |---|---|---|
//! | `a` | one base | `a` |
//! | `a,b[,c]` | lexicographic priority | `a`, ties by `b`, then by `c` |
//! | `a+b[+c]` | sum of the bases, each divided by its largest value | `a/max a + b/max b …` |
//! | `a*b[*c]` | product | `a · b · c` |
//! | `a/b[/c]` | ratio | `a / b / c`, a zero divisor counting as 1 |
//!
//! An order is descending (larger keys first) or, as [`Direction::Ascending`], ascending
//! in the key; either way ties are broken by earlier lifetime start, then lower id, so it
//! is deterministic. A sum normalises first because its bases have
//! different units; product and ratio orders do not depend on units.

use std::cmp::Reverse;
use std::fmt;
use std::str::FromStr;

use crate::problem::Problem;

/// One property of a buffer that a [`Metric`] is built from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Base {
    /// Lifetime length `end - start`, gaps included.
    Length,
    /// Size in bytes.
    Size,
    /// Sum of the steps shared with every other buffer (both live).
    Overlap,
}

impl Base {
    /// Every base, in the order [`Metric::presets`] and messages list them.
    pub const ALL: [Base; 3] = [Base::Length, Base::Size, Base::Overlap];

    /// The name used in `--metric`.
    pub fn name(self) -> &'static str {
        match self {
            Base::Length => "length",
            Base::Size => "size",
            Base::Overlap => "overlap",
        }
    }
}

/// Which keys of a [`Metric`] go first (the `strip` method, step 1, corrected: "descending or
/// ascending").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Larger keys first (the method's first reading, and strip's first variant).
    Descending,
    /// Smaller keys first.
    Ascending,
}

impl Direction {
    /// Both directions, descending first.
    pub const ALL: [Direction; 2] = [Direction::Descending, Direction::Ascending];

    /// The name used in `--order` and `strip:order=`: `descending` or `ascending`.
    pub fn name(self) -> &'static str {
        match self {
            Direction::Descending => "descending",
            Direction::Ascending => "ascending",
        }
    }
}

impl FromStr for Direction {
    type Err = String;

    /// `descending` (or `desc`) and `ascending` (or `asc`).
    fn from_str(text: &str) -> Result<Direction, String> {
        match text.trim() {
            "descending" | "desc" => Ok(Direction::Descending),
            "ascending" | "asc" => Ok(Direction::Ascending),
            other => Err(format!(
                "unknown order '{other}': strip orders its rectangles 'descending' (larger keys first) or 'ascending'"
            )),
        }
    }
}

/// How the bases of a [`Metric`] are combined.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Combine {
    /// Lexicographic priority: the first base, ties by the second, then the third.
    Lexicographic,
    /// Sum of the bases, each normalised by its largest value over the problem.
    Sum,
    /// Product of the bases.
    Product,
    /// The first base divided by the others (a zero divisor counts as 1).
    Ratio,
}

impl Combine {
    fn separator(self) -> char {
        match self {
            Combine::Lexicographic => ',',
            Combine::Sum => '+',
            Combine::Product => '*',
            Combine::Ratio => '/',
        }
    }
}

/// A preset metric: one to three different bases and how they combine. Larger keys are
/// placed first. Written as in `--metric`: `size`, `size,length`, `size*length`,
/// `size+overlap`, `size/length`, `length,size,overlap`, …
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Metric {
    combine: Combine,
    bases: [Base; 3],
    /// How many of `bases` are used (1 to 3).
    count: u8,
}

/// A `--metric` text that names no metric.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown metric '{text}': {why}; valid metrics are one to three different bases of {bases} joined by one of ',' (lexicographic), '+' (normalised sum), '*' (product), '/' (ratio), e.g. size, overlap, size*length, length,size, size+overlap, size/length")]
pub struct UnknownMetric {
    pub text: String,
    pub why: String,
    pub bases: String,
}

impl Metric {
    /// A metric of one base.
    pub const fn single(base: Base) -> Metric {
        Metric {
            combine: Combine::Lexicographic,
            bases: [base, base, base],
            count: 1,
        }
    }

    /// A metric of two bases.
    pub const fn pair(combine: Combine, a: Base, b: Base) -> Metric {
        Metric {
            combine,
            bases: [a, b, b],
            count: 2,
        }
    }

    /// The bases in priority order.
    pub fn bases(&self) -> &[Base] {
        &self.bases[..self.count as usize]
    }

    /// How the bases combine.
    pub fn combine(&self) -> Combine {
        self.combine
    }

    /// The metrics measured to choose the default (doc/strip.md): every single base, and
    /// every ordered pair of different bases under every combination.
    pub fn presets() -> Vec<Metric> {
        let mut out: Vec<Metric> = Base::ALL.iter().map(|&b| Metric::single(b)).collect();
        for combine in [
            Combine::Lexicographic,
            Combine::Sum,
            Combine::Product,
            Combine::Ratio,
        ] {
            for a in Base::ALL {
                for b in Base::ALL {
                    let commutes = matches!(combine, Combine::Sum | Combine::Product);
                    let repeat = commutes
                        && Base::ALL.iter().position(|&x| x == b)
                            < Base::ALL.iter().position(|&x| x == a);
                    if a != b && !repeat {
                        out.push(Metric::pair(combine, a, b));
                    }
                }
            }
        }
        out
    }

    /// The buffers without a fixed offset, largest key first (ties: earlier lifetime
    /// start, then lower id).
    pub fn order(&self, problem: &Problem) -> Vec<u32> {
        self.order_in(problem, Direction::Descending)
    }

    /// The buffers without a fixed offset in `direction` of the key (ties, either way:
    /// earlier lifetime start, then lower id).
    pub fn order_in(&self, problem: &Problem, direction: Direction) -> Vec<u32> {
        let ids: Vec<u32> = (0..problem.len() as u32)
            .filter(|&i| problem.buffers()[i as usize].fixed_offset.is_none())
            .collect();
        self.order_subset(problem, &Values::new(problem, self.bases()), ids, direction)
    }

    /// `ids` sorted by this metric as in [`Metric::order_in`], with `values` precomputed.
    pub(crate) fn order_subset(
        &self,
        problem: &Problem,
        values: &Values,
        mut ids: Vec<u32>,
        direction: Direction,
    ) -> Vec<u32> {
        let ascending = direction == Direction::Ascending;
        let buffers = problem.buffers();
        let start = |i: u32| buffers[i as usize].lifetime.start;
        let bases = self.bases();
        match self.combine {
            Combine::Lexicographic => {
                let key = |i: u32| {
                    let mut key = [0u128; 3];
                    for (k, &base) in key.iter_mut().zip(bases) {
                        *k = values.get(base, i);
                    }
                    key
                };
                if ascending {
                    ids.sort_unstable_by_key(|&i| (key(i), start(i), i));
                } else {
                    ids.sort_unstable_by_key(|&i| (Reverse(key(i)), start(i), i));
                }
            }
            combine => {
                let score = |i: u32| -> f64 {
                    let v = |b: Base| values.get(b, i) as f64;
                    match combine {
                        Combine::Sum => bases.iter().map(|&b| v(b) / values.max(b)).sum(),
                        Combine::Product => bases.iter().map(|&b| v(b)).product(),
                        _ => bases[1..]
                            .iter()
                            .fold(v(bases[0]), |acc, &b| acc / v(b).max(1.0)),
                    }
                };
                let mut keyed: Vec<(f64, u64, u32)> =
                    ids.iter().map(|&i| (score(i), start(i), i)).collect();
                keyed.sort_unstable_by(|x, y| {
                    let key = if ascending {
                        x.0.total_cmp(&y.0)
                    } else {
                        y.0.total_cmp(&x.0)
                    };
                    key.then(x.1.cmp(&y.1)).then(x.2.cmp(&y.2))
                });
                ids = keyed.into_iter().map(|(_, _, i)| i).collect();
            }
        }
        ids
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (k, base) in self.bases().iter().enumerate() {
            if k > 0 {
                write!(f, "{}", self.combine.separator())?;
            }
            f.write_str(base.name())?;
        }
        Ok(())
    }
}

impl FromStr for Metric {
    type Err = UnknownMetric;

    fn from_str(text: &str) -> Result<Metric, UnknownMetric> {
        let fail = |why: &str| UnknownMetric {
            text: text.to_string(),
            why: why.to_string(),
            bases: Base::ALL.map(Base::name).join(", "),
        };
        let separators: Vec<char> = text.chars().filter(|c| ",+*/".contains(*c)).collect();
        let combine = match separators.first() {
            None => Combine::Lexicographic,
            Some(',') => Combine::Lexicographic,
            Some('+') => Combine::Sum,
            Some('*') => Combine::Product,
            Some(_) => Combine::Ratio,
        };
        if separators.iter().any(|&c| c != combine.separator()) {
            return Err(fail("mixes combinations"));
        }
        let parts: Vec<&str> = text.split(combine.separator()).map(str::trim).collect();
        if parts.len() > 3 {
            return Err(fail("more than three bases"));
        }
        let mut bases = [Base::Size; 3];
        for (k, part) in parts.iter().enumerate() {
            let Some(base) = Base::ALL.into_iter().find(|b| b.name() == *part) else {
                return Err(fail(&format!("'{part}' is not a base")));
            };
            if bases[..k].contains(&base) {
                return Err(fail(&format!("'{part}' is named twice")));
            }
            bases[k] = base;
        }
        // Unused slots repeat the last base, as in `single` and `pair`, so that equal
        // metrics compare equal.
        for k in parts.len()..3 {
            bases[k] = bases[k - 1];
        }
        Ok(Metric {
            combine,
            bases,
            count: parts.len() as u8,
        })
    }
}

/// The base values of every buffer, computed once per problem.
pub(crate) struct Values {
    /// `values[base as usize][i]`, only for the bases asked for.
    values: [Vec<u128>; 3],
    /// Largest value of each base (at least 1), for the normalised sum.
    max: [f64; 3],
}

impl Values {
    /// Computes the values of `bases` for every buffer. `overlap` costs a radix sort of the
    /// segments' ends and one sweep: the number of live buffers is a step function of time;
    /// its running integral `P` gives
    /// `overlap(i) = Σ over i's live segments [s, e) of (P(e) - P(s)) - live length of i`.
    pub(crate) fn new(problem: &Problem, bases: &[Base]) -> Values {
        let buffers = problem.buffers();
        let mut values: [Vec<u128>; 3] = Default::default();
        for &base in bases {
            values[base as usize] = match base {
                Base::Length => buffers.iter().map(|b| b.lifetime.len() as u128).collect(),
                Base::Size => buffers.iter().map(|b| b.size as u128).collect(),
                Base::Overlap => overlaps(problem),
            };
        }
        let max = [0, 1, 2].map(|k| values[k].iter().copied().max().unwrap_or(1).max(1) as f64);
        Values { values, max }
    }

    fn get(&self, base: Base, i: u32) -> u128 {
        self.values[base as usize][i as usize]
    }

    fn max(&self, base: Base) -> f64 {
        self.max[base as usize]
    }
}

/// `overlap(i)` for every buffer (see [`Values::new`]): one sweep over the segments'
/// ends, sorted by time, adds `P(e)` and subtracts `P(s)` for each segment `[s, e)` as
/// it passes them (`P` is the same at every end of one step: the live count changes only
/// between steps).
fn overlaps(problem: &Problem) -> Vec<u128> {
    let buffers = problem.buffers();
    // (time, buffer, is the segment's end)
    let mut events: Vec<(u64, u32, bool)> = Vec::with_capacity(2 * buffers.len());
    // `total[i]` goes below zero on the way (it starts at minus the live length, and a
    // start subtracts before its end adds), so it is kept modulo 2^128; the final value is
    // exact: the buffer is live with itself over its segments.
    let mut total: Vec<u128> = vec![0; buffers.len()];
    for ((i, b), slot) in (0u32..).zip(buffers).zip(&mut total) {
        b.for_each_live_segment(|s| {
            events.push((s.start, i, false));
            events.push((s.end, i, true));
            *slot = slot.wrapping_sub(u128::from(s.len()));
        });
    }
    crate::radix::sort_by_u64_key(&mut events, |e| e.0);
    let (mut live, mut acc, mut previous) = (0u64, 0u128, None);
    for &(t, i, is_end) in &events {
        if let Some(p) = previous.filter(|&p| p != t) {
            acc += u128::from(live) * u128::from(t - p);
        }
        previous = Some(t);
        let slot = &mut total[i as usize];
        if is_end {
            *slot = slot.wrapping_add(acc);
            live -= 1;
        } else {
            *slot = slot.wrapping_sub(acc);
            live += 1;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::{Buffer, Lifetime};

    #[test]
    fn metrics_parse_and_print_back() {
        for text in [
            "size",
            "length,size",
            "size*length*overlap",
            "size+overlap",
            "size/length",
        ] {
            assert_eq!(text.parse::<Metric>().unwrap().to_string(), text);
        }
        for bad in [
            "",
            "area",
            "size,size",
            "size+length*overlap",
            "a,b,c,d",
            "size,length,overlap,size",
        ] {
            let err = bad.parse::<Metric>().unwrap_err().to_string();
            assert!(err.contains("length, size, overlap"), "{err}");
        }
        for m in Metric::presets() {
            assert_eq!(m.to_string().parse::<Metric>(), Ok(m));
        }
    }

    #[test]
    fn overlap_counts_shared_live_steps() {
        // a [0,10) with a gap [2,5); b [3,8); c [9,12).
        let mut a = Buffer::new("a", 1, 0, 10);
        a.gaps = vec![Lifetime { start: 2, end: 5 }];
        let problem = Problem::from_buffers(vec![
            a,
            Buffer::new("b", 1, 3, 8),
            Buffer::new("c", 1, 9, 12),
        ])
        .unwrap();
        // a-b share [5,8) = 3; a-c share [9,10) = 1; b-c nothing.
        assert_eq!(overlaps(&problem), vec![4, 3, 1]);
    }

    /// `overlaps` against the pairwise definition, on problems small enough for the
    /// comparison sort and large enough for the radix sort, lifetimes with gaps, many
    /// buffers starting where others end.
    #[test]
    fn overlap_matches_the_pairwise_sum() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |below: u64| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) % below
        };
        for n in [1, 7, 60, 300, 700] {
            let buffers: Vec<Buffer> = (0..n)
                .map(|i| {
                    let start = next(40);
                    let end = start + 1 + next(25);
                    let mut b = Buffer::new(format!("b{i}"), 1, start, end);
                    if end - start >= 4 && next(3) == 0 {
                        let gap_start = start + 1 + next(end - start - 2);
                        let gap_end = gap_start + 1 + next(end - gap_start - 1);
                        if gap_end < end {
                            b.gaps = vec![Lifetime {
                                start: gap_start,
                                end: gap_end,
                            }];
                        }
                    }
                    b
                })
                .collect();
            let problem = Problem::from_buffers(buffers).unwrap();
            let segments: Vec<Vec<Lifetime>> = problem
                .buffers()
                .iter()
                .map(|b| b.live_segments())
                .collect();
            let shared = |a: &[Lifetime], b: &[Lifetime]| -> u128 {
                a.iter()
                    .flat_map(|x| b.iter().filter_map(move |y| x.intersection(*y)))
                    .map(|l| u128::from(l.len()))
                    .sum()
            };
            let expected: Vec<u128> = (0..segments.len())
                .map(|i| {
                    (0..segments.len())
                        .filter(|&j| j != i)
                        .map(|j| shared(&segments[i], &segments[j]))
                        .sum()
                })
                .collect();
            assert_eq!(overlaps(&problem), expected, "{n} buffers");
        }
    }

    #[test]
    fn orders_follow_the_combination() {
        let problem = Problem::from_buffers(vec![
            Buffer::new("long", 2, 0, 10),
            Buffer::new("big", 8, 0, 2),
            Buffer::new("mid", 4, 0, 5),
        ])
        .unwrap();
        let order = |m: &str| m.parse::<Metric>().unwrap().order(&problem);
        assert_eq!(order("size"), vec![1, 2, 0]);
        assert_eq!(order("length"), vec![0, 2, 1]);
        // Areas 20, 16, 20: ties by start, then id.
        assert_eq!(order("size*length"), vec![0, 2, 1]);
        assert_eq!(order("size/length"), vec![1, 2, 0]);
        // Normalised: long 0.25 + 1, big 1 + 0.2, mid 0.5 + 0.5.
        assert_eq!(order("size+length"), vec![0, 1, 2]);
        let up = |m: &str| {
            m.parse::<Metric>()
                .unwrap()
                .order_in(&problem, Direction::Ascending)
        };
        assert_eq!(up("size"), vec![0, 2, 1]);
        assert_eq!(up("length,size"), vec![1, 2, 0]);
        // Ties keep their rule in both directions: areas 20, 16, 20.
        assert_eq!(up("size*length"), vec![1, 0, 2]);
        assert_eq!(up("size+length"), vec![2, 1, 0]);
    }

    #[test]
    fn directions_parse() {
        assert_eq!("ascending".parse(), Ok(Direction::Ascending));
        assert_eq!("desc".parse(), Ok(Direction::Descending));
        assert!("up".parse::<Direction>().unwrap_err().contains("'up'"));
    }
}
