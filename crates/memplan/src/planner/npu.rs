//! `npu`: the shared-objects allocation of the `npu` method (NPU heterogeneous platforms).
//!
//! Buffers are assigned to *shared objects* (the method's pool buffers); the method's
//! memory is the sum of the objects' sizes. The objects are then given offsets in one
//! arena ([`Layout`]), and every buffer gets the offset of its object:
//!
//! - [`Layout::Offsets`] (default): each object is a buffer of its own whose usage period
//!   is the union of its members' live segments, and an offset planner ([`BestOf`]) places
//!   these objects, so two objects used at disjoint times may share bytes. The method's
//!   assignment (which tensors share an object) is kept unchanged; when the offset
//!   planner's arena would exceed the end-to-end one, the objects stay end to end;
//! - [`Layout::EndToEnd`]: objects in creation order, end to end (the arena is then the
//!   method's memory, the sum of the objects' sizes).
//!
//! ```text
//!  objects:  ┌── object 0 (8) ──┐┌─ object 1 (4) ─┐
//!  members:   a [0,2)  c [3,5)    b [1,4)
//!  end to end: 0                8                12   a, c at 0; b at 8
//! ```
//!
//! The allocation runs in the method's groups, which a front-end (`memplan_graph::npu`)
//! derives from the operators and a platform description ([`Groups`]):
//!
//! 1. *dedicated* buffers (group 1's tensors when the platform gives the accelerated
//!    operators memory of their own), in order, each get a new object of their own;
//!    unless [`Groups::share_dedicated`], no other buffer ever joins such an object;
//! 2. *early* buffers (group 1's tensors when they go through the pool, the method's
//!    reading and the default, then the in-place operators' blocks), in order, each look
//!    in the pool;
//! 3. *steps* (the other operators): sorted by *width*, the bytes live at the step,
//!    largest first (ties: earlier step); at each step every buffer live there and not
//!    yet assigned, largest first (ties: lower id), looks in the pool;
//!
//! and finally every buffer still unassigned (live at none of those steps), largest first.
//! "Looks in the pool" is the matching rule ([`Match`]): a buffer joins a matching object
//! or, when none matches, becomes a new object added to the pool.
//!
//! An object *is free for* a buffer when none of its members is live at a common step
//! with the buffer nor a conflict pair with it (so every plan is valid by construction;
//! the checker is still run on it by every caller; freedom over the lifetime is our
//! addition: the source states no lifetime condition). Of the free objects,
//! - [`Match::Size`], the method's size match as stated, takes, among those of size ≥ the
//!   buffer's (and at most the [`Slack`] allows, when one is given; the default,
//!   [`Slack::Any`], bounds nothing), the one of least size difference (ties: the usage
//!   periods closest in time, as lifetime match measures it, then lower index); none → a
//!   new object;
//! - [`Match::Exact`], **a deviation from the method** (the default of the `npu` planner
//!   and the CLI, documented and measured against [`Match::Size`] in doc/npu.md): size
//!   match restricted to objects of exactly the buffer's size (ties as above); none → a
//!   new object;
//! - [`Match::Lifetime`] takes the one whose members' usage periods come closest in time
//!   to the buffer's lifetime (the shortest gap in steps; ties: the least size difference,
//!   then lower index). When that object is smaller than the buffer, it *grows* to the
//!   buffer's size: growing costs the difference, a new object would cost the whole size,
//!   and the method picks the object by time, not by size. None free → a new object.
//!
//! Buffers with a fixed offset keep it and join no object; the objects start above the
//! highest fixed buffer. An object is aligned to the least common multiple of its members'
//! alignments. A zero-size buffer joins no object either (it would make a zero-size object
//! or change an object's alignment, for no byte): it goes to its fixed offset or 0 and is
//! skipped by every group.
//!
//! On a bare [`Problem`] (no graph: `Npu` as a [`Planner`]) there are no operators to
//! group: every distinct start step of a live segment is an operator of group 3
//! ([`Groups::steps_only`]).

use std::collections::BTreeSet;

use super::{BestOf, PlanError, Planner};
use crate::bound;
use crate::plan::Plan;
use crate::problem::{lcm, Buffer, BufferId, Lifetime, Problem};

/// How a buffer picks an object of the pool (the `npu` method: size and lifetime match,
/// and the exact-size deviation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Match {
    /// A deviation from the method, and the default: the free object of exactly the
    /// buffer's size (size match restricted to a difference of 0).
    #[default]
    Exact,
    /// The method's size match as stated: the free object of size ≥ the buffer's whose
    /// size differs least (bounded by a [`Slack`] only when one is given).
    Size,
    /// The free object whose usage periods are closest in time (grown when smaller).
    Lifetime,
}

impl Match {
    /// `exact`, `size` or `lifetime`, as `--match` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Match::Exact => "exact",
            Match::Size => "size",
            Match::Lifetime => "lifetime",
        }
    }
}

/// Which pool objects [`Match::Size`] accepts for a buffer: those whose size exceeds the
/// buffer's by at most this much. The default, [`Slack::Any`], is the method's rule;
/// a percentage is a deviation (`Percent(0)` is [`Match::Exact`]). [`Match::Exact`] and
/// [`Match::Lifetime`] ignore it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Slack {
    /// At most this percentage of the buffer's size more.
    Percent(u64),
    /// Any larger object (the least difference still wins): the method's rule.
    #[default]
    Any,
}

impl Slack {
    /// The largest object size accepted for a buffer of `size` bytes.
    pub fn most(self, size: u64) -> u64 {
        match self {
            Slack::Percent(p) => {
                let extra = (u128::from(size) * u128::from(p)) / 100;
                u64::try_from(u128::from(size) + extra).unwrap_or(u64::MAX)
            }
            Slack::Any => u64::MAX,
        }
    }

    /// Parses `any` or a percentage (`0`, `25`, `25%`).
    pub fn parse(text: &str) -> Option<Slack> {
        match text.trim() {
            "any" => Some(Slack::Any),
            t => t.trim_end_matches('%').parse().ok().map(Slack::Percent),
        }
    }
}

impl std::fmt::Display for Slack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Slack::Percent(p) => write!(f, "{p}%"),
            Slack::Any => f.write_str("any"),
        }
    }
}

/// How the shared objects get their offsets in the arena (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Each object a buffer living over the union of its members' live segments, placed
    /// by the offset planner [`BestOf`]: objects used at disjoint times may share bytes
    /// (end to end instead if that is smaller).
    #[default]
    Offsets,
    /// Objects in creation order, end to end: the arena is the sum of their sizes.
    EndToEnd,
}

impl Layout {
    /// `offsets` or `end-to-end`, as the planner option `layout=` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Layout::Offsets => "offsets",
            Layout::EndToEnd => "end-to-end",
        }
    }
}

/// The allocation order of the method's three groups (see the module documentation).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Groups {
    /// Group 1, in order: each gets an object of its own.
    pub dedicated: Vec<BufferId>,
    /// Whether later buffers may join the objects of group 1 (otherwise they never do).
    pub share_dedicated: bool,
    /// Group 2 (after group 1's buffers when those go through the pool), in order: each
    /// looks in the pool before group 3.
    pub early: Vec<BufferId>,
    /// Group 3: the steps of the other operators (any order: they are sorted by width).
    pub steps: Vec<u64>,
}

impl Groups {
    /// Group 3 only, one operator per distinct start step of a live segment of a buffer of
    /// at least one byte (what a bare problem without a graph offers).
    pub fn steps_only(problem: &Problem) -> Groups {
        let mut steps = Vec::new();
        for buffer in problem.buffers().iter().filter(|b| b.size > 0) {
            buffer.for_each_live_segment(|s| steps.push(s.start));
        }
        steps.sort_unstable();
        steps.dedup();
        Groups {
            steps,
            ..Groups::default()
        }
    }
}

/// One shared object of the pool (a "buffer" of the method).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedObject {
    /// Bytes: the largest member's size.
    pub size: u64,
    /// The least common multiple of its members' alignments.
    pub alignment: u64,
    /// The buffers stored in it, in the order they joined.
    pub members: Vec<BufferId>,
    /// True for an object of group 1.
    pub dedicated: bool,
}

/// The method's statistics of one allocation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NpuStats {
    /// Number of objects (pool buffers).
    pub buffers: usize,
    /// How many of them are group 1's (dedicated).
    pub dedicated_buffers: usize,
    /// Bytes of buffers that joined an existing object (up to its size at that moment).
    pub reused_bytes: u64,
    /// Bytes of new objects plus the bytes objects grew by: the sum of the objects' sizes.
    pub new_pool_bytes: u64,
    /// Of `new_pool_bytes`, the bytes added by growing objects (lifetime match only).
    pub grown_bytes: u64,
}

/// The result: objects, each buffer's object, the statistics and the arena plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assignment {
    pub objects: Vec<SharedObject>,
    /// `object_of[i]`: the object holding buffer `i`; `None` for a fixed-offset or a
    /// zero-size buffer.
    pub object_of: Vec<Option<usize>>,
    pub stats: NpuStats,
    /// Every member at its object's offset; the objects placed per the [`Layout`] (above
    /// the fixed buffers when end to end, around them when by offsets).
    pub plan: Plan,
}

/// The pool while it is being built.
///
/// Each object keeps the live segments of its members, sorted and disjoint (members never
/// live together), so "free for a buffer" and "gap in time" are binary searches; objects
/// are also kept by size, so that size match stops at the first free object.
struct Pool<'p> {
    problem: &'p Problem,
    rule: Match,
    slack: Slack,
    share_dedicated: bool,
    /// Conflict partners of each buffer.
    partners: Vec<Vec<BufferId>>,
    objects: Vec<SharedObject>,
    /// `segments[k]`: the live segments of object `k`'s members, sorted by start.
    segments: Vec<Vec<Lifetime>>,
    /// `(size, index)` of every object that later buffers may join.
    by_size: BTreeSet<(u64, usize)>,
    object_of: Vec<Option<usize>>,
    stats: NpuStats,
}

/// Where `segment` would go among the sorted disjoint `segments`, or `None` when it
/// overlaps one of them.
fn slot(segments: &[Lifetime], segment: Lifetime) -> Option<usize> {
    let k = segments.partition_point(|s| s.start < segment.end);
    (k == 0 || segments[k - 1].end <= segment.start).then_some(k)
}

/// Steps between `lifetime` and the nearest of the sorted disjoint `segments` (0 when
/// one touches or lies inside it); `u64::MAX` for no segments.
fn time_gap(segments: &[Lifetime], lifetime: Lifetime) -> u64 {
    let k = segments.partition_point(|s| s.start < lifetime.end);
    let before = match k {
        0 => u64::MAX,
        _ => lifetime.start.saturating_sub(segments[k - 1].end),
    };
    let after = segments.get(k).map_or(u64::MAX, |s| s.start - lifetime.end);
    before.min(after)
}

impl<'p> Pool<'p> {
    fn new(problem: &'p Problem, rule: Match, slack: Slack, share_dedicated: bool) -> Pool<'p> {
        let mut partners = vec![Vec::new(); problem.len()];
        for &(a, b) in problem.conflicts() {
            partners[a.index()].push(b);
            partners[b.index()].push(a);
        }
        Pool {
            problem,
            rule,
            slack,
            share_dedicated,
            partners,
            objects: Vec::new(),
            segments: Vec::new(),
            by_size: BTreeSet::new(),
            object_of: vec![None; problem.len()],
            stats: NpuStats::default(),
        }
    }

    /// Whether `id` may join object `k` (no member live with it, none a conflict
    /// partner), and the alignment the object then needs.
    fn free_for(&self, k: usize, id: BufferId, live: &[Lifetime]) -> Option<u64> {
        let segments = &self.segments[k];
        if live.iter().any(|&s| slot(segments, s).is_none()) {
            return None;
        }
        if self.partners[id.index()]
            .iter()
            .any(|p| self.object_of[p.index()] == Some(k))
        {
            return None;
        }
        lcm(self.objects[k].alignment, self.problem.buffer(id).alignment)
    }

    fn add_segments(&mut self, k: usize, live: &[Lifetime]) {
        for &s in live {
            let at = slot(&self.segments[k], s).unwrap_or(self.segments[k].len());
            self.segments[k].insert(at, s);
        }
    }

    fn new_object(&mut self, id: BufferId, dedicated: bool) -> Result<(), PlanError> {
        let buffer = self.problem.buffer(id);
        let k = self.objects.len();
        self.object_of[id.index()] = Some(k);
        self.objects.push(SharedObject {
            size: buffer.size,
            alignment: buffer.alignment,
            members: vec![id],
            dedicated,
        });
        self.segments.push(buffer.live_segments());
        if !dedicated || self.share_dedicated {
            self.by_size.insert((buffer.size, k));
        }
        self.stats.new_pool_bytes = self
            .stats
            .new_pool_bytes
            .checked_add(buffer.size)
            .ok_or(PlanError::ArenaOverflow)?;
        Ok(())
    }

    /// The object the matching rule picks for `id`, with its new alignment.
    fn pick(&self, id: BufferId, live: &[Lifetime]) -> Option<(usize, u64)> {
        let buffer = self.problem.buffer(id);
        match self.rule {
            // Of the free objects of size in [size, the limit]: the least size difference,
            // ties: the usage periods closest in time, then lower index. The limit: the
            // slack's (none by default) for size match, the buffer's size for exact.
            Match::Size | Match::Exact => {
                let most = match self.rule {
                    Match::Exact => buffer.size,
                    _ => self.slack.most(buffer.size),
                };
                let mut best: Option<((u64, u64, usize), u64)> = None;
                for &(size, k) in self.by_size.range((buffer.size, 0)..=(most, usize::MAX)) {
                    let difference = size - buffer.size;
                    if best.is_some_and(|((d, _, _), _)| d < difference) {
                        break;
                    }
                    let key = (difference, time_gap(&self.segments[k], buffer.lifetime), k);
                    if best.is_some_and(|(b, _)| b <= key) {
                        continue;
                    }
                    if let Some(alignment) = self.free_for(k, id, live) {
                        best = Some((key, alignment));
                    }
                }
                best.map(|((_, _, k), alignment)| (k, alignment))
            }
            Match::Lifetime => {
                let mut best: Option<((u64, u64, usize), u64)> = None;
                for &(size, k) in &self.by_size {
                    let gap = time_gap(&self.segments[k], buffer.lifetime);
                    let key = (gap, size.abs_diff(buffer.size), k);
                    if best.is_some_and(|(b, _)| b <= key) {
                        continue;
                    }
                    if let Some(alignment) = self.free_for(k, id, live) {
                        best = Some((key, alignment));
                    }
                }
                best.map(|((_, _, k), alignment)| (k, alignment))
            }
        }
    }

    /// The matching rule: joins a matching object, else adds a new one.
    fn look_up(&mut self, id: BufferId) -> Result<(), PlanError> {
        let buffer = self.problem.buffer(id);
        if self.object_of[id.index()].is_some() || buffer.fixed_offset.is_some() || buffer.size == 0
        {
            return Ok(());
        }
        let live = buffer.live_segments();
        let Some((k, alignment)) = self.pick(id, &live) else {
            return self.new_object(id, false);
        };
        let object = &mut self.objects[k];
        let reused = object.size.min(buffer.size);
        let grown = buffer.size.saturating_sub(object.size);
        if grown > 0 {
            self.by_size.remove(&(object.size, k));
            self.by_size.insert((buffer.size, k));
            object.size = buffer.size;
        }
        object.alignment = alignment;
        object.members.push(id);
        self.object_of[id.index()] = Some(k);
        self.add_segments(k, &live);
        let stats = &mut self.stats;
        stats.reused_bytes = stats
            .reused_bytes
            .checked_add(reused)
            .ok_or(PlanError::ArenaOverflow)?;
        stats.grown_bytes += grown; // at most new_pool_bytes after the next line
        stats.new_pool_bytes = stats
            .new_pool_bytes
            .checked_add(grown)
            .ok_or(PlanError::ArenaOverflow)?;
        Ok(())
    }

    /// The objects' offsets by [`Layout::Offsets`], and the arena: a problem with one buffer per object
    /// (its size and alignment, living over its members' live segments, adjacent segments
    /// merged) and the fixed buffers at their offsets, with a conflict pair wherever a
    /// member of one conflicts with a member (or is) the other, planned by [`BestOf`].
    fn place_objects(&self, fixed: &[usize]) -> Result<(Vec<u64>, u64), PlanError> {
        let buffers = self.problem.buffers();
        let mut placed: Vec<Buffer> = Vec::with_capacity(self.objects.len() + fixed.len());
        for (k, object) in self.objects.iter().enumerate() {
            let mut merged: Vec<Lifetime> = Vec::with_capacity(self.segments[k].len());
            for &s in &self.segments[k] {
                match merged.last_mut() {
                    Some(last) if last.end == s.start => last.end = s.end,
                    _ => merged.push(s),
                }
            }
            // Every member has a live segment; [0, 1) would do for an object with none.
            let (first, last) = match (merged.first(), merged.last()) {
                (Some(f), Some(l)) => (f.start, l.end),
                _ => (0, 1),
            };
            let mut buffer = Buffer::new(format!("object {k}"), object.size, first, last);
            buffer.alignment = object.alignment;
            buffer.gaps = merged
                .windows(2)
                .map(|w| Lifetime {
                    start: w[0].end,
                    end: w[1].start,
                })
                .collect();
            placed.push(buffer);
        }
        let mut index_of: Vec<Option<usize>> = self.object_of.clone();
        for &i in fixed {
            index_of[i] = Some(placed.len());
            let mut buffer = buffers[i].clone();
            buffer.name = format!("fixed {i}");
            placed.push(buffer);
        }
        let mut conflicts = Vec::new();
        for &(a, b) in self.problem.conflicts() {
            if let (Some(x), Some(y)) = (index_of[a.index()], index_of[b.index()]) {
                if x != y {
                    conflicts.push((BufferId(x as u32), BufferId(y as u32)));
                }
            }
        }
        // Valid by construction: sizes, alignments and fixed offsets are the problem's,
        // the segments are disjoint and sorted.
        let objects = Problem::new(placed, conflicts)
            .map_err(|e| PlanError::Internal(format!("npu objects problem: {e}")))?;
        let plan = BestOf.plan(&objects)?;
        let arena = plan.arena_bytes.ok_or(PlanError::ArenaOverflow)?;
        Ok((plan.offsets[..self.objects.len()].to_vec(), arena))
    }

    /// Fixed buffers at their offsets (clashes are errors), objects placed per `layout`;
    /// zero-size buffers at their fixed offset or 0, below nothing.
    fn into_assignment(mut self, layout: Layout) -> Result<Assignment, PlanError> {
        let buffers = self.problem.buffers();
        let fixed: Vec<usize> = (0..buffers.len())
            .filter(|&i| buffers[i].fixed_offset.is_some() && buffers[i].size > 0)
            .collect();
        let mut offsets: Vec<u64> = buffers
            .iter()
            .map(|b| match b.size {
                0 => b.fixed_offset.unwrap_or(0),
                _ => 0,
            })
            .collect();
        let mut cursor = 0u64;
        for (n, &i) in fixed.iter().enumerate() {
            let offset = buffers[i].fixed_offset.unwrap_or(0);
            let end = offset + buffers[i].size; // fits: checked by `Problem::new`
            for &j in &fixed[..n] {
                let other_end = offsets[j] + buffers[j].size;
                let must_not_share = buffers[i].live_together(&buffers[j])
                    || self.partners[i].contains(&BufferId(j as u32));
                if offsets[j] < end && offset < other_end && must_not_share {
                    return Err(PlanError::FixedOffsetsClash {
                        a: buffers[j].name.clone(),
                        b: buffers[i].name.clone(),
                    });
                }
            }
            offsets[i] = offset;
            cursor = cursor.max(end);
        }
        let mut object_offsets = Vec::with_capacity(self.objects.len());
        for object in &self.objects {
            let offset = cursor
                .checked_next_multiple_of(object.alignment)
                .ok_or(PlanError::ArenaOverflow)?;
            cursor = offset
                .checked_add(object.size)
                .ok_or(PlanError::ArenaOverflow)?;
            object_offsets.push(offset);
        }
        if layout == Layout::Offsets {
            // End to end is a valid placement too: the offset planner's wins unless larger.
            let (placed, arena) = self.place_objects(&fixed)?;
            if arena <= cursor {
                object_offsets = placed;
            }
        }
        for (i, object) in self.object_of.iter().enumerate() {
            if let Some(k) = object {
                offsets[i] = object_offsets[*k];
            }
        }
        let plan = Plan::new(self.problem, offsets).ok_or(PlanError::ArenaOverflow)?;
        self.stats.buffers = self.objects.len();
        self.stats.dedicated_buffers = self.objects.iter().filter(|o| o.dedicated).count();
        Ok(Assignment {
            objects: self.objects,
            object_of: self.object_of,
            stats: self.stats,
            plan,
        })
    }
}

/// Runs the method's allocation on `problem` in the order `groups` gives, with `rule`
/// (`slack` bounding [`Match::Size`] only), and places the objects per `layout`.
///
/// Every buffer ends in exactly one object (fixed-offset buffers in none), whatever the
/// groups list: ids out of range are ignored, buffers listed twice are assigned once.
pub fn assign(
    problem: &Problem,
    groups: &Groups,
    rule: Match,
    slack: Slack,
    layout: Layout,
) -> Result<Assignment, PlanError> {
    let n = problem.len();
    let valid = |id: &&BufferId| id.index() < n;
    let mut pool = Pool::new(problem, rule, slack, groups.share_dedicated);
    for &id in groups.dedicated.iter().filter(valid) {
        let buffer = problem.buffer(id);
        if pool.object_of[id.index()].is_none() && buffer.fixed_offset.is_none() && buffer.size > 0
        {
            pool.new_object(id, true)?;
        }
    }
    for &id in groups.early.iter().filter(valid) {
        pool.look_up(id)?;
    }
    // Group 3: each buffer is taken at the first step, in width order, that it is live
    // at: the step of least rank among the group-3 steps inside its live segments.
    let profile = bound::live_profile(problem).ok_or(PlanError::ArenaOverflow)?;
    let mut steps = groups.steps.clone();
    steps.sort_unstable();
    steps.dedup();
    let mut by_width: Vec<usize> = (0..steps.len()).collect();
    by_width.sort_unstable_by_key(|&i| (std::cmp::Reverse(live_at(&profile, steps[i])), i));
    let mut rank = vec![0usize; steps.len()];
    for (r, &i) in by_width.iter().enumerate() {
        rank[i] = r;
    }
    let ranks = RangeMin::new(&rank);
    let mut taken_at: Vec<Vec<BufferId>> = vec![Vec::new(); steps.len()];
    let mut rest = Vec::new();
    for id in problem.ids() {
        if pool.object_of[id.index()].is_some() {
            continue;
        }
        let mut first: Option<usize> = None;
        problem.buffer(id).for_each_live_segment(|s| {
            let lo = steps.partition_point(|&t| t < s.start);
            let hi = steps.partition_point(|&t| t < s.end);
            if let Some(r) = ranks.min(lo, hi) {
                first = Some(first.map_or(r, |f| f.min(r)));
            }
        });
        match first {
            Some(r) => taken_at[r].push(id),
            None => rest.push(id),
        }
    }
    let by_size = |ids: &mut Vec<BufferId>| {
        ids.sort_unstable_by_key(|id| (std::cmp::Reverse(problem.buffer(*id).size), *id))
    };
    for mut present in taken_at.into_iter().chain([rest]) {
        by_size(&mut present);
        for id in present {
            pool.look_up(id)?;
        }
    }
    pool.into_assignment(layout)
}

/// Range minimum queries over a fixed array (a sparse table).
struct RangeMin {
    levels: Vec<Vec<usize>>,
}

impl RangeMin {
    fn new(values: &[usize]) -> RangeMin {
        let mut levels = vec![values.to_vec()];
        let mut width = 1;
        while 2 * width <= values.len() {
            let last = &levels[levels.len() - 1];
            let next = (0..=values.len() - 2 * width)
                .map(|i| last[i].min(last[i + width]))
                .collect();
            levels.push(next);
            width *= 2;
        }
        RangeMin { levels }
    }

    /// The least value in `[lo, hi)`, `None` for an empty range.
    fn min(&self, lo: usize, hi: usize) -> Option<usize> {
        if lo >= hi {
            return None;
        }
        let level = (usize::BITS - 1 - (hi - lo).leading_zeros()) as usize;
        let row = &self.levels[level];
        Some(row[lo].min(row[hi - (1 << level)]))
    }
}

/// Bytes live at `step` according to a [`bound::live_profile`].
pub fn live_at(profile: &[(u64, u64)], step: u64) -> u64 {
    match profile.partition_point(|&(t, _)| t <= step) {
        0 => 0,
        k => profile[k - 1].1,
    }
}

/// The `npu` planner on a bare problem: group 3 only, one operator per start step
/// ([`Groups::steps_only`]), with the matching rule `rule` and the objects placed per
/// `layout`. The default is [`Match::Exact`] (a deviation from the method's size match,
/// [`Match::Size`]), [`Slack::Any`] and [`Layout::Offsets`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Npu {
    pub rule: Match,
    pub slack: Slack,
    pub layout: Layout,
}

impl Planner for Npu {
    fn name(&self) -> &'static str {
        "npu"
    }

    fn description(&self) -> &'static str {
        "the NPU shared-objects method: shared objects in three groups (accelerated, in-place, widest operator first); match=exact by default (a deviation: only pool buffers of exactly the tensor's size; the method's size match is match=size), or size or lifetime match; objects placed by an offset planner over their lifetimes (or end to end)"
    }

    fn plan(&self, problem: &Problem) -> Result<Plan, PlanError> {
        Ok(assign(
            problem,
            &Groups::steps_only(problem),
            self.rule,
            self.slack,
            self.layout,
        )?
        .plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::check;

    use crate::problem::Buffer;

    fn problem(buffers: Vec<Buffer>) -> Problem {
        Problem::from_buffers(buffers).unwrap()
    }

    fn checked(problem: &Problem, groups: &Groups, rule: Match) -> Assignment {
        let offsets = assign(problem, groups, rule, Slack::Any, Layout::Offsets).unwrap();
        let report = check(problem, &offsets.plan);
        assert!(report.is_valid(), "{:?}", report.violations);
        let a = assign(problem, groups, rule, Slack::Any, Layout::EndToEnd).unwrap();
        // The layout changes the offsets only, never the method's assignment.
        assert_eq!(offsets.object_of, a.object_of);
        assert_eq!(offsets.objects, a.objects);
        assert!(offsets.plan.arena_bytes <= a.plan.arena_bytes);
        let report = check(problem, &a.plan);
        assert!(report.is_valid(), "{:?}", report.violations);
        assert_eq!(report.arena_bytes, a.plan.arena_bytes);
        a
    }

    /// Three objects are free for `t` (lifetime [10, 12), 6 bytes): `near` (4 bytes, last
    /// used up to step 9: gap 1), `fit` (6 bytes, gap 4) and `big` (9 bytes, gap 7). Size
    /// match takes `fit` (difference 0); lifetime match takes `near` and grows it to 6.
    #[test]
    fn size_match_and_lifetime_match_pick_different_objects() {
        let p = problem(vec![
            Buffer::new("big", 9, 0, 3),
            Buffer::new("fit", 6, 0, 6),
            Buffer::new("near", 4, 0, 9),
            Buffer::new("t", 6, 10, 12),
        ]);
        let groups = Groups {
            dedicated: vec![],
            share_dedicated: false,
            early: vec![BufferId(0), BufferId(1), BufferId(2), BufferId(3)],
            steps: vec![],
        };
        let size = checked(&p, &groups, Match::Size);
        // big, fit and near live together at step 0: three objects, t joins fit's.
        assert_eq!(size.object_of, vec![Some(0), Some(1), Some(2), Some(1)]);
        assert_eq!(size.stats.new_pool_bytes, 19);
        assert_eq!(size.stats.reused_bytes, 6);
        assert_eq!(size.plan.offsets, vec![0, 9, 15, 9]);
        let life = checked(&p, &groups, Match::Lifetime);
        assert_eq!(life.object_of, vec![Some(0), Some(1), Some(2), Some(2)]);
        assert_eq!(life.objects[2].size, 6);
        assert_eq!(life.stats.grown_bytes, 2);
        assert_eq!(life.stats.reused_bytes, 4);
        assert_eq!(life.stats.new_pool_bytes, 21);
        assert_eq!(life.plan.offsets, vec![0, 9, 15, 15]);
        assert_eq!(life.plan.arena_bytes, Some(21));
    }

    /// Exact (the default, a deviation) takes only an object of the buffer's size; size
    /// match as the method states it takes the free object of least size difference at or
    /// above the buffer's; a slack bounds size match only.
    #[test]
    fn exact_is_size_match_restricted_to_equal_sizes() {
        let p = problem(vec![
            Buffer::new("big", 9, 0, 3),
            Buffer::new("mid", 6, 0, 3),
            Buffer::new("t", 5, 4, 6),
        ]);
        let groups = Groups {
            early: vec![BufferId(0), BufferId(1), BufferId(2)],
            ..Groups::default()
        };
        // t (5 bytes) is free for big (9) and mid (6): size match takes mid.
        let size = checked(&p, &groups, Match::Size);
        assert_eq!(size.object_of, vec![Some(0), Some(1), Some(1)]);
        assert_eq!(size.stats.new_pool_bytes, 15);
        assert_eq!(size.stats.reused_bytes, 5);
        // No object of 5 bytes: exact makes a new one.
        let exact = checked(&p, &groups, Match::Exact);
        assert_eq!(exact.object_of, vec![Some(0), Some(1), Some(2)]);
        assert_eq!(exact.stats.new_pool_bytes, 20);
        let with = |rule, slack| {
            let a = assign(&p, &groups, rule, slack, Layout::Offsets).unwrap();
            assert!(check(&p, &a.plan).is_valid());
            a.object_of
        };
        // 10 % of 5 bytes is 0 bytes more (mid is 1 more): bounded out; 20 % lets mid in.
        assert_eq!(with(Match::Size, Slack::Percent(10)), exact.object_of);
        assert_eq!(with(Match::Size, Slack::Percent(20)), size.object_of);
        assert_eq!(with(Match::Size, Slack::Percent(0)), exact.object_of);
        // Exact ignores a slack; the default slack is the method's (none).
        assert_eq!(with(Match::Exact, Slack::Any), exact.object_of);
        assert_eq!(with(Match::Exact, Slack::Percent(50)), exact.object_of);
        assert_eq!(Slack::default(), Slack::Any);
        // The planner's default is exact, and `planner::all` lists that default.
        assert_eq!(Npu::default().rule, Match::Exact);
        let listed = crate::planner::by_name("npu").unwrap();
        let plan = listed.plan(&p).unwrap();
        assert!(check(&p, &plan).is_valid());
        assert_eq!(plan, Npu::default().plan(&p).unwrap());
    }

    /// Size match never takes a smaller object: `t` (8 bytes) gets a new one; lifetime
    /// match grows `a`'s.
    #[test]
    fn size_match_does_not_grow() {
        let p = problem(vec![Buffer::new("a", 4, 0, 1), Buffer::new("t", 8, 1, 2)]);
        let groups = Groups {
            early: vec![BufferId(0), BufferId(1)],
            ..Groups::default()
        };
        let a = checked(&p, &groups, Match::Size);
        assert_eq!(a.objects.len(), 2);
        assert_eq!(a.stats.reused_bytes, 0);
        let l = checked(&p, &groups, Match::Lifetime);
        assert_eq!(l.objects.len(), 1);
        assert_eq!(l.plan.arena_bytes, Some(8));
    }

    /// Group 1 objects are not shared unless the groups say so; the widest step goes first.
    #[test]
    fn dedicated_objects_and_width_order() {
        // Step 0: a (10) + b (2) = 12; step 2: c (10) alone; step 3: d (2) + e (3).
        let p = problem(vec![
            Buffer::new("a", 10, 0, 2),
            Buffer::new("b", 2, 0, 1),
            Buffer::new("c", 10, 2, 3),
            Buffer::new("d", 2, 3, 4),
            Buffer::new("e", 3, 3, 4),
        ]);
        let mut groups = Groups {
            dedicated: vec![BufferId(0)],
            share_dedicated: false,
            early: vec![],
            steps: vec![3, 2, 0],
        };
        let a = checked(&p, &groups, Match::Size);
        // a alone; step 0 (width 12): b new; step 2 (10): c new (a is dedicated);
        // step 3 (5): e (3) joins c (10, difference 7), d (2) joins b (2).
        assert_eq!(
            a.object_of,
            vec![Some(0), Some(1), Some(2), Some(1), Some(2)]
        );
        assert_eq!(a.stats.new_pool_bytes, 22);
        assert_eq!(a.stats.dedicated_buffers, 1);
        groups.share_dedicated = true;
        let shared = checked(&p, &groups, Match::Size);
        // c joins a's object now, and so does e (b's object is too small for it).
        assert_eq!(
            shared.object_of,
            vec![Some(0), Some(1), Some(0), Some(1), Some(0)]
        );
        assert_eq!(shared.stats.new_pool_bytes, 12);
    }

    #[test]
    fn conflicts_alignment_and_fixed_offsets_are_kept() {
        let mut fixed = Buffer::new("fixed", 5, 0, 4);
        fixed.fixed_offset = Some(3);
        let mut aligned = Buffer::new("aligned", 4, 2, 3);
        aligned.alignment = 16;
        let p = Problem::new(
            vec![
                fixed,
                Buffer::new("a", 4, 0, 1),
                Buffer::new("b", 4, 1, 2),
                aligned,
            ],
            [(BufferId(1), BufferId(2))],
        )
        .unwrap();
        for rule in [Match::Size, Match::Lifetime] {
            let a = checked(&p, &Groups::steps_only(&p), rule);
            assert_eq!(a.object_of[0], None);
            assert_eq!(a.plan.offsets[0], 3);
            assert_ne!(a.object_of[1], a.object_of[2]);
            assert_eq!(a.plan.offsets[3] % 16, 0);
            assert!(a.plan.offsets[1] >= 8);
        }
    }

    /// Two objects used at disjoint times: end to end they take 10 + 6 bytes; placed by
    /// their own lifetimes they share bytes, and the arena is the larger one's.
    #[test]
    fn objects_placed_by_their_lifetimes_share_bytes() {
        // a [0,2) and b [1,3) live together: two objects {a, c}, {b}; c [4,5) joins a's.
        let p = problem(vec![
            Buffer::new("a", 10, 0, 2),
            Buffer::new("b", 6, 1, 3),
            Buffer::new("c", 10, 4, 5),
        ]);
        let groups = Groups {
            early: vec![BufferId(0), BufferId(1), BufferId(2)],
            ..Groups::default()
        };
        let end_to_end = assign(&p, &groups, Match::Size, Slack::Any, Layout::EndToEnd).unwrap();
        assert_eq!(end_to_end.plan.arena_bytes, Some(16));
        let offsets = assign(&p, &groups, Match::Size, Slack::Any, Layout::Offsets).unwrap();
        assert!(check(&p, &offsets.plan).is_valid());
        assert_eq!(offsets.object_of, vec![Some(0), Some(1), Some(0)]);
        assert_eq!(offsets.plan.arena_bytes, Some(16));
        // d [2,4) (12 bytes) is free for {a, c}'s object, which is too small for it.
        let p = problem(vec![
            Buffer::new("a", 10, 0, 2),
            Buffer::new("b", 6, 1, 3),
            Buffer::new("c", 10, 4, 5),
            Buffer::new("d", 12, 2, 4),
        ]);
        let groups = Groups {
            early: vec![BufferId(0), BufferId(1), BufferId(2), BufferId(3)],
            ..Groups::default()
        };
        let end_to_end = assign(&p, &groups, Match::Size, Slack::Any, Layout::EndToEnd).unwrap();
        // d (12) fits in no object (a's is 10, b's is live with it): a third object.
        assert_eq!(end_to_end.objects.len(), 3);
        assert_eq!(end_to_end.plan.arena_bytes, Some(28));
        let offsets = assign(&p, &groups, Match::Size, Slack::Any, Layout::Offsets).unwrap();
        assert!(check(&p, &offsets.plan).is_valid());
        // Objects: {a, c} [0,2)+[4,5), {b} [1,3), {d} [2,4): {d} over {a, c}'s gap, so
        // the arena is max(10 + 6, 6 + 12) = 18.
        assert_eq!(offsets.plan.arena_bytes, Some(18));
    }
}
