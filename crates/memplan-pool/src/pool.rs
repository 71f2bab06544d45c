//! The runtime pool allocator of the `pool` method: serves requests from a trained [`Plan`].
//!
//! Memory is obtained from the OS once, at [`Pool::new`], and carved into the plan's
//! blocks. Every block is preceded by a 64-byte header slot; every pointer the pool hands
//! out, from a block or from the OS, has a [`HEADER_BYTES`]-byte header right in front
//! of it saying where it came from, and [`Pool::free`] reads it:
//!
//! ```text
//!  arena (one OS allocation, 4 KiB aligned; unpacked layout shown)
//!  ┌────────┬──────────────────┬────────┬────────────┬─────
//!  │ slot 0 │ block 0          │ slot 1 │ block 1    │ ...    slot = 64 bytes, header at
//!  │  [hdr] │ class_bytes,     │  [hdr] │            │        its end; blocks start at
//!  └────────┴ rounded to 64 ───┴────────┴────────────┴─────   multiples of 64
//!
//!  OS fallback:  [ pad = max(align, 64) bytes, header at its end ][ size bytes ]
//! ```
//!
//! **Matching requests to the plan.** For each size class the plan lists the blocks its
//! requests went to, in allocation order within an iteration (the *schedule*). The pool
//! keeps a cursor per class. A request of class `c`:
//!
//! 1. *plan hit*: the block under `c`'s cursor, or one of the next [`LOOKAHEAD`] - 1
//!    scheduled blocks (cyclically), is free, large enough and aligned: the request gets
//!    it and the cursor moves just past it (so a skipped or extra request realigns it);
//! 2. *class fallback*: else any free block of class `c` itself (header records the class);
//! 3. *OS fallback*: else fresh memory from the global allocator (header says so).
//!
//! Requests smaller than the plan's `min_size` were left out of the plan and go straight
//! to the OS fallback, so that they cannot take the blocks scheduled for planned ones.
//!
//! The schedule is cyclic, so iteration after iteration the cursors come round by
//! themselves; [`Pool::begin_iteration`] also puts them back to the start when the
//! caller knows where iterations begin.
//!
//! In a packed plan blocks that the recorded iteration never uses at the same time share
//! addresses. Whatever the sequence of requests, a block is handed out only while neither
//! it nor any block sharing its bytes is held (a flag per block, under one mutex), so live
//! allocations never overlap, and every pointer is aligned as asked and valid for `size`
//! bytes.

use std::alloc::{self, Layout};
use std::ptr::NonNull;
use std::sync::Mutex;

use crate::train::{class_of, Plan};

/// Bytes of the header in front of every pointer the pool hands out.
pub const HEADER_BYTES: usize = 32;
/// The header slot in front of each block, and the alignment of every block.
pub const BLOCK_ALIGN: usize = 64;
/// How many scheduled blocks a request may look at, starting at its class's cursor.
pub const LOOKAHEAD: usize = 8;
/// Alignment of the arena.
const ARENA_ALIGN: usize = 4096;
const PAGE: usize = 4096;
const MAGIC: u64 = 0x6d65_6d70_6f6f_6c21; // "mempool!"

/// Where an allocation's memory came from, as its header records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The block the plan scheduled for it.
    Plan,
    /// A free block of its size class (the first fallback).
    Class,
    /// The operating system, through the global allocator (the second fallback).
    Os,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct Header {
    magic: u64,
    source: u64,
    /// Block index (Plan, Class) or the total layout size (Os).
    a: u64,
    /// The layout alignment, which is also the offset of the pointer in it (Os).
    b: u64,
}

const SOURCE_PLAN: u64 = 1;
const SOURCE_CLASS: u64 = 2;
const SOURCE_OS: u64 = 3;

/// Counters of the requests served since the pool was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Allocation requests.
    pub requests: u64,
    /// Served from their scheduled block.
    pub plan_hits: u64,
    /// Served by a free block of their class.
    pub class_fallbacks: u64,
    /// Served by the OS.
    pub os_fallbacks: u64,
    /// Requests of at least [`LARGE`] bytes.
    pub large_requests: u64,
    /// Requests of at least [`LARGE`] bytes served from their scheduled block.
    pub large_plan_hits: u64,
}

/// The size from which a request counts as large in [`PoolStats`] (32 KiB).
pub const LARGE: u64 = 32 * 1024;

/// Why a pool cannot be made from a plan.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    /// The plan is inconsistent.
    #[error("invalid plan: {0}")]
    InvalidPlan(String),
    /// The arena's size overflows.
    #[error("the plan's arena does not fit in memory addresses")]
    Overflow,
    /// The OS refused the arena.
    #[error("cannot obtain the arena of {0} bytes from the OS")]
    OutOfMemory(usize),
}

/// Options of [`Pool::new`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolOptions {
    /// Write every page of the arena once at start, so that serving from the plan never
    /// page-faults afterwards.
    pub prefault: bool,
}

struct BlockInfo {
    /// Offset of the block's first byte (the pointer handed out) in the arena.
    offset: usize,
    size: usize,
    /// The blocks whose bytes (header slot included) overlap this one's.
    shares: Vec<usize>,
}

struct State {
    serving: bool,
    in_use: Vec<bool>,
    cursors: Vec<usize>,
    stats: PoolStats,
}

/// A thread-safe pool allocator serving the requests of a trained [`Plan`].
pub struct Pool {
    arena: NonNull<u8>,
    arena_layout: Option<Layout>,
    class_interval: u64,
    /// Requests smaller than this are not in the plan and go straight to the OS.
    min_size: u64,
    blocks: Vec<BlockInfo>,
    /// (class, scheduled block indices), class ascending.
    schedules: Vec<(u64, Vec<u32>)>,
    /// (class, first block, end block) of the blocks owned by each class, ascending.
    owned: Vec<(u64, usize, usize)>,
    state: Mutex<State>,
}

// SAFETY: the pool owns its arena; the bytes of a block are touched by the pool only
// while writing its header at allocation (the block is then reserved for that caller by
// its `in_use` flag, set under the mutex), and all other state is behind the mutex.
unsafe impl Send for Pool {}
// SAFETY: as for `Send`: every `&self` method synchronises through the mutex.
unsafe impl Sync for Pool {}

impl Pool {
    /// Makes a pool for `plan`, obtaining its arena from the OS.
    pub fn new(plan: &Plan, options: PoolOptions) -> Result<Pool, PoolError> {
        plan.validate().map_err(PoolError::InvalidPlan)?;
        let (slots, end) = plan.layout().ok_or(PoolError::Overflow)?;
        let end = usize::try_from(end).map_err(|_| PoolError::Overflow)?;
        let mut blocks = Vec::with_capacity(plan.blocks.len());
        for (block, &slot) in plan.blocks.iter().zip(&slots) {
            let size = usize::try_from(block.class_bytes).map_err(|_| PoolError::Overflow)?;
            let slot = usize::try_from(slot).map_err(|_| PoolError::Overflow)?;
            // layout() checked that slot + 64 + size (rounded) <= end.
            blocks.push(BlockInfo {
                offset: slot + BLOCK_ALIGN,
                size,
                shares: Vec::new(),
            });
        }
        // Blocks whose slots share bytes (packed plans): sweep by offset.
        let mut by_offset: Vec<usize> = (0..blocks.len()).collect();
        by_offset.sort_by_key(|&b| blocks[b].offset);
        for (i, &a) in by_offset.iter().enumerate() {
            let a_end = blocks[a].offset + blocks[a].size;
            for &b in &by_offset[i + 1..] {
                if blocks[b].offset - BLOCK_ALIGN >= a_end {
                    break;
                }
                blocks[a].shares.push(b);
                blocks[b].shares.push(a);
            }
        }
        let (arena, arena_layout) = if end == 0 {
            (NonNull::dangling(), None)
        } else {
            let layout =
                Layout::from_size_align(end, ARENA_ALIGN).map_err(|_| PoolError::Overflow)?;
            // SAFETY: the layout has a non-zero size.
            let ptr = unsafe { alloc::alloc(layout) };
            let arena = NonNull::new(ptr).ok_or(PoolError::OutOfMemory(end))?;
            if options.prefault {
                for offset in (0..end).step_by(PAGE) {
                    // SAFETY: offset < end, inside the arena just allocated.
                    unsafe { arena.as_ptr().add(offset).write_volatile(0) };
                }
            }
            (arena, Some(layout))
        };
        let mut owned: Vec<(u64, usize, usize)> = Vec::new();
        for (index, block) in plan.blocks.iter().enumerate() {
            match owned.last_mut() {
                Some(last) if last.0 == block.class_bytes => last.2 = index + 1,
                _ => owned.push((block.class_bytes, index, index + 1)),
            }
        }
        owned.sort_by_key(|o| o.0);
        let mut schedules: Vec<(u64, Vec<u32>)> = plan
            .schedules
            .iter()
            .filter(|s| !s.blocks.is_empty())
            .map(|s| (s.class_bytes, s.blocks.clone()))
            .collect();
        schedules.sort_by_key(|s| s.0);
        Ok(Pool {
            arena,
            arena_layout,
            class_interval: plan.class_interval,
            min_size: plan.min_size,
            state: Mutex::new(State {
                serving: true,
                in_use: vec![false; blocks.len()],
                cursors: vec![0; schedules.len()],
                stats: PoolStats::default(),
            }),
            blocks,
            schedules,
            owned,
        })
    }

    /// Bytes obtained from the OS for the arena.
    pub fn arena_bytes(&self) -> usize {
        self.arena_layout.map_or(0, |l| l.size())
    }

    /// The counters so far.
    pub fn stats(&self) -> PoolStats {
        self.lock().stats
    }

    /// Puts every class's cursor back to the start of its schedule: call it where an
    /// iteration begins, when known.
    pub fn begin_iteration(&self) {
        self.lock().cursors.iter_mut().for_each(|c| *c = 0);
    }

    /// Turns serving from the plan and the class blocks on (the default) or off. While
    /// off, every request goes to the OS fallback: for the iterations before the plan's
    /// (warm-up, recording), whose long-lived allocations would otherwise hold blocks the
    /// plan gives to later requests. Allocations made while off are freed as usual.
    pub fn set_serving(&self, on: bool) {
        self.lock().serving = on;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the state inconsistent (every
        // update is a single assignment), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn block_ptr(&self, index: usize) -> NonNull<u8> {
        // SAFETY: block offsets lie inside the arena (computed in `new`), so the pointer
        // is in bounds and non-null.
        unsafe { NonNull::new_unchecked(self.arena.as_ptr().add(self.blocks[index].offset)) }
    }

    fn usable(&self, state: &State, index: usize, size: usize, align: usize) -> bool {
        let block = &self.blocks[index];
        !state.in_use[index]
            && block.shares.iter().all(|&other| !state.in_use[other])
            && block.size >= size
            && (self.block_ptr(index).as_ptr() as usize).is_multiple_of(align)
    }

    /// Allocates `size` bytes (0 is treated as 1) aligned to `align` (a power of two).
    /// Returns `None` when `align` is not a power of two or memory is exhausted. The
    /// memory is uninitialised; release it with [`Pool::free`].
    pub fn alloc(&self, size: usize, align: usize) -> Option<NonNull<u8>> {
        if !align.is_power_of_two() {
            return None;
        }
        let size = size.max(1);
        let class = class_of(size as u64, self.class_interval);
        let large = size as u64 >= LARGE;
        let mut state = self.lock();
        state.stats.requests += 1;
        if large {
            state.stats.large_requests += 1;
        }
        let planned = state.serving && size as u64 >= self.min_size;
        if let Some(class) = class.filter(|_| planned) {
            if let Ok(s) = self.schedules.binary_search_by_key(&class, |s| s.0) {
                let schedule = &self.schedules[s].1;
                let cursor = state.cursors[s];
                for k in 0..LOOKAHEAD.min(schedule.len()) {
                    let j = (cursor + k) % schedule.len();
                    let b = schedule[j] as usize;
                    if self.usable(&state, b, size, align) {
                        state.in_use[b] = true;
                        state.cursors[s] = (j + 1) % schedule.len();
                        state.stats.plan_hits += 1;
                        if large {
                            state.stats.large_plan_hits += 1;
                        }
                        drop(state);
                        return Some(self.hand_out_block(b, SOURCE_PLAN));
                    }
                }
            }
            if let Ok(o) = self.owned.binary_search_by_key(&class, |o| o.0) {
                let (_, first, end) = self.owned[o];
                if let Some(b) = (first..end).find(|&b| self.usable(&state, b, size, align)) {
                    state.in_use[b] = true;
                    state.stats.class_fallbacks += 1;
                    drop(state);
                    return Some(self.hand_out_block(b, SOURCE_CLASS));
                }
            }
        }
        state.stats.os_fallbacks += 1;
        drop(state);
        Self::os_alloc(size, align)
    }

    fn hand_out_block(&self, index: usize, source: u64) -> NonNull<u8> {
        let ptr = self.block_ptr(index);
        let header = Header {
            magic: MAGIC,
            source,
            a: index as u64,
            b: 0,
        };
        // SAFETY: every block is preceded by a BLOCK_ALIGN-byte slot inside the arena, so
        // the HEADER_BYTES before `ptr` are in bounds, 8-aligned (ptr is 64-aligned), and
        // reserved for this block, which `in_use` now gives to this caller alone.
        unsafe {
            ptr.as_ptr()
                .sub(HEADER_BYTES)
                .cast::<Header>()
                .write(header)
        };
        ptr
    }

    fn os_alloc(size: usize, align: usize) -> Option<NonNull<u8>> {
        let pad = align.max(BLOCK_ALIGN);
        let total = pad.checked_add(size)?;
        let layout = Layout::from_size_align(total, pad).ok()?;
        // SAFETY: the layout's size is at least `pad` > 0.
        let base = NonNull::new(unsafe { alloc::alloc(layout) })?;
        // SAFETY: pad < total, so base + pad is inside the allocation, and the
        // HEADER_BYTES before it (pad >= 64 > HEADER_BYTES) are too; base + pad is
        // aligned to pad >= 8, and so is ptr - HEADER_BYTES (HEADER_BYTES is a multiple of 8).
        unsafe {
            let ptr = base.as_ptr().add(pad);
            ptr.sub(HEADER_BYTES).cast::<Header>().write(Header {
                magic: MAGIC,
                source: SOURCE_OS,
                a: total as u64,
                b: pad as u64,
            });
            Some(NonNull::new_unchecked(ptr))
        }
    }

    /// Where the live allocation at `ptr` came from.
    ///
    /// # Safety
    /// `ptr` must have been returned by [`Pool::alloc`] of this pool and not freed since.
    pub unsafe fn source(&self, ptr: NonNull<u8>) -> Source {
        // SAFETY: by the caller's contract a header written by `alloc` precedes `ptr`.
        let header = unsafe { ptr.as_ptr().sub(HEADER_BYTES).cast::<Header>().read() };
        match header.source {
            SOURCE_PLAN => Source::Plan,
            SOURCE_CLASS => Source::Class,
            _ => Source::Os,
        }
    }

    /// Releases the allocation at `ptr`, back to its block or to the OS as its header says.
    ///
    /// # Safety
    /// `ptr` must have been returned by [`Pool::alloc`] of this pool and not freed since.
    ///
    /// # Panics
    /// When the header is not one this pool wrote for a live allocation (a contract
    /// violation detected).
    pub unsafe fn free(&self, ptr: NonNull<u8>) {
        // SAFETY: by the caller's contract a header written by `alloc` precedes `ptr`.
        let header = unsafe { ptr.as_ptr().sub(HEADER_BYTES).cast::<Header>().read() };
        assert_eq!(
            header.magic, MAGIC,
            "free of a pointer this pool did not allocate"
        );
        match header.source {
            SOURCE_PLAN | SOURCE_CLASS => {
                let index = usize::try_from(header.a).unwrap_or(usize::MAX);
                assert!(
                    index < self.blocks.len() && self.block_ptr(index) == ptr,
                    "free of a pointer whose header names no block of this pool"
                );
                let mut state = self.lock();
                assert!(state.in_use[index], "double free of block {index}");
                state.in_use[index] = false;
            }
            SOURCE_OS => {
                // The header was written by `os_alloc` from a valid layout.
                let total = header.a as usize;
                let pad = header.b as usize;
                // SAFETY: `os_alloc` allocated `total` bytes aligned to `pad` at ptr - pad,
                // and recorded exactly those in the header.
                unsafe {
                    let layout = Layout::from_size_align_unchecked(total, pad);
                    alloc::dealloc(ptr.as_ptr().sub(pad), layout);
                }
            }
            other => panic!("free of a pointer with a corrupt header (source {other})"),
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        if let Some(layout) = self.arena_layout {
            // SAFETY: the arena was allocated in `new` with this layout and is freed once.
            unsafe { alloc::dealloc(self.arena.as_ptr(), layout) };
        }
    }
}
