//! The plan trainer of method 3: size classes, cache blocks, traversal orders, borrowing.
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
struct Building {
    class: u64,
    tensors: u64,
    /// start -> end of each interval held.
    held: BTreeMap<usize, usize>,
}

impl Building {
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

    // Blocks under construction, and per class the indices of its blocks in creation order.
    let mut building: Vec<Building> = Vec::new();
    let mut classes: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    let mut placed = vec![usize::MAX; tensors.len()];
    for &t in &visit {
        let tensor = &tensors[t];
        let found = classes
            .range(tensor.class..)
            .flat_map(|(_, blocks)| blocks.iter().copied())
            .find(|&b| building[b].fits(&tensor.lifetime));
        let b = match found {
            Some(b) => b,
            None => {
                building.push(Building {
                    class: tensor.class,
                    tensors: 0,
                    held: BTreeMap::new(),
                });
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

    // Renumber blocks: classes ascending, creation order within a class.
    let mut renumber = vec![0u32; building.len()];
    let mut blocks = Vec::with_capacity(building.len());
    let mut total_bytes: u64 = 0;
    for indices in classes.values() {
        for &b in indices {
            renumber[b] = u32::try_from(blocks.len()).map_err(|_| TrainError::Overflow)?;
            total_bytes = total_bytes
                .checked_add(building[b].class)
                .ok_or(TrainError::Overflow)?;
            blocks.push(Block {
                class_bytes: building[b].class,
                tensors: building[b].tensors,
                offset: None,
            });
        }
    }
    if options.pack {
        let held: Vec<&BTreeMap<usize, usize>> = classes
            .values()
            .flat_map(|indices| indices.iter().map(|&b| &building[b].held))
            .collect();
        let offsets = pack(&blocks, &held)?;
        for (block, offset) in blocks.iter_mut().zip(offsets) {
            block.offset = Some(offset);
        }
    }
    let mut schedules: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
    for (t, tensor) in tensors.iter().enumerate() {
        schedules
            .entry(tensor.class)
            .or_default()
            .push(renumber[placed[t]]);
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
