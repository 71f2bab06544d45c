//! A large-neighbourhood search that lowers the arena of a valid plan.
//!
//! The arena is made by the buffers whose top (`offset + size`) equals it: the *peak
//! buffers*. Each round picks one of them and frees a rectangle of the plan: a time window
//! and an address band. Every unfixed buffer live only inside the window whose top is in
//! the band is removed (at most a random cap of them, highest tops first), and the peak
//! buffer with them; the others stay where they are. Three shapes ([`Shape`]): a few
//! median lifetimes around a random step of the peak buffer's lifetime under a band of
//! 2-100 % of the arena; a long-lived peak buffer's whole lifetime under a thin band; a
//! wider window around a step where the max-live bound is made, the buffers live at that
//! step above a random floor. The removed buffers are then placed again, one at a time,
//! in several orders, each with the placement scan of the greedy planners ([`scan`]:
//! first-fit or best-fit among the gaps left by the buffers it must not share bytes
//! with):
//!
//! ```text
//!  address                                      round: free the rectangle around the
//!  arena ┤····┌──p──┐·····┌───┐·····             peak buffer p (window × band), place
//!        │ ┌──┴─┐ ┌─┴──┐  │   │  ◄─ band         its buffers again in a new order;
//!        │ └────┘ └────┘  └───┘                  keep the result when the score
//!        │ ▓▓▓▓▓▓▓▓▓▓▓▓▓▓▓▓▓▓▓▓▓  kept           (arena, peak buffers, sum of their
//!        └───────[ window ]──────▶ time          tops) is not worse
//! ```
//!
//! The orders: the peak buffer first then largest first, largest first (best-fit,
//! first-fit, and with sizes perturbed by up to 10 %), longest lifetime first, largest area (size × lifetime) first, and the old
//! offsets ascending with first-fit. The last one never raises a top (each buffer's old
//! place is still free when its turn comes), so a round always has a candidate no worse
//! than the current plan. A result is kept when its score (arena, number of buffers whose
//! top is the arena, sum of the tops of the re-placed buffers) is lexicographically not
//! worse: fewer peak buffers is progress towards a lower arena, and equal scores let the
//! plan drift to other packings. An order stops as soon as a top exceeds the arena.
//!
//! The run ends at the deadline, after a number of rounds, at a target arena (a lower
//! bound), or when a fixed buffer makes the arena. The result is checked with
//! [`crate::checker::check`]; should it fail, the input plan is returned.
//!
//! For a seed and a round limit that ends the run before the deadline, the result is
//! deterministic.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::placement::{merge, scan, Fit};
use super::zero_size::Split;
use crate::bound::live_profile;
use crate::checker::check;
use crate::plan::Plan;
use crate::problem::Problem;

/// When [`improve`] stops.
#[derive(Clone, Copy, Debug)]
pub struct Limits<'a> {
    /// No round starts after this.
    pub deadline: Instant,
    /// At most this many rounds.
    pub rounds: u64,
    /// Stop once the arena is at most this (a lower bound: nothing below it exists).
    pub target: u64,
    /// Stop when this becomes true (another thread reached the target).
    pub stop: Option<&'a AtomicBool>,
    /// Stop when this becomes true (the caller cancelled the run, e.g. on Ctrl-C).
    pub cancel: Option<&'a AtomicBool>,
}

/// The result of [`improve`].
#[derive(Clone, Debug)]
pub struct Improved {
    /// The best plan (checked valid); its arena is at most the input's.
    pub plan: Plan,
    /// Its arena.
    pub arena: u64,
    /// Rounds run.
    pub rounds: u64,
    /// Rounds whose result was kept.
    pub accepted: u64,
    /// When the arena last went down (`None` when it never did).
    pub improved_at: Option<Instant>,
}

/// A small deterministic generator (SplitMix64).
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`; the bias of the modulo is irrelevant here).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Lowers the arena of `plan` (valid for `problem`) by large-neighbourhood search around
/// the peak buffers; see the module documentation. Never returns a worse arena or an
/// invalid plan: when `plan` is not valid for `problem`, it is returned unchanged.
///
/// Zero-size buffers are left out of the search (they occupy nothing) and end at their
/// fixed offset or 0 in the result.
pub fn improve(problem: &Problem, plan: &Plan, limits: &Limits, seed: u64) -> Improved {
    let Some(split) = Split::of(problem) else {
        return improve_sized(problem, plan, limits, seed);
    };
    let unchanged = || Improved {
        plan: plan.clone(),
        arena: plan.arena_bytes.unwrap_or(u64::MAX),
        rounds: 0,
        accepted: 0,
        improved_at: None,
    };
    if plan.arena_bytes.is_none() || !check(problem, plan).is_valid() {
        return unchanged();
    }
    let improved = improve_sized(&split.problem, &split.reduce(plan), limits, seed);
    match split.expand(problem, &improved.plan) {
        // At most the input's arena: the input is valid, so its arena is at least the
        // kept buffers' and every zero-size buffer's fixed offset.
        Ok(full) => Improved {
            arena: full.arena_bytes.unwrap_or(u64::MAX),
            plan: full,
            ..improved
        },
        Err(_) => unchanged(),
    }
}

/// [`improve`] on a problem without zero-size buffers.
fn improve_sized(problem: &Problem, plan: &Plan, limits: &Limits, seed: u64) -> Improved {
    let unchanged = |rounds| Improved {
        plan: plan.clone(),
        arena: plan.arena_bytes.unwrap_or(u64::MAX),
        rounds,
        accepted: 0,
        improved_at: None,
    };
    let Some(arena) = plan.arena_bytes else {
        return unchanged(0);
    };
    let no_time = limits.rounds == 0 || Instant::now() >= limits.deadline;
    if no_time || arena <= limits.target || !check(problem, plan).is_valid() {
        return unchanged(0);
    }
    let mut lns = Lns::new(problem, plan, seed);
    let mut rounds = 0;
    let mut accepted = 0;
    let mut improved_at = None;
    while rounds < limits.rounds
        && lns.arena > limits.target
        && Instant::now() < limits.deadline
        && !limits.stop.is_some_and(|s| s.load(Ordering::Relaxed))
        && !limits.cancel.is_some_and(|s| s.load(Ordering::Relaxed))
    {
        rounds += 1;
        let before = lns.arena;
        match lns.round(limits.deadline) {
            Round::Kept => accepted += 1,
            Round::Rejected => {}
            Round::Stuck => break,
        }
        if lns.arena < before {
            improved_at = Some(Instant::now());
        }
    }
    if lns.arena >= arena {
        return Improved {
            accepted,
            ..unchanged(rounds)
        };
    }
    match Plan::new(problem, lns.offsets) {
        Some(better) if check(problem, &better).is_valid() => Improved {
            arena: better.arena_bytes.unwrap_or(arena),
            plan: better,
            rounds,
            accepted,
            improved_at,
        },
        _ => {
            debug_assert!(false, "the LNS produced an invalid plan");
            unchanged(rounds)
        }
    }
}

/// How a round ended.
enum Round {
    Kept,
    Rejected,
    /// No unfixed buffer reaches the arena: nothing to improve.
    Stuck,
}

/// `(arena, buffers whose top is the arena, sum of the re-placed buffers' tops)`: lower
/// is better, compared lexicographically.
type Score = (u64, usize, u128);

/// The time window of a round.
#[derive(Clone, Copy)]
enum Shape {
    /// A few median lifetimes around a random step of the peak buffer's lifetime.
    Window,
    /// The peak buffer's whole lifetime (for a long-lived one), under a thin band.
    Column,
    /// 16 to 1,024 median lifetimes around one of the steps where the most bytes are live
    /// (where the max-live bound is made); only the buffers live at that step, above a
    /// random floor.
    Section,
}

/// The state of the search: the current plan and the reusable buffers of a round.
struct Lns<'p> {
    problem: &'p Problem,
    offsets: Vec<u64>,
    /// `offsets[i] + size`; fits in a `u64` because the plan's arena does.
    tops: Vec<u64>,
    arena: u64,
    /// Buffer ids by lifetime start.
    by_start: Vec<u32>,
    /// `(start, end)` of each buffer's lifetime (gaps included).
    life: Vec<(u64, u64)>,
    /// Whether each buffer has gaps (then [`crate::problem::Buffer::live_together`] decides).
    gappy: Vec<bool>,
    /// Whether each buffer may move (no fixed offset).
    movable: Vec<bool>,
    /// The median lifetime length (at least 1): the unit of the time windows.
    median_len: u64,
    /// The steps where at least 99 % of the max-live bytes are live.
    hot: Vec<u64>,
    /// `partners[partner_first[i]..partner_first[i + 1]]`: buffer `i`'s conflict partners.
    partner_first: Vec<u32>,
    partners: Vec<u32>,
    /// Position of each buffer in `removed`, `u32::MAX` when kept.
    slot: Vec<u32>,
    rng: Rng,
    // Per-round scratch.
    /// The time window of the round, `[from, to)`.
    window: (u64, u64),
    removed: Vec<u32>,
    kept_near: Vec<u32>,
    /// `kept_ranges[kept_first[k]..kept_first[k + 1]]`: the union of the address ranges of
    /// the kept buffers that `removed[k]` must not share bytes with, sorted.
    kept_first: Vec<usize>,
    kept_ranges: Vec<(u64, u64)>,
    /// `neighbours[neighbour_first[k]..neighbour_first[k + 1]]`: the positions in
    /// `removed` of the removed buffers that `removed[k]` must not share bytes with.
    neighbour_first: Vec<usize>,
    neighbours: Vec<u32>,
    ranges: Vec<(u64, u64)>,
    merged: Vec<(u64, u64)>,
}

impl<'p> Lns<'p> {
    fn new(problem: &'p Problem, plan: &Plan, seed: u64) -> Lns<'p> {
        let buffers = problem.buffers();
        let offsets = plan.offsets.clone();
        let tops: Vec<u64> = buffers
            .iter()
            .zip(&offsets)
            .map(|(b, &o)| o.saturating_add(b.size))
            .collect();
        let arena = tops.iter().copied().max().unwrap_or(0);
        let life: Vec<(u64, u64)> = buffers
            .iter()
            .map(|b| (b.lifetime.start, b.lifetime.end))
            .collect();
        let mut lengths: Vec<u64> = life.iter().map(|&(s, e)| e - s).collect();
        let middle = lengths.len() / 2;
        let median_len = if lengths.is_empty() {
            1
        } else {
            *lengths.select_nth_unstable(middle).1
        };
        let mut by_start: Vec<u32> = (0..buffers.len() as u32).collect();
        by_start.sort_unstable_by_key(|&i| (buffers[i as usize].lifetime.start, i));
        let mut degree = vec![0u32; buffers.len()];
        for &(a, b) in problem.conflicts() {
            degree[a.index()] += 1;
            degree[b.index()] += 1;
        }
        let mut partner_first = Vec::with_capacity(buffers.len() + 1);
        let mut total = 0u32;
        for d in &degree {
            partner_first.push(total);
            total += d;
        }
        partner_first.push(total);
        let mut fill = partner_first.clone();
        let mut partners = vec![0u32; total as usize];
        for &(a, b) in problem.conflicts() {
            partners[fill[a.index()] as usize] = b.0;
            fill[a.index()] += 1;
            partners[fill[b.index()] as usize] = a.0;
            fill[b.index()] += 1;
        }
        Lns {
            problem,
            offsets,
            tops,
            arena,
            by_start,
            gappy: buffers.iter().map(|b| !b.gaps.is_empty()).collect(),
            movable: buffers.iter().map(|b| b.fixed_offset.is_none()).collect(),
            life,
            median_len: median_len.max(1),
            hot: hot_steps(problem),
            partner_first,
            partners,
            slot: vec![u32::MAX; buffers.len()],
            rng: Rng(seed ^ 0x6a09_e667_f3bc_c908),
            window: (0, 0),
            removed: Vec::new(),
            kept_near: Vec::new(),
            kept_first: Vec::new(),
            kept_ranges: Vec::new(),
            neighbour_first: Vec::new(),
            neighbours: Vec::new(),
            ranges: Vec::new(),
            merged: Vec::new(),
        }
    }

    /// One round: choose a rectangle around a peak buffer, re-place its buffers in several
    /// orders, keep the best result when it is not worse.
    fn round(&mut self, deadline: Instant) -> Round {
        let buffers = self.problem.buffers();
        let peaks: Vec<u32> = (0..buffers.len() as u32)
            .filter(|&i| {
                self.tops[i as usize] == self.arena && buffers[i as usize].fixed_offset.is_none()
            })
            .collect();
        if peaks.is_empty() {
            return Round::Stuck;
        }
        let peak = peaks[self.rng.below(peaks.len() as u64) as usize] as usize;
        self.choose(peak);
        // A round past the deadline ends unfinished and changes nothing: on 10^6 buffers
        // with 20,000 live at once one round gathered for seconds (issue #18).
        if !self.gather(deadline) {
            return self.end_round(Round::Rejected);
        }

        let kept = self.kept_peak();
        let old: Vec<u64> = self
            .removed
            .iter()
            .map(|&i| self.offsets[i as usize])
            .collect();
        let current = self.score_of(kept, &old);
        let mut best: Option<(Score, Vec<u64>)> = None;
        for order in self.orders() {
            if Instant::now() >= deadline {
                return self.end_round(Round::Rejected);
            }
            let Some(placed) = self.place(&order.0, order.1) else {
                continue;
            };
            let score = self.score_of(kept, &placed);
            if best.as_ref().is_none_or(|(b, _)| score < *b) {
                best = Some((score, placed));
            }
        }
        let outcome = match best {
            Some((score, placed)) if score <= current => {
                for (k, &i) in self.removed.iter().enumerate() {
                    let i = i as usize;
                    self.offsets[i] = placed[k];
                    self.tops[i] = placed[k] + buffers[i].size;
                }
                self.arena = score.0;
                Round::Kept
            }
            _ => Round::Rejected,
        };
        self.end_round(outcome)
    }

    /// Returns the removed buffers to the kept ones' bookkeeping; passes `outcome` on.
    fn end_round(&mut self, outcome: Round) -> Round {
        for &i in &self.removed {
            self.slot[i as usize] = u32::MAX;
        }
        outcome
    }

    /// Fills `removed` with the buffers of a random rectangle for `peak` (see [`Shape`]):
    /// the unfixed buffers live only inside the window whose top is above the floor (the
    /// highest tops when they are too many), and `peak` itself, last.
    fn choose(&mut self, peak: usize) {
        let life = self.life[peak];
        let shape = match self.rng.below(3) {
            0 if life.1 - life.0 > self.median_len.saturating_mul(16) => Shape::Column,
            1 if !self.hot.is_empty() => Shape::Section,
            _ => Shape::Window,
        };
        let mut hot = None;
        let (from, to) = match shape {
            Shape::Window => {
                let t = life.0 + self.rng.below(life.1 - life.0);
                let w = self
                    .median_len
                    .saturating_mul([1u64, 4, 16][self.rng.below(3) as usize]);
                (t.saturating_sub(w), t.saturating_add(w))
            }
            Shape::Column => life,
            Shape::Section => {
                let t = self.hot[self.rng.below(self.hot.len() as u64) as usize];
                hot = Some(t);
                let w = self
                    .median_len
                    .saturating_mul([16, 64, 256, 1024][self.rng.below(4) as usize]);
                (t.saturating_sub(w), t.saturating_add(w))
            }
        };
        let (fractions, caps): (&[f64], &[usize]) = match shape {
            Shape::Column => (&[0.002, 0.005, 0.01, 0.02], &[64, 256]),
            Shape::Section => (&[1.0], &[256, 1024]),
            _ => (&[0.02, 0.05, 0.1, 0.25, 1.0], &[32, 96, 256]),
        };
        let fraction = fractions[self.rng.below(fractions.len() as u64) as usize];
        let cap = caps[self.rng.below(caps.len() as u64) as usize];
        let size = self.problem.buffers()[peak].size;
        let band = ((self.arena as f64 * fraction) as u64).max(size);
        let floor = match shape {
            // A random floor: the section's stack above it.
            Shape::Section => self.rng.below(self.arena),
            _ => self.arena.saturating_sub(band),
        };

        self.removed.clear();
        let first = self
            .by_start
            .partition_point(|&i| self.life[i as usize].0 < from);
        for &i in &self.by_start[first..] {
            let (start, end) = self.life[i as usize];
            if start >= to {
                break;
            }
            if end <= to
                && hot.is_none_or(|t| start <= t && t < end)
                && self.tops[i as usize] > floor
                && self.movable[i as usize]
                && i as usize != peak
            {
                self.removed.push(i);
            }
        }
        if self.removed.len() >= cap {
            let tops = &self.tops;
            self.removed
                .sort_unstable_by_key(|&i| (std::cmp::Reverse(tops[i as usize]), i));
            self.removed.truncate(cap - 1);
        }
        self.removed.push(peak as u32);
        for (k, &i) in self.removed.iter().enumerate() {
            self.slot[i as usize] = k as u32;
        }
        // Every removed buffer but (perhaps) the peak is live only inside the window.
        self.window = (from, to);
    }

    /// For each removed buffer: the union of the kept buffers' ranges it must avoid, and
    /// its removed neighbours. False (unfinished) when the deadline passes.
    fn gather(&mut self, deadline: Instant) -> bool {
        let buffers = self.problem.buffers();
        let (from, to) = self.window;
        // The kept buffers live in the window, by offset: the ranges of a removed buffer
        // inside the window come out sorted.
        self.kept_near.clear();
        for &i in &self.by_start {
            let (start, end) = self.life[i as usize];
            if start >= to {
                break;
            }
            if end > from && self.slot[i as usize] == u32::MAX {
                self.kept_near.push(i);
            }
        }
        let offsets = &self.offsets;
        self.kept_near
            .sort_unstable_by_key(|&i| (offsets[i as usize], i));
        self.kept_first.clear();
        self.kept_ranges.clear();
        self.neighbour_first.clear();
        self.neighbours.clear();
        for k in 0..self.removed.len() {
            if Instant::now() >= deadline {
                return false;
            }
            let x = self.removed[k] as usize;
            let bx = &buffers[x];
            let (start, end) = self.life[x];
            self.kept_first.push(self.kept_ranges.len());
            self.ranges.clear();
            let must_avoid = |f: usize| {
                let (s, e) = self.life[f];
                s < end
                    && start < e
                    && (!(self.gappy[x] || self.gappy[f]) || bx.live_together(&buffers[f]))
            };
            if start >= from && end <= to {
                for &f in &self.kept_near {
                    let f = f as usize;
                    if must_avoid(f) {
                        self.ranges.push((self.offsets[f], self.tops[f]));
                    }
                }
            } else {
                // The peak buffer, live beyond the window: every kept buffer it meets.
                for &f in &self.by_start {
                    let f = f as usize;
                    if self.life[f].0 >= end {
                        break;
                    }
                    if self.slot[f] == u32::MAX && must_avoid(f) {
                        self.ranges.push((self.offsets[f], self.tops[f]));
                    }
                }
                self.ranges.sort_unstable();
            }
            let sorted = self.ranges.len();
            self.neighbour_first.push(self.neighbours.len());
            for (j, &y) in self.removed.iter().enumerate() {
                if j != k && must_avoid(y as usize) {
                    self.neighbours.push(j as u32);
                }
            }
            let partners = self.partner_first[x] as usize..self.partner_first[x + 1] as usize;
            for &p in &self.partners[partners] {
                let p = p as usize;
                match self.slot[p] {
                    u32::MAX => self.ranges.push((self.offsets[p], self.tops[p])),
                    j => self.neighbours.push(j),
                }
            }
            if self.ranges.len() > sorted {
                // Kept conflict partners: few, sorted on their own, then merged in.
                self.ranges[sorted..].sort_unstable();
                let (near, partners) = self.ranges.split_at(sorted);
                self.merged.clear();
                merge(near, partners, &mut self.merged);
                std::mem::swap(&mut self.ranges, &mut self.merged);
            }
            let first = self.kept_first[k];
            for &(lo, hi) in &self.ranges {
                match self.kept_ranges[first..].last_mut() {
                    Some(last) if lo <= last.1 => last.1 = last.1.max(hi),
                    _ => self.kept_ranges.push((lo, hi)),
                }
            }
        }
        self.kept_first.push(self.kept_ranges.len());
        self.neighbour_first.push(self.neighbours.len());
        true
    }

    /// The orders (positions in `removed`) and fits tried this round.
    fn orders(&mut self) -> Vec<(Vec<u32>, Fit)> {
        let buffers = self.problem.buffers();
        let removed = &self.removed;
        let by = |key: &dyn Fn(usize) -> (u128, u128)| {
            let mut order: Vec<u32> = (0..removed.len() as u32).collect();
            order.sort_by_key(|&k| {
                let (a, b) = key(removed[k as usize] as usize);
                (std::cmp::Reverse(a), std::cmp::Reverse(b), k)
            });
            order
        };
        let size = |i: usize| buffers[i].size as u128;
        let len = |i: usize| buffers[i].lifetime.len() as u128;
        let by_size = by(&|i| (size(i), len(i)));
        let by_length = by(&|i| (len(i), size(i)));
        let by_area = by(&|i| (size(i) * len(i), size(i)));
        let offsets = &self.offsets;
        let mut by_offset: Vec<u32> = (0..removed.len() as u32).collect();
        by_offset.sort_by_key(|&k| (offsets[removed[k as usize] as usize], k));
        let mut noisy: Vec<(f64, u32)> = (0..removed.len() as u32)
            .map(|k| {
                let s = buffers[removed[k as usize] as usize].size as f64;
                (s * (0.9 + 0.2 * self.rng.unit()), k)
            })
            .collect();
        noisy.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        // The peak buffer (last in `removed`) first, then largest first.
        let mut peak_first = by_size.clone();
        let last = removed.len() as u32 - 1;
        peak_first.retain(|&k| k != last);
        peak_first.insert(0, last);
        vec![
            (peak_first, Fit::Best),
            (by_size.clone(), Fit::Best),
            (by_size, Fit::First),
            (by_length, Fit::Best),
            (by_area, Fit::Best),
            (noisy.into_iter().map(|(_, k)| k).collect(), Fit::Best),
            (by_offset, Fit::First),
        ]
    }

    /// Places the removed buffers in `order` with `fit`; their offsets by position in
    /// `removed`, or `None` as soon as a top would exceed the arena.
    fn place(&mut self, order: &[u32], fit: Fit) -> Option<Vec<u64>> {
        let buffers = self.problem.buffers();
        let mut placed = vec![u64::MAX; self.removed.len()];
        for &k in order {
            let k = k as usize;
            let b = &buffers[self.removed[k] as usize];
            let kept = &self.kept_ranges[self.kept_first[k]..self.kept_first[k + 1]];
            self.merged.clear();
            for &j in &self.neighbours[self.neighbour_first[k]..self.neighbour_first[k + 1]] {
                let o = placed[j as usize];
                if o != u64::MAX {
                    self.merged
                        .push((o, o + buffers[self.removed[j as usize] as usize].size));
                }
            }
            self.merged.sort_unstable();
            self.ranges.clear();
            merge(kept, &self.merged, &mut self.ranges);
            let offset = scan(&self.ranges, b.size, b.alignment, fit).ok()?;
            if offset.checked_add(b.size)? > self.arena {
                return None;
            }
            placed[k] = offset;
        }
        Some(placed)
    }

    /// `(highest top, buffers with that top)` among the kept buffers.
    fn kept_peak(&self) -> (u64, usize) {
        let mut peak = (0, 0);
        for (i, &top) in self.tops.iter().enumerate() {
            if self.slot[i] == u32::MAX {
                bump(&mut peak, top);
            }
        }
        peak
    }

    /// The score of the plan with the removed buffers at `placed`, the kept ones making
    /// `kept` ([`Lns::kept_peak`]).
    fn score_of(&self, kept: (u64, usize), placed: &[u64]) -> Score {
        let buffers = self.problem.buffers();
        let mut peak = kept;
        let mut sum = 0u128;
        for (k, &i) in self.removed.iter().enumerate() {
            let top = placed[k] + buffers[i as usize].size;
            bump(&mut peak, top);
            sum += top as u128;
        }
        (peak.0, peak.1, sum)
    }
}

/// The steps where at least 99 % of the max-live bytes are live (empty when the profile
/// overflows).
fn hot_steps(problem: &Problem) -> Vec<u64> {
    let profile = live_profile(problem).unwrap_or_default();
    let most = profile.iter().map(|&(_, live)| live).max().unwrap_or(0);
    profile
        .iter()
        .filter(|&&(_, live)| live > 0 && live as f64 >= 0.99 * most as f64)
        .map(|&(t, _)| t)
        .collect()
}

/// Adds a top to `(highest top, how many have it)`.
fn bump(peak: &mut (u64, usize), top: u64) {
    if top > peak.0 {
        *peak = (top, 1);
    } else if top == peak.0 {
        peak.1 += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::Buffer;

    #[test]
    fn a_round_past_the_deadline_changes_nothing() {
        let buffers: Vec<Buffer> = (0..40u64)
            .map(|i| Buffer::new(format!("b{i}"), 1 + i % 7, i / 2, i / 2 + 3))
            .collect();
        let problem = Problem::from_buffers(buffers).unwrap();
        // Stacked: every buffer above the previous one, far from the bound.
        let mut top = 0;
        let offsets: Vec<u64> = problem
            .buffers()
            .iter()
            .map(|b| {
                top += b.size;
                top - b.size
            })
            .collect();
        let plan = Plan::new(&problem, offsets.clone()).unwrap();
        let mut lns = Lns::new(&problem, &plan, 7);
        let passed = Instant::now();
        assert!(matches!(lns.round(passed), Round::Rejected));
        assert_eq!(lns.offsets, offsets);
        assert!(lns.slot.iter().all(|&s| s == u32::MAX));
        // With time, rounds lower the arena of this plan.
        let later = Instant::now() + std::time::Duration::from_secs(60);
        let arena = lns.arena;
        for _ in 0..50 {
            lns.round(later);
        }
        assert!(lns.arena < arena);
        assert!(lns.slot.iter().all(|&s| s == u32::MAX));
    }
}
