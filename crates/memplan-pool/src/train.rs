//! The plan trainer of the `pool` method: size classes, cache blocks, traversal orders, borrowing.
//!
//! The trainer sees one recorded iteration as a cycle of `L` events (positions `0..L`).
//! A tensor allocated at position `a` lives until its free:
//!
//! ```text
//!   freed at f in the same iteration        [a, f)
//!   freed at f in the next iteration        [a, L) and [0, f)   (it wraps around)
//!   freed later, or never                   [0, L)              (the whole cycle)
//!                                0         a       f    L
//!   same iteration               |         [=======)    |
//!   wrapping                     [====)    [============)
//! ```
//!
//! Tensors are visited in a [`Order`]; each goes to the first cache block of its own size
//! class (`ceil(size / g) * g`) whose recorded lifetimes it does not overlap, else to the
//! first such block of the larger classes in ascending order, else to a new block of its
//! own class. The blocks, and for each class the blocks its requests go to in allocation
//! order (the *schedule* the runtime pool follows), form the [`Plan`].

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::trace::{Op, Trace};

/// The order in which the trainer visits the recorded tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Order {
    /// In allocation order.
    Allocation,
    /// Larger tensors first (ties: allocation order).
    SizeDescending,
    /// Longer lifetimes first (ties: allocation order).
    LifetimeDescending,
}

impl Order {
    /// Every order, in the order above.
    pub const ALL: [Order; 3] = [
        Order::Allocation,
        Order::SizeDescending,
        Order::LifetimeDescending,
    ];

    /// The name used on the command line and in plan files.
    pub fn name(self) -> &'static str {
        match self {
            Order::Allocation => "allocation",
            Order::SizeDescending => "size-descending",
            Order::LifetimeDescending => "lifetime-descending",
        }
    }
}

/// What to train and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrainOptions {
    /// The size-class interval `g` in bytes (at least 1).
    pub class_interval: u64,
    /// The traversal order.
    pub order: Order,
    /// The iteration to learn from.
    pub iteration: u64,
    /// Allocations smaller than this are left out of the plan (served by the fallback).
    pub min_size: u64,
    /// Pack the blocks into the arena (see [`pack`]): blocks never in use at the same
    /// time may share addresses. Off: blocks are laid out one after another.
    pub pack: bool,
}

/// The default size-class interval (chosen by measurement, see `doc/pool.md`).
pub const DEFAULT_CLASS_INTERVAL: u64 = 2048;

/// Why a plan cannot be trained.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TrainError {
    /// The trace has no iteration with that number.
    #[error("the trace has no iteration {0}")]
    NoIteration(u64),
    /// `g` is zero.
    #[error("the class interval must be at least 1 byte")]
    ZeroInterval,
    /// A size class or the plan's total does not fit in 64 bits.
    #[error("a size class or the plan total overflows 64 bits")]
    Overflow,
    /// memplan's checker rejected the packing (a bug: please report it).
    #[error("the packed layout of the blocks failed memplan's checker")]
    PackingInvalid,
}

/// One cache block of the plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    /// Its size: the size class it belongs to.
    pub class_bytes: u64,
    /// How many recorded tensors it holds.
    pub tensors: u64,
    /// Offset of the block's 64-byte header slot in the arena (the block itself starts
    /// 64 bytes later), when the plan is packed; absent: laid out one after another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
}

/// The blocks that the requests of one size class go to, in allocation order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schedule {
    /// The size class of the requests.
    pub class_bytes: u64,
    /// Block index (into [`Plan::blocks`]) of each planned request of the class, in the
    /// order they are allocated within an iteration.
    pub blocks: Vec<u32>,
}

/// A trained allocation plan (the JSON plan file; see `doc/pool.md`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// Always `"memplan-pool-plan"`.
    pub format: String,
    /// Format version, 1.
    pub version: u32,
    /// The size-class interval `g`.
    pub class_interval: u64,
    /// The traversal order used.
    pub order: Order,
    /// The iteration trained on.
    pub iteration: u64,
    /// Allocations smaller than this were left out.
    pub min_size: u64,
    /// Sum of the block sizes.
    pub total_bytes: u64,
    /// Bytes of the arena the pool obtains for this plan: header slots included, blocks
    /// packed when they have offsets ([`Plan::arena_bytes`]).
    #[serde(default)]
    pub arena_bytes: u64,
    /// Peak of the bytes live in the trained iteration (tensors of the plan only): no
    /// plan can be smaller.
    pub live_peak_bytes: u64,
    /// The cache blocks; a block's index is its position here. Blocks of one class are
    /// consecutive, classes ascending.
    pub blocks: Vec<Block>,
    /// Per size class with planned requests, ascending.
    pub schedules: Vec<Schedule>,
}

/// A plan's statistics.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Stats {
    /// Sum of the block sizes.
    pub total_bytes: u64,
    /// The arena the pool obtains (header slots included, packing applied).
    pub arena_bytes: u64,
    /// The live peak.
    pub live_peak_bytes: u64,
    /// `total_bytes / live_peak_bytes` (1 when both are 0).
    pub ratio: f64,
    /// `arena_bytes / live_peak_bytes` (1 when both are 0).
    pub arena_ratio: f64,
    /// Planned tensors.
    pub tensors: u64,
    /// `(class_bytes, blocks)` per class, ascending.
    pub blocks_per_class: Vec<(u64, u64)>,
}

impl Plan {
    /// The plan's statistics.
    pub fn stats(&self) -> Stats {
        let mut per_class: BTreeMap<u64, u64> = BTreeMap::new();
        for block in &self.blocks {
            *per_class.entry(block.class_bytes).or_default() += 1;
        }
        Stats {
            total_bytes: self.total_bytes,
            arena_bytes: self.arena_bytes,
            live_peak_bytes: self.live_peak_bytes,
            ratio: ratio(self.total_bytes, self.live_peak_bytes),
            arena_ratio: ratio(self.arena_bytes, self.live_peak_bytes),
            tensors: self.blocks.iter().map(|b| b.tensors).sum(),
            blocks_per_class: per_class.into_iter().collect(),
        }
    }

    /// Where each block's header slot starts in the arena, and the arena's size:
    ///
    /// ```text
    ///  slot = [ 64-byte header slot ][ block: class_bytes rounded up to 64 ]
    ///  unpacked: slots one after another; packed: slots at the blocks' offsets
    /// ```
    ///
    /// `None` when a size overflows, only some blocks have offsets, or an offset is not a
    /// multiple of 64.
    pub fn layout(&self) -> Option<(Vec<u64>, u64)> {
        let packed = self.blocks.first().is_some_and(|b| b.offset.is_some());
        let mut offsets = Vec::with_capacity(self.blocks.len());
        let mut end: u64 = 0;
        for block in &self.blocks {
            let slot = slot_bytes(block.class_bytes)?;
            let offset = match (packed, block.offset) {
                (true, Some(offset)) if offset % SLOT == 0 => offset,
                (false, None) => end,
                _ => return None,
            };
            offsets.push(offset);
            end = end.max(offset.checked_add(slot)?);
        }
        Some((offsets, end))
    }

    /// Checks what the runtime pool relies on: block indices in range, every scheduled
    /// block at least as large as its class, the total equal to the sum of the blocks,
    /// a valid layout whose size is `arena_bytes`.
    pub fn validate(&self) -> Result<(), String> {
        let mut total: u64 = 0;
        for (index, block) in self.blocks.iter().enumerate() {
            if block.class_bytes == 0 {
                return Err(format!("block {index} has size 0"));
            }
            total = total
                .checked_add(block.class_bytes)
                .ok_or("the block sizes overflow 64 bits")?;
        }
        if total != self.total_bytes {
            return Err(format!(
                "total_bytes is {}, but the blocks add up to {total}",
                self.total_bytes
            ));
        }
        if self.class_interval == 0 {
            return Err("class_interval must be at least 1".into());
        }
        let Some((_, arena)) = self.layout() else {
            return Err(
                "invalid block offsets: all or none must be given, each a multiple of 64".into(),
            );
        };
        if arena != self.arena_bytes {
            return Err(format!(
                "arena_bytes is {}, but the blocks need {arena}",
                self.arena_bytes
            ));
        }
        for schedule in &self.schedules {
            for &b in &schedule.blocks {
                let Some(block) = self.blocks.get(b as usize) else {
                    return Err(format!(
                        "schedule of class {} names block {b}, but there are {} blocks",
                        schedule.class_bytes,
                        self.blocks.len()
                    ));
                };
                if block.class_bytes < schedule.class_bytes {
                    return Err(format!(
                        "class {} is scheduled into block {b} of only {} bytes",
                        schedule.class_bytes, block.class_bytes
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The header slot in front of each block, and the alignment of blocks (see
/// [`Plan::layout`]).
pub const SLOT: u64 = 64;

/// Bytes a block of `class_bytes` takes in the arena: its header slot, and itself rounded
/// up to [`SLOT`].
pub fn slot_bytes(class_bytes: u64) -> Option<u64> {
    class_bytes
        .div_ceil(SLOT)
        .checked_mul(SLOT)?
        .checked_add(SLOT)
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        1.0
    } else {
        a as f64 / b as f64
    }
}

/// `ceil(size / g) * g`, or `None` on overflow.
pub fn class_of(size: u64, g: u64) -> Option<u64> {
    size.div_ceil(g).checked_mul(g)
}

/// One or two disjoint half-open intervals of event positions.
type Lifetime = Vec<(usize, usize)>;

/// A recorded tensor of the trained iteration.
#[derive(Clone, Debug)]
struct Tensor {
    size: u64,
    class: u64,
    /// One or two disjoint half-open intervals of event positions.
    lifetime: Vec<(usize, usize)>,
    length: usize,
}

/// A cache block under construction: its class and the disjoint intervals it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Building {
    class: u64,
    tensors: u64,
    /// start -> end of each interval held.
    held: BTreeMap<usize, usize>,
}

impl Building {
    fn new(class: u64) -> Building {
        Building {
            class,
            tensors: 0,
            held: BTreeMap::new(),
        }
    }

    fn conflicts(&self, (start, end): (usize, usize)) -> bool {
        // The interval starting last before `end` is the only one that can reach `start`
        // (held intervals are disjoint).
        self.held
            .range(..end)
            .next_back()
            .is_some_and(|(_, &held_end)| held_end > start)
    }

    fn fits(&self, lifetime: &[(usize, usize)]) -> bool {
        lifetime.iter().all(|&interval| !self.conflicts(interval))
    }
}

/// Where the trainer put the tensors: the blocks in plan order (classes ascending,
/// creation order within a class) and the plan index of each tensor's block.
#[derive(Debug, PartialEq, Eq)]
struct Placement {
    blocks: Vec<Building>,
    placed: Vec<u32>,
}

/// What the first-fit search knows of one block, or of a range of block slots (the
/// combination over the range). Every field is a bound such that a block that fits an
/// interval `[s, e)` makes [`Summary::may_fit`] true for every range holding it; a
/// slot without a block never fits.
#[derive(Clone, Copy, Debug)]
struct Summary {
    /// Smallest end of the last held interval (a block is free from there on).
    min_last_end: usize,
    /// Largest start of the first held interval (a block is free up to there).
    max_first_start: usize,
    /// Longest hole between two held intervals.
    max_hole: usize,
    /// Smallest end of the first held interval, among blocks with a hole (no hole
    /// starts before it).
    min_hole_start: usize,
    /// Largest start of the last held interval, among blocks with a hole (no hole ends
    /// after it).
    max_hole_end: usize,
}

impl Summary {
    /// A slot without a block.
    const EMPTY: Summary = Summary {
        min_last_end: usize::MAX,
        max_first_start: 0,
        max_hole: 0,
        min_hole_start: usize::MAX,
        max_hole_end: 0,
    };

    fn combine(a: Summary, b: Summary) -> Summary {
        Summary {
            min_last_end: a.min_last_end.min(b.min_last_end),
            max_first_start: a.max_first_start.max(b.max_first_start),
            max_hole: a.max_hole.max(b.max_hole),
            min_hole_start: a.min_hole_start.min(b.min_hole_start),
            max_hole_end: a.max_hole_end.max(b.max_hole_end),
        }
    }

    /// False only when no block summarised can hold `[s, e)` (`s < e`): a block that
    /// holds it has it after its last interval, before its first, or in a hole.
    fn may_fit(&self, (s, e): (usize, usize)) -> bool {
        self.min_last_end <= s
            || self.max_first_start >= e
            || (self.max_hole >= e - s && self.min_hole_start <= s && self.max_hole_end >= e)
    }
}

/// The blocks of the trainer in their search order, with an index that finds the first
/// one a lifetime fits without visiting every block.
///
/// Each size class owns a range of *slots*, classes ascending, as many slots as it has
/// tensors (a class's blocks are only ever created for its own tensors); its blocks take
/// its slots in creation order. Slot order is then the order in which the method visits
/// blocks: the tensor's own class first, then the larger classes ascending, each in
/// creation order. A segment tree over the slots holds [`Summary`]s, and from height 2 up
/// the *reach* of its blocks per time bucket (see [`Blocks::block_reach`]); the search
/// descends into a subtree only when both allow a fit, and tests a candidate block
/// exactly, so it returns the very block a scan of every block would.
struct Blocks {
    slots: Vec<Option<Building>>,
    /// The length of a hole between held intervals -> how many, per slot.
    holes: Vec<BTreeMap<usize, u32>>,
    /// Leaves start at `leaves`; node `i`'s children are `2i` and `2i + 1`.
    tree: Vec<Summary>,
    leaves: usize,
    /// Positions of one time bucket: bucket `j` is `[j * width, (j + 1) * width)`.
    width: usize,
    /// Per node `1..leaves / 2` (height 2 and up), [`BUCKETS`] values: the largest
    /// [`Blocks::block_reach`] of its blocks in each bucket (`u32::MAX`: unbounded).
    reach: Vec<u32>,
}

/// Time buckets of [`Blocks::reach`].
const BUCKETS: usize = 64;

impl Blocks {
    /// `slots` slots for lifetimes within `[0, len)`.
    fn new(slots: usize, len: usize) -> Blocks {
        let leaves = slots.next_power_of_two().max(1);
        Blocks {
            slots: vec![None; slots],
            holes: vec![BTreeMap::new(); slots],
            tree: vec![Summary::EMPTY; 2 * leaves],
            leaves,
            width: len.div_ceil(BUCKETS).max(1),
            reach: vec![0; leaves / 2 * BUCKETS],
        }
    }

    /// At least the end of every free run (hole, or the stretch before the first or
    /// after the last interval) of the block in `slot` that meets bucket `j`; 0 for no
    /// block. A block that can hold `[s, e)` has a free run from `s` to at least `e`,
    /// which meets `s`'s bucket: its reach there is at least `e`.
    fn block_reach(&self, slot: usize, j: usize) -> usize {
        let Some(block) = self.slots.get(slot).and_then(Option::as_ref) else {
            return 0;
        };
        let (start, end) = (j * self.width, (j + 1) * self.width);
        // The last interval starting before the bucket's end.
        let Some((&held_start, &held_end)) = block.held.range(..end).next_back() else {
            // Free from 0 up to the first interval, past the bucket.
            return block.held.first_key_value().map_or(usize::MAX, |(&s, _)| s);
        };
        if held_end < end {
            // The run after it meets the bucket and is the last that does.
            block
                .held
                .range(held_end..)
                .next()
                .map_or(usize::MAX, |(&s, _)| s)
        } else if held_start > start {
            // It covers the bucket's end: runs meeting the bucket end by its start.
            held_start
        } else {
            // It covers the whole bucket.
            0
        }
    }

    /// Whether the subtree of `node` may hold `[s, e)`.
    fn may_fit(&self, node: usize, (s, e): (usize, usize)) -> bool {
        self.tree[node].may_fit((s, e))
            && (node >= self.leaves / 2 || {
                let reach = self.reach[node * BUCKETS + s / self.width];
                reach == u32::MAX || reach as usize >= e
            })
    }

    /// The first slot from `from` on whose block `lifetime` fits.
    fn first_fit(&self, from: usize, lifetime: &[(usize, usize)]) -> Option<usize> {
        self.search(1, 0, self.leaves, from, lifetime)
    }

    fn search(
        &self,
        node: usize,
        lo: usize,
        hi: usize,
        from: usize,
        lifetime: &[(usize, usize)],
    ) -> Option<usize> {
        if hi <= from || !lifetime.iter().all(|&i| self.may_fit(node, i)) {
            return None;
        }
        if hi - lo == 1 {
            return self.slots[lo]
                .as_ref()
                .filter(|block| block.fits(lifetime))
                .map(|_| lo);
        }
        let mid = lo + (hi - lo) / 2;
        self.search(2 * node, lo, mid, from, lifetime)
            .or_else(|| self.search(2 * node + 1, mid, hi, from, lifetime))
    }

    /// Puts a new block of `class` into `slot` (which has none).
    fn create(&mut self, slot: usize, class: u64) {
        self.slots[slot] = Some(Building::new(class));
    }

    /// Gives the tensor of `lifetime` to the block in `slot` (it fits there).
    fn insert(&mut self, slot: usize, lifetime: &[(usize, usize)]) {
        let block = self.slots[slot].as_mut().expect("a block in the slot");
        let holes = &mut self.holes[slot];
        block.tensors += 1;
        // The buckets whose reach may change: those that the part of a free run up to the
        // end of the interval taken from it meets (the rest of the run keeps its end);
        // every bucket for a new block (its slot had no reach).
        let new = block.held.is_empty();
        let (mut low, mut high) = if new { (0, BUCKETS) } else { (usize::MAX, 0) };
        for &(s, e) in lifetime {
            let before = block.held.range(..s).next_back().map(|(_, &end)| end);
            let after = block.held.range(e..).next().map(|(&start, _)| start);
            low = low.min(before.unwrap_or(0) / self.width);
            high = high.max(e.div_ceil(self.width));
            if let (Some(before), Some(after)) = (before, after) {
                // `[s, e)` goes into this hole (`before <= s < e <= after`).
                match holes.get_mut(&(after - before)) {
                    Some(1) => {
                        holes.remove(&(after - before));
                    }
                    Some(count) => *count -= 1,
                    None => unreachable!("every hole is counted"),
                }
            }
            for length in [before.map(|end| s - end), after.map(|start| start - e)] {
                if let Some(length @ 1..) = length {
                    *holes.entry(length).or_default() += 1;
                }
            }
            block.held.insert(s, e);
        }
        let (Some((&first_start, &first_end)), Some((&last_start, &last_end))) =
            (block.held.first_key_value(), block.held.last_key_value())
        else {
            unreachable!("a block given a tensor holds an interval")
        };
        let max_hole = holes.last_key_value().map_or(0, |(&length, _)| length);
        let summary = Summary {
            min_last_end: last_end,
            max_first_start: first_start,
            max_hole,
            min_hole_start: if max_hole > 0 { first_end } else { usize::MAX },
            max_hole_end: if max_hole > 0 { last_start } else { 0 },
        };
        let mut node = self.leaves + slot;
        self.tree[node] = summary;
        while node > 1 {
            node /= 2;
            self.tree[node] = Summary::combine(self.tree[2 * node], self.tree[2 * node + 1]);
        }
        // The reach, bottom up: height 2 from its four slots, above from the children.
        let high = high.min(BUCKETS);
        let mut node = (self.leaves + slot) / 4;
        if node == 0 {
            return;
        }
        if new {
            // The slot's reach was 0: every value above is the larger of its own and
            // the new block's.
            for j in 0..BUCKETS {
                let reach = u32::try_from(self.block_reach(slot, j)).unwrap_or(u32::MAX);
                let mut node = node;
                while node > 0 && self.reach[node * BUCKETS + j] < reach {
                    self.reach[node * BUCKETS + j] = reach;
                    node /= 2;
                }
            }
            return;
        }
        for j in low..high {
            let first = node * 4 - self.leaves;
            let reach = (first..first + 4)
                .map(|slot| self.block_reach(slot, j))
                .max()
                .unwrap_or(0);
            self.reach[node * BUCKETS + j] = u32::try_from(reach).unwrap_or(u32::MAX);
        }
        while node > 1 {
            node /= 2;
            let mut changed = false;
            for j in low..high {
                let reach = self.reach[2 * node * BUCKETS + j]
                    .max(self.reach[(2 * node + 1) * BUCKETS + j]);
                changed |= std::mem::replace(&mut self.reach[node * BUCKETS + j], reach) != reach;
            }
            if !changed {
                // Nothing above changes either.
                break;
            }
        }
    }
}

/// First fit, as the method states it, through the [`Blocks`] index.
fn place(tensors: &[Tensor], visit: &[usize]) -> Result<Placement, TrainError> {
    // The slots of each class: `first[class]` is its first slot, `used[class]` the
    // blocks it has.
    let mut first: BTreeMap<u64, usize> = BTreeMap::new();
    for tensor in tensors {
        *first.entry(tensor.class).or_default() += 1;
    }
    let mut next = 0;
    for slot in first.values_mut() {
        let count = *slot;
        *slot = next;
        next += count;
    }
    let mut used: HashMap<u64, usize> = HashMap::new();
    let len = tensors
        .iter()
        .flat_map(|t| t.lifetime.iter().map(|&(_, e)| e))
        .max()
        .unwrap_or(0);
    let mut blocks = Blocks::new(tensors.len(), len);
    let mut placed = vec![usize::MAX; tensors.len()];
    for &t in visit {
        let tensor = &tensors[t];
        let own = first[&tensor.class];
        let slot = match blocks.first_fit(own, &tensor.lifetime) {
            Some(slot) => slot,
            None => {
                let used = used.entry(tensor.class).or_default();
                let slot = own + *used;
                *used += 1;
                blocks.create(slot, tensor.class);
                slot
            }
        };
        blocks.insert(slot, &tensor.lifetime);
        placed[t] = slot;
    }
    // Plan order is slot order without the empty slots.
    let mut index = vec![0u32; tensors.len()];
    let mut out = Vec::new();
    for (slot, block) in blocks.slots.into_iter().enumerate() {
        if let Some(block) = block {
            index[slot] = u32::try_from(out.len()).map_err(|_| TrainError::Overflow)?;
            out.push(block);
        }
    }
    Ok(Placement {
        blocks: out,
        placed: placed.into_iter().map(|slot| index[slot]).collect(),
    })
}

/// The recorded tensors of `iteration`, in allocation order (see the module docs).
fn tensors(trace: &Trace, number: u64, options: &TrainOptions) -> Result<Vec<Tensor>, TrainError> {
    let index = trace
        .iterations
        .iter()
        .position(|it| it.number == number)
        .ok_or(TrainError::NoIteration(number))?;
    let this = &trace.iterations[index];
    let next = trace.iterations.get(index + 1);
    let len = this.events.len();
    // Allocations of this iteration still live, by id (ids are unique among live
    // allocations, but may be reused once freed): (alloc position, size).
    let mut open: HashMap<u64, (usize, u64)> = HashMap::new();
    // (alloc position, size, lifetime) of each allocation found.
    let mut found: Vec<(usize, u64, Lifetime)> = Vec::new();
    for (pos, event) in trace.events_of(this).iter().enumerate() {
        match event.op {
            Op::Alloc => {
                open.insert(event.id, (pos, event.size));
            }
            Op::Free => {
                if let Some((a, size)) = open.remove(&event.id) {
                    found.push((a, size, vec![(a, pos)]));
                }
            }
        }
    }
    // Still live at the end: freed in the next iteration (wraps round), or later.
    if let Some(next) = next {
        for (pos, event) in trace.events_of(next).iter().enumerate() {
            if open.is_empty() {
                break;
            }
            if event.op == Op::Free {
                if let Some((a, size)) = open.remove(&event.id) {
                    let lifetime = if pos < a {
                        vec![(0, pos), (a, len)]
                    } else {
                        // Still live when its next instance is allocated.
                        vec![(0, len)]
                    };
                    found.push((a, size, lifetime));
                }
            }
        }
    }
    found.extend(
        open.into_values()
            .map(|(a, size)| (a, size, vec![(0, len)])),
    );
    found.sort_by_key(|f| f.0);

    let mut out = Vec::with_capacity(found.len());
    for (_, size, lifetime) in found {
        if size < options.min_size {
            continue;
        }
        let class = class_of(size, options.class_interval).ok_or(TrainError::Overflow)?;
        // A free at position 0 of the next iteration leaves an empty wrapped part.
        let lifetime: Vec<(usize, usize)> = lifetime.into_iter().filter(|(s, e)| s < e).collect();
        let length = lifetime.iter().map(|(s, e)| e - s).sum();
        out.push(Tensor {
            size,
            class,
            lifetime,
            length,
        });
    }
    Ok(out)
}

/// Peak over positions of the bytes live (cyclic lifetimes), by a sweep.
fn live_peak(tensors: &[Tensor]) -> Result<u64, TrainError> {
    let mut deltas: Vec<(usize, i8, u64)> = Vec::new();
    for t in tensors {
        for &(s, e) in &t.lifetime {
            deltas.push((s, 1, t.size));
            deltas.push((e, -1, t.size));
        }
    }
    // Ends before starts at the same position: intervals are half-open.
    deltas.sort_unstable_by_key(|&(pos, sign, _)| (pos, sign));
    let (mut live, mut peak) = (0u64, 0u64);
    for (_, sign, size) in deltas {
        if sign > 0 {
            live = live.checked_add(size).ok_or(TrainError::Overflow)?;
            peak = peak.max(live);
        } else {
            live -= size;
        }
    }
    Ok(peak)
}

/// Trains a plan from `trace` (see the module documentation).
pub fn train(trace: &Trace, options: &TrainOptions) -> Result<Plan, TrainError> {
    train_with(trace, options, place)
}

/// [`train`] with the first-fit placement done by `placer`.
fn train_with(
    trace: &Trace,
    options: &TrainOptions,
    placer: fn(&[Tensor], &[usize]) -> Result<Placement, TrainError>,
) -> Result<Plan, TrainError> {
    if options.class_interval == 0 {
        return Err(TrainError::ZeroInterval);
    }
    let tensors = tensors(trace, options.iteration, options)?;
    let live_peak_bytes = live_peak(&tensors)?;

    let mut visit: Vec<usize> = (0..tensors.len()).collect();
    match options.order {
        Order::Allocation => {}
        Order::SizeDescending => visit.sort_by_key(|&i| std::cmp::Reverse(tensors[i].size)),
        Order::LifetimeDescending => visit.sort_by_key(|&i| std::cmp::Reverse(tensors[i].length)),
    }

    let Placement {
        blocks: building,
        placed,
    } = placer(&tensors, &visit)?;
    let mut blocks = Vec::with_capacity(building.len());
    let mut total_bytes: u64 = 0;
    for block in &building {
        total_bytes = total_bytes
            .checked_add(block.class)
            .ok_or(TrainError::Overflow)?;
        blocks.push(Block {
            class_bytes: block.class,
            tensors: block.tensors,
            offset: None,
        });
    }
    if options.pack {
        let held: Vec<&BTreeMap<usize, usize>> = building.iter().map(|b| &b.held).collect();
        let offsets = pack(&blocks, &held)?;
        for (block, offset) in blocks.iter_mut().zip(offsets) {
            block.offset = Some(offset);
        }
    }
    let mut schedules: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
    for (t, tensor) in tensors.iter().enumerate() {
        schedules.entry(tensor.class).or_default().push(placed[t]);
    }
    let mut plan = Plan {
        format: "memplan-pool-plan".into(),
        version: 1,
        class_interval: options.class_interval,
        order: options.order,
        iteration: options.iteration,
        min_size: options.min_size,
        total_bytes,
        live_peak_bytes,
        blocks,
        schedules: schedules
            .into_iter()
            .map(|(class_bytes, blocks)| Schedule {
                class_bytes,
                blocks,
            })
            .collect(),
        arena_bytes: 0,
    };
    plan.arena_bytes = plan.layout().ok_or(TrainError::Overflow)?.1;
    Ok(plan)
}

/// Packs the blocks into one arena with memplan's `best-of` planner: each block is a
/// buffer of its slot's size, live during the intervals it holds (the holes between them
/// are gaps), so blocks never in use at the same time in the recorded iteration may share
/// addresses. The plan is checked by memplan's checker. Returns each block's slot offset.
///
/// The runtime pool stays correct whatever the requests: it hands out a block only while
/// no block sharing its addresses is in use.
pub fn pack(blocks: &[Block], held: &[&BTreeMap<usize, usize>]) -> Result<Vec<u64>, TrainError> {
    use memplan::{Buffer, Lifetime, Problem};
    let mut buffers = Vec::with_capacity(blocks.len());
    for (index, (block, held)) in blocks.iter().zip(held).enumerate() {
        // Merge touching intervals: a gap must not be empty.
        let mut segments: Vec<(u64, u64)> = Vec::new();
        for (&s, &e) in held.iter() {
            let (s, e) = (s as u64, e as u64);
            match segments.last_mut() {
                Some(last) if last.1 == s => last.1 = e,
                _ => segments.push((s, e)),
            }
        }
        let (Some(first), Some(last)) = (segments.first(), segments.last()) else {
            continue;
        };
        let size = slot_bytes(block.class_bytes).ok_or(TrainError::Overflow)?;
        let mut buffer = Buffer::new(index.to_string(), size, first.0, last.1);
        buffer.alignment = SLOT;
        buffer.gaps = segments
            .windows(2)
            .filter_map(|w| Lifetime::new(w[0].1, w[1].0))
            .collect();
        buffers.push(buffer);
    }
    if buffers.len() != blocks.len() {
        // Every block holds at least one tensor; an empty one cannot be described.
        return Err(TrainError::Overflow);
    }
    let problem = Problem::from_buffers(buffers).map_err(|_| TrainError::Overflow)?;
    let planner = memplan::planner::by_name("best-of").map_err(|_| TrainError::Overflow)?;
    let plan = planner.plan(&problem).map_err(|_| TrainError::Overflow)?;
    if !memplan::checker::check(&problem, &plan).is_valid() {
        return Err(TrainError::PackingInvalid);
    }
    Ok(plan.offsets)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use proptest::prelude::*;

    use super::*;

    /// The first fit as first written: every block of the tensor's class and of the
    /// larger classes scanned in order (quadratic). The reference for [`place`].
    fn place_by_scan(tensors: &[Tensor], visit: &[usize]) -> Result<Placement, TrainError> {
        let mut building: Vec<Building> = Vec::new();
        let mut classes: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
        let mut placed = vec![usize::MAX; tensors.len()];
        for &t in visit {
            let tensor = &tensors[t];
            let found = classes
                .range(tensor.class..)
                .flat_map(|(_, blocks)| blocks.iter().copied())
                .find(|&b| building[b].fits(&tensor.lifetime));
            let b = match found {
                Some(b) => b,
                None => {
                    building.push(Building::new(tensor.class));
                    let b = building.len() - 1;
                    classes.entry(tensor.class).or_default().push(b);
                    b
                }
            };
            let block = &mut building[b];
            block.tensors += 1;
            for &(s, e) in &tensor.lifetime {
                block.held.insert(s, e);
            }
            placed[t] = b;
        }
        let mut renumber = vec![0u32; building.len()];
        let mut blocks = Vec::with_capacity(building.len());
        for indices in classes.values() {
            for &b in indices {
                renumber[b] = u32::try_from(blocks.len()).map_err(|_| TrainError::Overflow)?;
                blocks.push(building[b].clone());
            }
        }
        Ok(Placement {
            blocks,
            placed: placed.into_iter().map(|b| renumber[b]).collect(),
        })
    }

    /// A trace of `iterations` iterations over the tensors `(size, life)`: tensor `i`
    /// allocated at step `i`, freed `life` steps later (never when `life` is 0).
    fn trace(tensors: &[(u64, usize)], iterations: usize) -> Trace {
        let steps = tensors.len();
        let mut frees: BTreeMap<usize, Vec<(usize, u64)>> = BTreeMap::new();
        let mut csv = String::from("iter,op,size,id\n");
        let iter = |step: usize| step * iterations / steps.max(1);
        for (i, &(size, life)) in tensors.iter().enumerate() {
            csv.push_str(&format!("{},alloc,{size},{i}\n", iter(i)));
            if life > 0 {
                frees.entry(i + life).or_default().push((i, size));
            }
            for (id, size) in frees.remove(&i).unwrap_or_default() {
                csv.push_str(&format!("{},free,{size},{id}\n", iter(i)));
            }
        }
        // Frees past the last allocation: in the last iteration.
        for (id, size) in frees.into_values().flatten() {
            csv.push_str(&format!(
                "{},free,{size},{id}\n",
                iter(steps.saturating_sub(1))
            ));
        }
        Trace::from_csv(Path::new("t.csv"), &csv).unwrap()
    }

    /// Checks the plan's placement independently of the trainer's index: every block
    /// at least as large as the class of each tensor it holds, its count right, and the
    /// lifetimes of its tensors pairwise disjoint.
    fn check_placement(trace: &Trace, options: &TrainOptions, plan: &Plan) {
        plan.validate().unwrap();
        let tensors = tensors(trace, options.iteration, options).unwrap();
        let mut next: BTreeMap<u64, usize> = BTreeMap::new();
        let mut held: Vec<Vec<(usize, usize)>> = vec![Vec::new(); plan.blocks.len()];
        let mut count = vec![0u64; plan.blocks.len()];
        for tensor in &tensors {
            let schedule = plan
                .schedules
                .iter()
                .find(|s| s.class_bytes == tensor.class)
                .unwrap();
            let k = next.entry(tensor.class).or_default();
            let b = schedule.blocks[*k] as usize;
            *k += 1;
            assert!(plan.blocks[b].class_bytes >= tensor.class);
            held[b].extend(&tensor.lifetime);
            count[b] += 1;
        }
        for (b, mut intervals) in held.into_iter().enumerate() {
            assert_eq!(count[b], plan.blocks[b].tensors, "block {b}");
            intervals.sort_unstable();
            for w in intervals.windows(2) {
                assert!(
                    w[0].1 <= w[1].0,
                    "block {b} holds {:?} and {:?}",
                    w[0],
                    w[1]
                );
            }
        }
        assert_eq!(count.iter().sum::<u64>(), tensors.len() as u64);
    }

    fn options(g: u64, order: Order, iteration: u64, min_size: u64, pack: bool) -> TrainOptions {
        TrainOptions {
            class_interval: g,
            order,
            iteration,
            min_size,
            pack,
        }
    }

    fn same_as_scan(trace: &Trace, options: &TrainOptions) -> Result<(), TestCaseError> {
        let fast = train(trace, options);
        let scan = train_with(trace, options, place_by_scan);
        prop_assert_eq!(&fast, &scan, "{:?}", options);
        if let Ok(plan) = fast {
            check_placement(trace, options, &plan);
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

        /// The indexed first fit gives exactly the plan of the scan, on random traces with
        /// tensors of few sizes (classes shared, borrowing), short and long lifetimes,
        /// lifetimes that wrap round the iteration's end and tensors never freed.
        #[test]
        fn indexed_first_fit_is_the_scan(
            tensors in prop::collection::vec((0u64..12, 0usize..40), 1..120),
            iterations in 1usize..4,
            g in prop_oneof![Just(1u64), Just(700), Just(2048), Just(8192)],
            min_size in prop_oneof![Just(0u64), Just(2000)],
            pack in any::<bool>(),
            which in 0usize..3,
        ) {
            let tensors: Vec<(u64, usize)> = tensors.into_iter().map(|(k, life)| (1 + k * 700, life)).collect();
            let trace = trace(&tensors, iterations);
            let iteration = trace.iterations[which % trace.iterations.len()].number;
            for order in Order::ALL {
                same_as_scan(&trace, &options(g, order, iteration, min_size, pack))?;
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 32, failure_persistence: None, ..ProptestConfig::default() })]

        /// The same on larger traces: deeper trees, time buckets wider than one event.
        #[test]
        fn indexed_first_fit_is_the_scan_on_larger_traces(
            tensors in prop::collection::vec((0u64..6, 0usize..400), 300..1500),
            iterations in 1usize..3,
        ) {
            let tensors: Vec<(u64, usize)> = tensors.into_iter().map(|(k, life)| (1 + k * 1000, life)).collect();
            let trace = trace(&tensors, iterations);
            let iteration = trace.iterations[0].number;
            for order in Order::ALL {
                same_as_scan(&trace, &options(2048, order, iteration, 0, false))?;
            }
        }
    }

    /// The benchmark's shapes, small: many tensors of one class live at once, and
    /// staggered lifetimes of many sizes over two iterations (wrapping round).
    #[test]
    fn bench_shapes_match_the_scan() {
        let live: Vec<(u64, usize)> = (0..400).map(|i| (4096, 400 - i)).collect();
        let mut state: u64 = 12345;
        let mut rand = || {
            state = (state * 1103515245 + 12345) % (1 << 31);
            state
        };
        let staggered: Vec<(u64, usize)> = (0..1500)
            .map(|_| (1 + rand() % 2048, 1 + (rand() % 150) as usize))
            .collect();
        for (shape, iterations) in [(live, 1), (staggered, 2)] {
            let trace = trace(&shape, iterations);
            let iteration = trace.iterations[0].number;
            for g in [512, 2048] {
                for order in Order::ALL {
                    same_as_scan(&trace, &options(g, order, iteration, 0, false)).unwrap();
                }
            }
        }
    }

    /// Many tensors live at once need as many blocks; the index finds none for them.
    #[test]
    fn all_live_at_once_take_a_block_each() {
        let live: Vec<(u64, usize)> = (0..300).map(|i| (4096, 300 - i)).collect();
        let trace = trace(&live, 1);
        let opts = options(2048, Order::Allocation, 0, 0, false);
        let plan = train(&trace, &opts).unwrap();
        assert_eq!(plan.blocks.len(), 300);
        check_placement(&trace, &opts, &plan);
    }
}
