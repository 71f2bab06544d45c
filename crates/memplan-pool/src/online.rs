//! The pool inside a running process (the `pool` method): record the process's own large
//! requests, find the iteration from the request sequence itself, train an offset plan
//! for one steady iteration, and serve later iterations from one arena.
//!
//! This module is the allocator's logic, in safe Rust and free of any system call, so that
//! it can be tested (under Miri too) with any backend; `memplan-preload` wraps it in the
//! exported `malloc`/`free` of a preloadable library.
//!
//! ```text
//!  large request ──► Recorder ──(period found: E = last p events, twice in a row)──► train()
//!                                                                                    │
//!  large request ◄── Server: slot k of the period, if its planned range is free ◄── Schedule
//!                    else the system allocator (a miss); many misses ─► learn again
//! ```
//!
//! - **Events.** `Alloc { size }` and `Free { age }`, where `age` is how many large
//!   allocations ago the freed block was allocated: relative, so that every iteration of a
//!   training loop gives the same events.
//! - **The period.** After each allocation, the events are checked for two consecutive
//!   identical copies of a period ending there; candidate periods are the distances to the
//!   last few earlier allocations of the same size. [`Recorder::mark`] (the Python hook
//!   `memplan.pool.step()`) marks iteration ends explicitly instead.
//! - **The plan.** One buffer per allocation of the period, its lifetime from its
//!   allocation to its free within the period, wrapping around the period's end (a gap)
//!   when it is freed in the next iteration; blocks that outlive a whole period are left to
//!   the system. Sizes and offsets are multiples of [`ALIGNMENT`]. Any memplan planner
//!   plans it; the plan is checked.
//! - **Serving is always safe.** A request is served from the arena only when its size is
//!   the planned one *and* its planned range is free now ([`LiveSet`]). Otherwise (a
//!   miss: a request the plan did not foresee there) it gets the free range of another
//!   slot of its aligned size when there is one — the method's fallback to a free cache
//!   block of the request's class, with the live-range table in place of a header — and
//!   else goes to the system. A wrong prediction costs a miss, never an overlap.
//! - **Two plans** ([`Method`]): by default an offset plan by a memplan planner
//!   ([`train`]); or the method's size classes as stated ([`train_size_classes`], the
//!   trainer of [`crate::train`] on the recorded iteration).

use std::collections::HashMap;

use memplan::planner::{self, Planner};
use memplan::{checker, Buffer, Lifetime, Problem};

/// Alignment of every offset and planned size (a cache line; enough for every tensor).
pub const ALIGNMENT: u64 = 64;

/// One recorded request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    /// A large allocation of `size` bytes.
    Alloc { size: u64 },
    /// The free of the block allocated `age` large allocations ago (1 = the latest).
    Free { age: u64 },
}

/// What the recorder found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Period {
    /// The events of one steady iteration, in order (the last `len` recorded).
    pub events: Vec<Event>,
    /// The iteration before it (identical to `events`), for blocks that wrap around.
    pub previous: Vec<Event>,
}

/// Records events and finds the period. Its buffers are allocated once, at
/// construction; recording never allocates (when full, it starts over).
#[derive(Debug)]
pub struct Recorder {
    events: Vec<Event>,
    /// Large allocations recorded so far (the age reference).
    allocs: u64,
    /// Per size, the event positions of its last allocations (most recent first).
    recent: HashMap<u64, [usize; RECENT]>,
    /// Event positions of explicit iteration marks.
    marks: Vec<usize>,
    capacity: usize,
    min_period: usize,
}

/// Earlier allocations of the same size tried as period candidates.
const RECENT: usize = 4;

impl Recorder {
    /// A recorder of at most `capacity` events, ignoring periods shorter than
    /// `min_period` events.
    pub fn new(capacity: usize, min_period: usize) -> Recorder {
        Recorder {
            events: Vec::with_capacity(capacity),
            allocs: 0,
            recent: HashMap::with_capacity(capacity.min(1 << 16)),
            marks: Vec::with_capacity(64),
            capacity,
            min_period: min_period.max(1),
        }
    }

    /// Forgets everything recorded.
    pub fn clear(&mut self) {
        self.events.clear();
        self.recent.clear();
        self.marks.clear();
    }

    /// Large allocations recorded since construction (a block's id is this count when it
    /// was allocated).
    pub fn allocs(&self) -> u64 {
        self.allocs
    }

    fn push(&mut self, event: Event) {
        if self.events.len() >= self.capacity || self.recent.len() >= self.recent.capacity() {
            self.clear();
        }
        self.events.push(event);
    }

    /// Records an allocation; returns its block id and the period, when these events end
    /// the second identical copy of one.
    pub fn alloc(&mut self, size: u64) -> (u64, Option<Period>) {
        self.allocs += 1;
        let id = self.allocs;
        self.push(Event::Alloc { size });
        let here = self.events.len() - 1;
        let previous = self.recent.get(&size).copied();
        let slot = self.recent.entry(size).or_insert([usize::MAX; RECENT]);
        slot.rotate_right(1);
        slot[0] = here;
        let mut found = None;
        if self.marks.is_empty() {
            for earlier in previous.into_iter().flatten() {
                if earlier == usize::MAX || earlier >= here {
                    continue;
                }
                let p = here - earlier;
                if p >= self.min_period && self.repeats(p) {
                    found = Some(self.period(p));
                    break;
                }
            }
        }
        (id, found)
    }

    /// Records the free of block `id`.
    pub fn free(&mut self, id: u64) {
        let age = self.allocs.saturating_sub(id) + 1;
        self.push(Event::Free { age });
    }

    /// Marks the end of an iteration (`memplan.pool.step()`): two consecutive marked
    /// iterations with identical events give the period.
    pub fn mark(&mut self) -> Option<Period> {
        self.marks.push(self.events.len());
        let n = self.marks.len();
        if n < 3 {
            return None;
        }
        let (a, b, c) = (self.marks[n - 3], self.marks[n - 2], self.marks[n - 1]);
        let first = &self.events[a..b];
        let second = &self.events[b..c];
        if first == second && first.len() >= self.min_period {
            return Some(Period {
                events: second.to_vec(),
                previous: first.to_vec(),
            });
        }
        None
    }

    /// True when the last `2p` events are two copies of one period.
    fn repeats(&self, p: usize) -> bool {
        let n = self.events.len();
        n >= 2 * p && self.events[n - 2 * p..n - p] == self.events[n - p..]
    }

    fn period(&self, p: usize) -> Period {
        let n = self.events.len();
        Period {
            events: self.events[n - p..].to_vec(),
            previous: self.events[n - 2 * p..n - p].to_vec(),
        }
    }
}

/// One planned allocation of the period.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// The requested size this slot serves.
    pub size: u64,
    /// Its offset in the arena; `None` for a block the plan leaves to the system (it
    /// outlives a whole iteration).
    pub offset: Option<u64>,
}

/// The trained plan: the period's allocations in order, with offsets in one arena.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    pub slots: Vec<Slot>,
    /// The slot to start serving at: the allocation before which the fewest planned bytes
    /// are live. Starting there, the blocks the system still holds from before the plan
    /// are as few as they can be, so the process does not hold both at once.
    pub start: usize,
    /// Bytes of the arena.
    pub arena: u64,
    /// The max-live lower bound of the planned blocks.
    pub lower_bound: u64,
}

/// Rounds up to [`ALIGNMENT`].
fn aligned(size: u64) -> Option<u64> {
    size.checked_next_multiple_of(ALIGNMENT)
}

/// The allocations of a period and when each is live.
struct PeriodSlots {
    /// Requested size of each allocation, in order.
    sizes: Vec<u64>,
    /// Event position of each allocation.
    alloc_pos: Vec<u64>,
    /// Each allocation's lifetime within the cycle of `len` events, `None` when it
    /// outlives a whole iteration (the plan leaves it to the system).
    lifetimes: Vec<Option<Buffer>>,
}

/// Reads the allocations of `period` and their lifetimes: from the allocation to the
/// free within the period, or wrapping around the period's end (a gap) when the free is
/// in the next one.
fn period_slots(period: &Period) -> Option<PeriodSlots> {
    let p = period.events.len() as u64;
    let mut alloc_pos: Vec<u64> = Vec::new();
    let mut sizes: Vec<u64> = Vec::new();
    for (i, e) in period.events.iter().enumerate() {
        if let Event::Alloc { size } = e {
            alloc_pos.push(i as u64);
            sizes.push(*size);
        }
    }
    let n = alloc_pos.len();
    // Free position of each slot: within the period, or in the next one (found as the
    // free, in this period, of the same slot's copy allocated in the previous one).
    let mut free_pos: Vec<Option<u64>> = vec![None; n];
    let mut wraps = vec![false; n];
    let mut count = 0u64; // allocations seen so far in this period
    for (i, e) in period.events.iter().enumerate() {
        match *e {
            Event::Alloc { .. } => count += 1,
            Event::Free { age } => {
                // The freed block is allocation number `count - age + 1` of this period
                // (1-based); at most 0 means the previous period's copy.
                let index = count as i64 - age as i64;
                if index >= 0 {
                    free_pos[index as usize] = Some(i as u64);
                } else {
                    let k = index + n as i64;
                    if k >= 0 {
                        free_pos[k as usize] = Some(i as u64);
                        wraps[k as usize] = true;
                    }
                }
            }
        }
    }
    let mut lifetimes = Vec::with_capacity(n);
    for k in 0..n {
        let buffer = free_pos[k].and_then(|free| {
            let a = alloc_pos[k];
            let mut b = Buffer::new(format!("{k}"), aligned(sizes[k])?, 0, p);
            b.alignment = ALIGNMENT;
            if wraps[k] {
                // Live from its allocation to the end, and from the start to its free.
                if free >= a {
                    return None; // outlives a whole iteration
                }
                if free == 0 {
                    b.lifetime = Lifetime { start: a, end: p };
                } else {
                    b.gaps = vec![Lifetime {
                        start: free,
                        end: a,
                    }];
                }
            } else {
                b.lifetime = Lifetime {
                    start: a,
                    end: free,
                };
            }
            Some(b)
        });
        lifetimes.push(buffer);
    }
    Some(PeriodSlots {
        sizes,
        alloc_pos,
        lifetimes,
    })
}

impl PeriodSlots {
    /// The planning problem of the planned allocations (buffer `j` is the `j`-th planned
    /// slot), or `None` when there is none.
    fn problem(&self) -> Option<Problem> {
        let buffers: Vec<Buffer> = self.lifetimes.iter().flatten().cloned().collect();
        if buffers.is_empty() {
            return None;
        }
        Problem::from_buffers(buffers).ok()
    }

    /// A schedule serving slot `k` at `offsets[k]`, starting at the allocation before
    /// which the fewest planned bytes are live.
    fn schedule(&self, problem: &Problem, offsets: Vec<Option<u64>>, arena: u64) -> Schedule {
        let live_before = |k: usize| -> u64 {
            let step = self.alloc_pos[k];
            problem
                .buffers()
                .iter()
                .filter(|b| {
                    b.live_segments()
                        .iter()
                        .any(|l| l.start <= step && step < l.end)
                })
                .filter(|b| b.lifetime.start != step || !b.gaps.is_empty())
                .map(|b| b.size)
                .sum()
        };
        let start = (0..self.sizes.len())
            .min_by_key(|&k| (live_before(k), k))
            .unwrap_or(0);
        Schedule {
            slots: self
                .sizes
                .iter()
                .zip(offsets)
                .map(|(&size, offset)| Slot { size, offset })
                .collect(),
            start,
            arena,
            lower_bound: memplan::bound::max_live(problem).unwrap_or(0),
        }
    }
}

/// Plans one iteration: every allocation of `period` gets an offset unless it outlives the
/// iteration. `planner` is a memplan planner (`best-of`, `search`, …). `None` when
/// the period has no allocation to plan or the plan fails (then the process keeps using
/// the system allocator).
pub fn train(period: &Period, planner: &dyn Planner) -> Option<Schedule> {
    let slots = period_slots(period)?;
    let problem = slots.problem()?;
    let plan = planner.plan(&problem).ok()?;
    if !checker::check(&problem, &plan).is_valid() {
        return None;
    }
    let mut planned = plan.offsets.iter().copied();
    let offsets = slots
        .lifetimes
        .iter()
        .map(|b| b.as_ref().and_then(|_| planned.next()))
        .collect();
    Some(slots.schedule(&problem, offsets, plan.arena_bytes.unwrap_or(0)))
}

/// How an iteration is planned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Method {
    /// An offset plan by the memplan planner of that name (`best-of`, `search`, …;
    /// `best-of` when the name is unknown): [`train`]. The default.
    Offsets(String),
    /// The method's size classes as stated (the `pool` method): cache blocks of class
    /// `ceil(s / interval) * interval`, visited in `order`, laid out one after another
    /// (or packed by lifetime when `pack`): [`train_size_classes`].
    SizeClasses {
        interval: u64,
        order: crate::train::Order,
        pack: bool,
    },
}

impl Default for Method {
    fn default() -> Method {
        Method::Offsets("best-of".into())
    }
}

impl Method {
    /// Parses `MEMPLAN_POOL_PLAN`-style text: `offsets`, `offsets:PLANNER`,
    /// `size-classes`, `size-classes:G` or `size-classes:G:ORDER[:packed]`
    /// (`ORDER` = `allocation`, `size-descending`, `lifetime-descending`).
    pub fn parse(text: &str) -> Result<Method, String> {
        let mut parts = text.split(':');
        match parts.next().unwrap_or("") {
            "offsets" | "" => Ok(Method::Offsets(
                parts.next().unwrap_or("best-of").to_string(),
            )),
            "size-classes" => {
                let interval = match parts.next() {
                    None | Some("") => crate::train::DEFAULT_CLASS_INTERVAL,
                    Some(g) => g
                        .parse::<u64>()
                        .ok()
                        .filter(|&g| g > 0)
                        .ok_or_else(|| format!("size-class interval `{g}` is not a positive integer"))?,
                };
                let order = match parts.next() {
                    None | Some("") => crate::train::Order::Allocation,
                    Some(o) => crate::train::Order::ALL
                        .into_iter()
                        .find(|x| x.name() == o)
                        .ok_or_else(|| format!("unknown order `{o}` (allocation, size-descending, lifetime-descending)"))?,
                };
                let pack = match parts.next() {
                    None => false,
                    Some("packed") => true,
                    Some(x) => return Err(format!("unknown size-class option `{x}` (packed)")),
                };
                Ok(Method::SizeClasses { interval, order, pack })
            }
            other => Err(format!(
                "unknown plan `{other}`: use `offsets[:PLANNER]` or `size-classes[:G[:ORDER[:packed]]]`"
            )),
        }
    }
}

/// Trains `period` with `method`.
pub fn train_with(period: &Period, method: &Method) -> Option<Schedule> {
    match method {
        Method::Offsets(name) => {
            let planner = planner::by_name(name).unwrap_or(&planner::BestOf);
            train(period, planner)
        }
        Method::SizeClasses {
            interval,
            order,
            pack,
        } => train_size_classes(period, *interval, *order, *pack),
    }
}

/// Plans one iteration with the method's size classes (the `pool` method, [`crate::train`]):
/// the period is turned into a three-iteration trace (previous, this, next: identical)
/// of the blocks [`train`] would plan (blocks that outlive an iteration stay with the
/// system here too), the trainer builds cache blocks for the middle one, and slot `k`
/// gets the cache block its size class's schedule names, one header slot into the block
/// (the layout of [`crate::train::Plan::layout`]).
pub fn train_size_classes(
    period: &Period,
    interval: u64,
    order: crate::train::Order,
    pack: bool,
) -> Option<Schedule> {
    use crate::trace::{Event as TraceEvent, Iteration, Op, Trace};
    use crate::train::{class_of, TrainOptions, SLOT};
    let slots = period_slots(period)?;
    let problem = slots.problem()?;
    let sizes = &slots.sizes;
    let planned = |k: usize| slots.lifetimes[k].is_some();
    // Three copies of the period with absolute block ids; frees of blocks allocated
    // before the first copy, and every event of unplanned blocks, are left out.
    let n = sizes.len() as u64;
    let mut events = Vec::with_capacity(3 * period.events.len());
    let mut iterations = Vec::with_capacity(3);
    for copy in 0..3u64 {
        let first = events.len();
        let mut count = 0u64;
        for e in &period.events {
            match *e {
                Event::Alloc { size } => {
                    let k = count as usize;
                    count += 1;
                    if planned(k) {
                        events.push(TraceEvent {
                            op: Op::Alloc,
                            size,
                            align: ALIGNMENT,
                            id: copy * n + k as u64,
                        });
                    }
                }
                Event::Free { age } => {
                    let index = count as i64 - age as i64;
                    let (c, k) = if index >= 0 {
                        (copy as i64, index)
                    } else {
                        (copy as i64 - 1, index + n as i64)
                    };
                    if c < 0 || k < 0 || !planned(k as usize) {
                        continue;
                    }
                    events.push(TraceEvent {
                        op: Op::Free,
                        size: sizes[k as usize],
                        align: ALIGNMENT,
                        id: c as u64 * n + k as u64,
                    });
                }
            }
        }
        if events.len() == first {
            return None;
        }
        iterations.push(Iteration {
            number: copy,
            events: first..events.len(),
        });
    }
    let trace = Trace {
        events,
        iterations,
        foreign_frees: 0,
    };
    let plan = crate::train::train(
        &trace,
        &TrainOptions {
            class_interval: interval,
            order,
            iteration: 1,
            min_size: 0,
            pack,
        },
    )
    .ok()?;
    plan.validate().ok()?;
    let (block_offsets, arena) = plan.layout()?;
    // The trainer's schedules list each class's requests in allocation order.
    let mut next_in_class: HashMap<u64, (usize, usize)> = HashMap::new();
    for (i, s) in plan.schedules.iter().enumerate() {
        next_in_class.insert(s.class_bytes, (i, 0));
    }
    let mut offsets = Vec::with_capacity(sizes.len());
    for (k, &size) in sizes.iter().enumerate() {
        let mut offset = None;
        if planned(k) {
            let (i, j) = next_in_class.get_mut(&class_of(size, interval)?)?;
            let block = *plan.schedules[*i].blocks.get(*j)? as usize;
            *j += 1;
            offset = Some(block_offsets[block].checked_add(SLOT)?);
        }
        offsets.push(offset);
    }
    let schedule = slots.schedule(&problem, offsets, arena);
    // The trainer's layout is checked like any plan: every planned block inside the
    // arena, no two blocks live at once sharing bytes.
    let planned = memplan::Plan {
        offsets: schedule.slots.iter().filter_map(|s| s.offset).collect(),
        arena_bytes: None,
        extents: None,
    };
    let inside = problem
        .buffers()
        .iter()
        .zip(&planned.offsets)
        .all(|(b, &o)| o.checked_add(b.size).is_some_and(|end| end <= arena));
    if !inside || !checker::check(&problem, &planned).is_valid() {
        return None;
    }
    Some(schedule)
}

/// The arena ranges handed out and not yet freed, sorted by offset; fixed capacity.
#[derive(Debug)]
pub struct LiveSet {
    /// `(offset, end, slot)`, sorted by offset, pairwise disjoint.
    ranges: Vec<(u64, u64, u32)>,
}

impl LiveSet {
    pub fn with_capacity(capacity: usize) -> LiveSet {
        LiveSet {
            ranges: Vec::with_capacity(capacity),
        }
    }

    /// Takes `[offset, end)` for `slot` when it overlaps no live range and there is room.
    pub fn take(&mut self, offset: u64, end: u64, slot: u32) -> bool {
        if self.ranges.len() == self.ranges.capacity() {
            return false;
        }
        let at = self.ranges.partition_point(|r| r.0 < offset);
        let left_free = at == 0 || self.ranges[at - 1].1 <= offset;
        let right_free = at == self.ranges.len() || end <= self.ranges[at].0;
        if !(left_free && right_free) {
            return false;
        }
        self.ranges.insert(at, (offset, end, slot));
        true
    }

    /// Releases the live range starting at `offset`; returns its end and slot.
    pub fn release(&mut self, offset: u64) -> Option<(u64, u32)> {
        let at = self.ranges.partition_point(|r| r.0 < offset);
        if at < self.ranges.len() && self.ranges[at].0 == offset {
            let (_, end, slot) = self.ranges.remove(at);
            Some((end, slot))
        } else {
            None
        }
    }

    /// The end and slot of the live range starting at `offset`.
    pub fn range_at(&self, offset: u64) -> Option<(u64, u32)> {
        let at = self.ranges.partition_point(|r| r.0 < offset);
        (at < self.ranges.len() && self.ranges[at].0 == offset)
            .then(|| (self.ranges[at].1, self.ranges[at].2))
    }

    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// The ranges of `0..len` no live range covers, in offset order.
    pub fn free_ranges(&self, len: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        let starts = std::iter::once(0).chain(self.ranges.iter().map(|r| r.1));
        let ends = self.ranges.iter().map(|r| r.0).chain(std::iter::once(len));
        starts.zip(ends).filter(|(s, e)| s < e)
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

/// Counters of a server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServeStats {
    /// Requests served from the arena.
    pub hits: u64,
    /// Requests the plan foresaw but whose range was still taken, or that came out of
    /// order: served by the system.
    pub misses: u64,
    /// Requests of blocks the plan leaves to the system (longer than an iteration).
    pub unplanned: u64,
    /// Misses served from the arena all the same: the range of another slot of the same
    /// (aligned) size that was free at that moment (the method's fallback to a free
    /// cache block of the request's class). Counted in `misses` too.
    pub fallbacks: u64,
}

/// Serves a schedule: the next request of the period gets its slot's range when free.
#[derive(Debug)]
pub struct Server {
    pub schedule: Schedule,
    cursor: usize,
    /// False until the request sequence reaches the schedule's start slot; until then
    /// requests go to the system (they are counted as unplanned).
    armed: bool,
    live: LiveSet,
    pub stats: ServeStats,
    /// Misses since the last hit, to notice that the program changed.
    recent_misses: u64,
    /// Requests and misses of the current window of one period's length.
    window: (u64, u64),
    /// The last full window missed more than a quarter of its requests.
    drifted: bool,
    /// Whole periods served since the server was armed.
    pub periods: u64,
    /// Planned slots by aligned size, for the fallback.
    by_size: HashMap<u64, Vec<u32>>,
}

/// How far ahead the server looks for the request's size when the sequence is out of step.
const RESYNC: usize = 8;

impl Server {
    /// A server whose next request is slot `cursor % slots` (requests made since the
    /// period was found, while the plan was being trained, advance it).
    pub fn starting_at(schedule: Schedule, cursor: u64) -> Server {
        let mut server = Server::new(schedule);
        if !server.schedule.slots.is_empty() {
            server.cursor = (cursor % server.schedule.slots.len() as u64) as usize;
            server.armed = server.cursor == server.schedule.start;
        }
        server
    }

    pub fn new(schedule: Schedule) -> Server {
        let live = LiveSet::with_capacity(schedule.slots.len() + 1);
        let armed = schedule.start == 0;
        let mut by_size: HashMap<u64, Vec<u32>> = HashMap::new();
        for (k, slot) in schedule.slots.iter().enumerate() {
            if let (Some(_), Some(size)) = (slot.offset, aligned(slot.size)) {
                by_size.entry(size).or_default().push(k as u32);
            }
        }
        Server {
            by_size,
            schedule,
            cursor: 0,
            armed,
            live,
            stats: ServeStats::default(),
            recent_misses: 0,
            window: (0, 0),
            drifted: false,
            periods: 0,
        }
    }

    /// The arena offset for a request of `size` bytes, or `None` for the system.
    pub fn alloc(&mut self, size: u64) -> Option<u64> {
        let misses = self.stats.misses;
        let result = self.serve(size);
        let n = self.schedule.slots.len() as u64;
        self.window.0 += 1;
        self.window.1 += self.stats.misses - misses;
        if self.window.0 >= n {
            self.drifted = self.window.1 * 4 > self.window.0;
            self.window = (0, 0);
        }
        result
    }

    fn serve(&mut self, size: u64) -> Option<u64> {
        let n = self.schedule.slots.len();
        let found = (0..RESYNC.min(n))
            .map(|d| (self.cursor + d) % n)
            .find(|&k| self.schedule.slots[k].size == size);
        let Some(k) = found else {
            return self.miss(size);
        };
        self.cursor = (k + 1) % n;
        if !self.armed {
            if k + 1 == self.schedule.start || (self.schedule.start == 0 && k + 1 == n) {
                self.armed = true;
            }
            self.stats.unplanned += 1;
            return None;
        }
        let Some(offset) = self.schedule.slots[k].offset else {
            self.stats.unplanned += 1;
            return None;
        };
        if self.cursor == self.schedule.start {
            self.periods += 1;
        }
        let end = offset + aligned(size).unwrap_or(u64::MAX);
        if self.live.take(offset, end, k as u32) {
            self.stats.hits += 1;
            self.recent_misses = 0;
            Some(offset)
        } else {
            self.miss(size)
        }
    }

    /// A request the plan did not foresee here: the range of another planned slot of its
    /// aligned size when one is free (the one planned to be needed last, so that the plan
    /// is disturbed as little as possible), else the system (`None`).
    fn miss(&mut self, size: u64) -> Option<u64> {
        self.stats.misses += 1;
        self.recent_misses += 1;
        if !self.armed {
            return None;
        }
        let n = self.schedule.slots.len();
        let bytes = aligned(size)?;
        let candidates = self.by_size.get(&bytes)?;
        let mut best: Option<(usize, u64)> = None;
        for &k in candidates {
            let k = k as usize;
            let offset = self.schedule.slots[k].offset?;
            // How far ahead of the cursor the slot is next needed.
            let ahead = (k + n - self.cursor) % n;
            if best.is_some_and(|(a, _)| a >= ahead) {
                continue;
            }
            let taken = self.live.ranges.partition_point(|r| r.0 < offset + bytes);
            if taken > 0 && self.live.ranges[taken - 1].1 > offset {
                continue;
            }
            best = Some((ahead, offset));
        }
        let (ahead, offset) = best?;
        let k = (self.cursor + ahead) % n;
        if self.live.take(offset, offset + bytes, k as u32) {
            self.stats.fallbacks += 1;
            Some(offset)
        } else {
            None
        }
    }

    /// Frees the block at `offset`; returns the bytes of its range, or `None` when no
    /// live block starts there (a double or foreign free: ignored).
    pub fn free(&mut self, offset: u64) -> Option<u64> {
        let (end, _) = self.live.release(offset)?;
        Some(end - offset)
    }

    /// The usable bytes of the live block at `offset` (its range: the request rounded
    /// up to [`ALIGNMENT`]).
    pub fn size_at(&self, offset: u64) -> Option<u64> {
        self.live.range_at(offset).map(|(end, _)| end - offset)
    }

    /// The ranges of an arena of `len` bytes that no live block covers.
    pub fn free_ranges(&self, len: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.live.free_ranges(len)
    }

    /// Blocks of the arena still live.
    pub fn live_blocks(&self) -> usize {
        self.live.len()
    }

    /// True when the program no longer follows the plan: more misses in a row than a
    /// whole iteration has requests, or more than a quarter of the requests of the last
    /// iteration-long window missed (a new batch size keeps some sizes, so hits alone
    /// do not prove the plan still fits).
    pub fn lost(&self) -> bool {
        self.recent_misses > self.schedule.slots.len() as u64 || self.drifted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A training-loop-like program: `iters` iterations of allocations freed in LIFO
    /// order, plus one block kept across the boundary.
    fn iteration(sizes: &[u64]) -> Vec<(bool, usize)> {
        let mut ops: Vec<(bool, usize)> =
            sizes.iter().enumerate().map(|(i, _)| (true, i)).collect();
        ops.extend((0..sizes.len()).rev().map(|i| (false, i)));
        ops
    }

    #[test]
    fn a_repeated_iteration_is_found_and_planned_at_the_bound() {
        let sizes = [4096u64, 8192, 65536, 4096, 1 << 20];
        let mut rec = Recorder::new(10_000, 2);
        let mut found = None;
        for _ in 0..4 {
            let mut ids = vec![0; sizes.len()];
            for (is_alloc, i) in iteration(&sizes) {
                if is_alloc {
                    let (id, period) = rec.alloc(sizes[i]);
                    ids[i] = id;
                    if found.is_none() {
                        found = period;
                    }
                } else {
                    rec.free(ids[i]);
                }
            }
        }
        let period = found.expect("period");
        let schedule = train_with(&period, &Method::default()).unwrap();
        assert_eq!(schedule.slots.len(), sizes.len());
        assert!(schedule.slots.iter().all(|s| s.offset.is_some()));
        assert_eq!(schedule.arena, schedule.lower_bound);
        // The method's size classes, as stated: one cache block per tensor here (all
        // live together), laid end to end with a header slot each.
        let method = Method::parse("size-classes:4096").unwrap();
        let classes = train_with(&period, &method).unwrap();
        assert!(classes.slots.iter().all(|s| s.offset.is_some()));
        let expected: u64 = sizes
            .iter()
            .map(|&s| crate::train::slot_bytes(s.div_ceil(4096) * 4096).unwrap())
            .sum();
        assert_eq!(classes.arena, expected);
        assert_eq!(classes.lower_bound, schedule.lower_bound);
    }

    #[test]
    fn plan_methods_parse_with_clear_errors() {
        use crate::train::Order;
        assert_eq!(Method::parse("offsets").unwrap(), Method::default());
        assert_eq!(
            Method::parse("offsets:search").unwrap(),
            Method::Offsets("search".into())
        );
        assert_eq!(
            Method::parse("size-classes:512:size-descending:packed").unwrap(),
            Method::SizeClasses {
                interval: 512,
                order: Order::SizeDescending,
                pack: true
            }
        );
        assert!(Method::parse("size-classes:0")
            .unwrap_err()
            .contains("positive"));
        assert!(Method::parse("size-classes:64:sideways")
            .unwrap_err()
            .contains("sideways"));
        assert!(Method::parse("slabs").unwrap_err().contains("slabs"));
    }

    #[test]
    fn serving_never_hands_out_a_taken_range() {
        let period = Period {
            events: vec![
                Event::Alloc { size: 100 },
                Event::Free { age: 1 },
                Event::Alloc { size: 100 },
                Event::Free { age: 1 },
            ],
            previous: vec![],
        };
        let schedule = train_with(&period, &Method::default()).unwrap();
        assert_eq!(schedule.arena, 128);
        let mut server = Server::new(schedule);
        let a = server.alloc(100).unwrap();
        // The second request comes before the first is freed: its planned range is
        // taken, so it goes to the system.
        assert_eq!(server.alloc(100), None);
        assert_eq!(server.free(a), Some(128));
        assert_eq!(server.free(a), None);
        assert_eq!(server.stats.misses, 1);
    }

    #[test]
    fn blocks_freed_in_the_next_iteration_wrap_around() {
        // A allocated, B allocated, A freed; B is freed after the next iteration's first
        // allocation.
        let events = vec![
            Event::Free { age: 1 }, // the previous iteration's B
            Event::Alloc { size: 64 },
            Event::Alloc { size: 128 },
            Event::Free { age: 2 },
        ];
        let period = Period {
            events: events.clone(),
            previous: events,
        };
        let schedule = train_with(&period, &Method::default()).unwrap();
        assert!(schedule.slots.iter().all(|s| s.offset.is_some()));
        let (a, b) = (
            schedule.slots[0].offset.unwrap(),
            schedule.slots[1].offset.unwrap(),
        );
        assert!(a + 64 <= b || b + 128 <= a, "A and B are live together");
    }
}
