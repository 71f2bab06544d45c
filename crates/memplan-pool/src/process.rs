//! The pool as a process's allocator: the state machine behind `memplan-preload`'s
//! `malloc`/`free`, generic over the system allocator it falls back to ([`System`]) so
//! that it is tested with a model of one (under Miri too).
//!
//! ```text
//!   Learning ──period found──► Training (a background thread plans) ──plan ready──► Serving
//!      ▲                                                                              │
//!      └───────────── the program stopped following the plan (misses) ───────────────┘
//! ```
//!
//! - Requests below the threshold never reach this state machine (the shim sends them
//!   straight to the system).
//! - Learning and on every miss, the system serves the request: memplan's pool is never
//!   worse than the system allocator.
//! - Pointers are told apart by address: a pointer inside one of the pool's arenas is the
//!   pool's, any other is the system's. No header is ever read.
//! - An arena replaced by a new plan is released when its last block is freed.
//! - Recording uses buffers allocated at construction: no allocation on the request path
//!   (training runs on its own thread and allocates there).
//! - The pool never waits for its training thread: the thread leaves its plan in a slot
//!   the pool polls without blocking, and is detached, never joined. (A join under the
//!   shim's lock deadlocked: the exiting thread's last `free` needs that lock.)
//! - A program the pool cannot plan is handed to the system after a bounded number of
//!   attempts ([`Config::max_attempts`]): plans lost before they served two iterations,
//!   trainings that found no plan, and learning windows of
//!   [`Config::interleaved_window`] requests interleaved from several threads without an
//!   iteration. Then every request goes to the system ([`Pool::aside`]), and the shim
//!   stops calling the pool for new requests. Requests from several threads interleaving
//!   also end page-exact learning ([`System::page_exact`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::online::{self, Method, Period, Recorder, Schedule, Server, ALIGNMENT};

/// Page size assumed when a retired arena's free pages are given back.
pub const PAGE: usize = 4096;

/// What the state machine needs from the system.
pub trait System {
    /// `size` bytes aligned to `align` (a power of two), or 0 when out of memory.
    fn alloc(&self, size: usize, align: usize) -> usize;
    /// Frees a block `alloc` returned.
    fn free(&self, addr: usize);
    /// Fresh zeroed memory for an arena, or 0.
    fn map(&self, len: usize) -> usize;
    /// Returns an arena's memory.
    fn unmap(&self, addr: usize, len: usize);
    /// Gives memory the system allocator holds but no longer uses back to the kernel
    /// (glibc's `malloc_trim`): called once the first iteration has been served from a
    /// new arena, when the blocks of the learning iterations are free.
    fn trim(&self) {}
    /// Gives the pages of `addr..addr + len` (page-aligned, inside an arena, holding no
    /// live block) back to the kernel; the range stays mapped and reads as zeros after.
    fn release(&self, _addr: usize, _len: usize) {}
    /// Whether the large requests the system serves are mapped on their own, page-exact
    /// (`on`), or left to the system's own policy (`!on`; `largest` is the largest
    /// request seen, for a system that sets a threshold from it as glibc's dynamic
    /// threshold would have).
    fn page_exact(&self, _on: bool, _largest: usize) {}
}

/// Thread switches (consecutive large requests from different threads) in a learning
/// window from which its requests count as interleaved.
pub const INTERLEAVED_SWITCHES: u64 = 16;

/// Settings (from the environment in the preloaded library).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Requests of at least this many bytes are planned; smaller go to the system.
    pub threshold: usize,
    /// How an iteration is planned: an offset plan by a memplan planner (default
    /// `best-of`) or the method's size classes.
    pub method: Method,
    /// Events recorded before recording starts over.
    pub capacity: usize,
    /// Shortest period, in events, that counts as an iteration.
    pub min_period: usize,
    /// Train on this thread instead of a background one (tests).
    pub train_inline: bool,
    /// The system serves learning requests page-exact at start ([`System::page_exact`]);
    /// the pool turns it off when requests from several threads interleave.
    pub page_exact: bool,
    /// Failed attempts after which the pool steps aside for good (see the module doc).
    pub max_attempts: u32,
    /// Large requests of a learning window interleaved from several threads without an
    /// iteration found that count as one failed attempt.
    pub interleaved_window: u64,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            threshold: 64 << 10,
            method: Method::default(),
            capacity: 1 << 20,
            min_period: 32,
            train_inline: false,
            page_exact: false,
            max_attempts: 4,
            interleaved_window: 1024,
        }
    }
}

/// Counters for the summary at exit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Large requests seen.
    pub requests: u64,
    /// Served from an arena.
    pub hits: u64,
    /// Plans installed.
    pub plans: u64,
    /// Times the program stopped following the plan and the pool learned again.
    pub relearned: u64,
    /// Bytes of the current arena.
    pub arena: u64,
    /// Its lower bound.
    pub lower_bound: u64,
    /// Large requests the system served (learning, misses, unplanned).
    pub system: u64,
    /// Of the hits, misses of the plan served from another free slot of the arena.
    pub fallbacks: u64,
    /// Failed attempts to plan (see the module doc).
    pub failed: u64,
}

enum Phase {
    Learning,
    Training {
        job: Job,
        /// Large allocations since the period was found.
        since: u64,
    },
    Serving,
    /// The program cannot be planned: the system serves every request.
    Aside,
}

/// Where the training thread leaves its result (`Some` once it is done).
type Slot = Arc<Mutex<Option<Option<Schedule>>>>;

enum Job {
    /// A training thread, detached at its start: polled through its slot with
    /// `try_lock`, never joined.
    Thread(Slot),
    Done(Option<Schedule>),
}

struct Arena {
    base: usize,
    len: usize,
    server: Server,
}

/// The pool's state for one process.
pub struct Pool<S: System> {
    pub system: S,
    config: Config,
    phase: Phase,
    recorder: Recorder,
    /// Block id of each large block the system holds (learning), by address.
    ids: HashMap<usize, u64>,
    current: Option<Arena>,
    /// Replaced arenas whose blocks are still live.
    retired: Vec<Arena>,
    pub stats: Stats,
    /// One line per change of phase, for `MEMPLAN_POOL_LOG`.
    pub log: Option<fn(&str)>,
    /// The system was trimmed after the current arena's first served iteration.
    trimmed: bool,
    /// The system serves learning requests page-exact now.
    exact: bool,
    /// The thread of the latest large request, and thread switches in this window.
    last_thread: usize,
    switches: u64,
    /// Large requests learned in this window.
    window: u64,
    /// Failed attempts so far.
    attempts: u32,
    /// The largest request seen.
    largest: usize,
}

/// Releases the whole pages inside `base + start .. base + end` (`base` page-aligned).
fn release_pages<S: System>(system: &S, base: usize, start: u64, end: u64) {
    let page = PAGE as u64;
    let (Some(first), last) = (start.checked_next_multiple_of(page), end / page * page) else {
        return;
    };
    if first < last {
        system.release(base + first as usize, (last - first) as usize);
    }
}

impl<S: System> Pool<S> {
    pub fn new(system: S, config: Config) -> Pool<S> {
        Pool {
            system,
            recorder: Recorder::new(config.capacity, config.min_period),
            ids: HashMap::with_capacity(1 << 16),
            phase: Phase::Learning,
            current: None,
            retired: Vec::with_capacity(16),
            stats: Stats::default(),
            log: None,
            trimmed: false,
            exact: config.page_exact,
            last_thread: 0,
            switches: 0,
            window: 0,
            attempts: 0,
            largest: 0,
            config,
        }
    }

    /// True once the pool has stepped aside: the system serves every new request (the
    /// pool still frees the blocks of its arenas).
    pub fn aside(&self) -> bool {
        matches!(self.phase, Phase::Aside)
    }

    /// In a child after `fork`: the training thread does not exist there (its slot might
    /// never be filled, or be held locked), so its job is abandoned and the child learns
    /// again.
    pub fn after_fork_in_child(&mut self) {
        if let Phase::Training {
            job: Job::Thread(_),
            ..
        } = &self.phase
        {
            self.phase = Phase::Learning;
            self.start_window();
        }
    }

    fn start_window(&mut self) {
        self.window = 0;
        self.switches = 0;
    }

    /// One failed attempt; the pool steps aside after `max_attempts`.
    fn failed(&mut self) {
        self.attempts += 1;
        self.stats.failed += 1;
        self.start_window();
        if self.attempts >= self.config.max_attempts {
            self.step_aside();
        }
    }

    fn step_aside(&mut self) {
        self.say(&format!(
            "memplan pool: {} attempts to plan failed; the system serves every request from now on",
            self.attempts
        ));
        if let Some(old) = self.current.take() {
            self.retire(old);
        }
        if self.exact {
            self.exact = false;
            self.system.page_exact(false, self.largest);
        }
        self.recorder.clear();
        self.ids.clear();
        // A running training thread finishes on its own; its result is never read.
        self.phase = Phase::Aside;
    }

    /// Counts thread switches; requests from several threads interleaving end page-exact
    /// learning.
    fn note_thread(&mut self, thread: usize) {
        if thread == self.last_thread {
            return;
        }
        self.last_thread = thread;
        self.switches += 1;
        if self.switches >= INTERLEAVED_SWITCHES && self.exact {
            self.exact = false;
            self.system.page_exact(false, self.largest);
            self.say("memplan pool: requests from several threads interleave; learning is no longer page-exact");
        }
    }

    pub fn threshold(&self) -> usize {
        self.config.threshold
    }

    fn say(&self, text: &str) {
        if let Some(log) = self.log {
            log(text);
        }
    }

    /// A large request (`size >= threshold`): an address, 0 when out of memory.
    pub fn alloc(&mut self, size: usize, align: usize) -> usize {
        self.alloc_from(size, align, 0)
    }

    /// [`Pool::alloc`] from the thread `thread` (any number that tells the process's
    /// threads apart).
    pub fn alloc_from(&mut self, size: usize, align: usize, thread: usize) -> usize {
        self.stats.requests += 1;
        self.largest = self.largest.max(size);
        if self.aside() {
            self.stats.system += 1;
            return self.system.alloc(size, align);
        }
        self.note_thread(thread);
        self.install_if_trained();
        if align <= ALIGNMENT as usize {
            if let Some(arena) = &mut self.current {
                let fallbacks = arena.server.stats.fallbacks;
                if let Some(offset) = arena.server.alloc(size as u64) {
                    self.stats.hits += 1;
                    self.stats.fallbacks += arena.server.stats.fallbacks - fallbacks;
                    let addr = arena.base + offset as usize;
                    if !self.trimmed && arena.server.periods >= 1 {
                        self.trimmed = true;
                        self.system.trim();
                    }
                    return addr;
                }
                if arena.server.lost() {
                    self.relearn();
                }
            }
        }
        self.stats.system += 1;
        let addr = self.system.alloc(size, align);
        if addr == 0 {
            return 0;
        }
        match &mut self.phase {
            Phase::Learning => {
                let (id, period) = self.recorder.alloc(size as u64);
                if self.ids.len() < self.ids.capacity() {
                    self.ids.insert(addr, id);
                }
                self.window += 1;
                if let Some(period) = period {
                    self.start_training(period);
                } else if self.switches >= INTERLEAVED_SWITCHES
                    && self.window >= self.config.interleaved_window
                {
                    // Interleaved requests, no iteration: recording goes on, the window
                    // counts as a failed attempt.
                    self.failed();
                }
            }
            Phase::Training { since, .. } => *since += 1,
            Phase::Serving | Phase::Aside => {}
        }
        addr
    }

    /// True when `addr` lies in one of the pool's arenas.
    pub fn owns(&self, addr: usize) -> bool {
        self.arena_of(addr).is_some()
    }

    fn arena_of(&self, addr: usize) -> Option<usize> {
        let inside = |a: &Arena| addr >= a.base && addr < a.base + a.len.max(1);
        if self.current.as_ref().is_some_and(inside) {
            return Some(usize::MAX);
        }
        self.retired.iter().position(inside)
    }

    /// Frees a large block or an arena block. Returns false when `addr` is neither the
    /// pool's nor a large block it recorded (the caller gives it to the system).
    pub fn free(&mut self, addr: usize) -> bool {
        match self.arena_of(addr) {
            Some(usize::MAX) => {
                if let Some(arena) = &mut self.current {
                    arena.server.free((addr - arena.base) as u64);
                }
                true
            }
            Some(i) => {
                let arena = &mut self.retired[i];
                let offset = (addr - arena.base) as u64;
                let size = arena.server.free(offset);
                if arena.server.live_blocks() == 0 {
                    let arena = self.retired.swap_remove(i);
                    self.system.unmap(arena.base, arena.len);
                } else if let Some(size) = size {
                    // Nothing is served from a retired arena again: a freed block's
                    // whole pages go back to the kernel at once.
                    let end = offset.saturating_add(size);
                    release_pages(&self.system, arena.base, offset, end);
                }
                true
            }
            None => {
                if let Some(id) = self.ids.remove(&addr) {
                    if matches!(self.phase, Phase::Learning) {
                        self.recorder.free(id);
                    }
                }
                false
            }
        }
    }

    /// The requested size of an arena block, `None` when `addr` is not the pool's.
    pub fn usable_size(&self, addr: usize) -> Option<usize> {
        let arena = match self.arena_of(addr)? {
            usize::MAX => self.current.as_ref()?,
            i => &self.retired[i],
        };
        arena
            .server
            .size_at((addr - arena.base) as u64)
            .map(|s| s as usize)
    }

    /// An explicit iteration end (`memplan.pool.step()`).
    pub fn mark(&mut self) {
        if matches!(self.phase, Phase::Learning) {
            if let Some(period) = self.recorder.mark() {
                self.start_training(period);
            }
        }
    }

    fn start_training(&mut self, period: Period) {
        self.say(&format!(
            "memplan pool: iteration found ({} requests); training a plan",
            period.events.len()
        ));
        let method = self.config.method.clone();
        let job = if self.config.train_inline {
            Job::Done(online::train_with(&period, &method))
        } else {
            let slot: Slot = Arc::new(Mutex::new(None));
            let theirs = Arc::clone(&slot);
            let spawned = std::thread::Builder::new()
                .name("memplan-pool-train".into())
                .spawn(move || {
                    let schedule = online::train_with(&period, &method);
                    if let Ok(mut slot) = theirs.lock() {
                        *slot = Some(schedule);
                    }
                });
            match spawned {
                // Dropping the handle detaches the thread.
                Ok(_detached) => Job::Thread(slot),
                Err(_) => Job::Done(None),
            }
        };
        self.recorder.clear();
        self.ids.clear();
        self.phase = Phase::Training { job, since: 0 };
    }

    /// Installs a finished plan: maps its arena and starts serving.
    fn install_if_trained(&mut self) {
        let Phase::Training { job, since } = &mut self.phase else {
            return;
        };
        let since = *since;
        let schedule = match job {
            // Never a wait: a slot the thread holds now is looked at again on the next
            // request; the thread was detached at its start and is never joined.
            Job::Thread(slot) => match slot.try_lock().ok().and_then(|mut s| s.take()) {
                Some(schedule) => schedule,
                None => return,
            },
            Job::Done(schedule) => schedule.take(),
        };
        self.phase = Phase::Learning;
        self.start_window();
        let Some(schedule) = schedule else {
            self.say("memplan pool: no plan for this iteration; learning again");
            self.failed();
            return;
        };
        let len = schedule.arena as usize;
        let base = if len == 0 { 0 } else { self.system.map(len) };
        if len == 0 || base == 0 {
            return;
        }
        self.stats.arena = schedule.arena;
        self.stats.lower_bound = schedule.lower_bound;
        self.stats.plans += 1;
        self.say(&format!(
            "memplan pool: serving {} requests an iteration from an arena of {} bytes (bound {})",
            schedule.slots.len(),
            schedule.arena,
            schedule.lower_bound
        ));
        let server = Server::starting_at(schedule, since);
        // What the system holds of the learning iterations' freed blocks goes back to the
        // kernel now, before the arena's pages are touched, and once more after the
        // first served iteration (blocks still live now are freed during it).
        self.system.trim();
        self.trimmed = false;
        if let Some(old) = self.current.replace(Arena { base, len, server }) {
            self.retire(old);
        }
        self.phase = Phase::Serving;
    }

    /// Keeps a replaced arena until its last block is freed, giving back every page no
    /// live block touches now (and each block's pages when it is freed): a program that
    /// changed (a new batch size) does not hold the old arena's memory and the new
    /// iterations' at once.
    fn retire(&mut self, arena: Arena) {
        if arena.server.live_blocks() == 0 {
            self.system.unmap(arena.base, arena.len);
        } else {
            for (start, end) in arena.server.free_ranges(arena.len as u64) {
                release_pages(&self.system, arena.base, start, end);
            }
            self.retired.push(arena);
        }
    }

    /// The program left the plan: keep the arena for its live blocks, learn again.
    fn relearn(&mut self) {
        self.stats.relearned += 1;
        self.say("memplan pool: the program no longer follows the plan; learning again");
        // A plan that served two iterations was right: the program changed. One lost
        // sooner was a failed attempt.
        let served = self.current.as_ref().map_or(0, |a| a.server.periods);
        if let Some(old) = self.current.take() {
            self.retire(old);
        }
        self.recorder.clear();
        self.ids.clear();
        self.phase = Phase::Learning;
        self.start_window();
        if served >= 2 {
            self.attempts = 0;
        } else {
            self.failed();
        }
    }

    /// The counters, with the served arena's hit/miss detail.
    pub fn summary(&self) -> String {
        let s = self.stats;
        let rate = if s.requests == 0 {
            0.0
        } else {
            100.0 * s.hits as f64 / s.requests as f64
        };
        format!(
            "memplan pool: {} large requests (>= {} B), {} served from the arena ({rate:.1}%, {} of them misses of the plan), {} by the system; {} plans, {} relearned; arena {} B (bound {} B){}",
            s.requests, self.config.threshold, s.hits, s.fallbacks, s.system, s.plans, s.relearned, s.arena, s.lower_bound,
            if self.aside() { format!("; stepped aside after {} failed attempts", s.failed) } else { String::new() }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// A system allocator that hands out disjoint addresses and remembers what is live.
    #[derive(Default)]
    struct Model {
        next: RefCell<usize>,
        live: RefCell<HashMap<usize, usize>>,
    }

    impl System for Model {
        fn alloc(&self, size: usize, _align: usize) -> usize {
            let mut next = self.next.borrow_mut();
            *next = (*next).max(1 << 40);
            let addr = *next;
            *next += size.next_multiple_of(4096);
            self.live.borrow_mut().insert(addr, size);
            addr
        }
        fn free(&self, addr: usize) {
            assert!(
                self.live.borrow_mut().remove(&addr).is_some(),
                "freed twice"
            );
        }
        fn map(&self, len: usize) -> usize {
            self.alloc(len, 4096)
        }
        fn unmap(&self, addr: usize, _len: usize) {
            self.free(addr);
        }
    }

    fn pool() -> Pool<Model> {
        Pool::new(
            Model::default(),
            Config {
                threshold: 1,
                train_inline: true,
                min_period: 2,
                ..Config::default()
            },
        )
    }

    /// One iteration of a training-like program; returns the addresses it freed.
    fn iterate(p: &mut Pool<Model>, sizes: &[usize], live: &mut [(usize, usize)]) {
        let mut mine = Vec::new();
        for &s in sizes {
            let a = p.alloc(s, 16);
            assert_ne!(a, 0);
            for &(b, bs) in live.iter().chain(mine.iter()) {
                assert!(a + s <= b || b + bs <= a, "overlap");
            }
            mine.push((a, s));
        }
        for (a, _) in mine.into_iter().rev() {
            if !p.free(a) {
                p.system.free(a);
            }
        }
    }

    #[test]
    fn learns_then_serves_every_request_from_the_arena() {
        let mut p = pool();
        let sizes = [1 << 20, 3 << 20, 1 << 20, 2 << 20];
        let mut live = Vec::new();
        for _ in 0..3 {
            iterate(&mut p, &sizes, &mut live);
        }
        let before = p.stats.hits;
        for _ in 0..5 {
            iterate(&mut p, &sizes, &mut live);
        }
        assert_eq!(p.stats.hits - before, 5 * sizes.len() as u64);
        assert_eq!(p.stats.plans, 1);
        assert_eq!(p.stats.arena, p.stats.lower_bound);
    }

    #[test]
    fn interleaved_threads_it_cannot_plan_make_it_step_aside() {
        let mut p = Pool::new(
            Model::default(),
            Config {
                threshold: 1,
                train_inline: true,
                page_exact: true,
                interleaved_window: 64,
                ..Config::default()
            },
        );
        let mut live = Vec::new();
        let mut x: u64 = 7;
        for i in 0..4 * 64 + 1 {
            // Random sizes from two threads taking turns: no iteration to find.
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let size = 4096 + (x >> 40) as usize % (1 << 20);
            let a = p.alloc_from(size, 16, i % 2 + 1);
            assert_ne!(a, 0);
            live.push(a);
            if live.len() > 8 {
                let a = live.remove((x >> 20) as usize % live.len());
                if !p.free(a) {
                    p.system.free(a);
                }
            }
        }
        assert!(p.aside(), "{}", p.summary());
        assert!(!p.exact, "page-exact learning ended");
        assert_eq!(p.stats.failed, 4);
        // Aside: the system serves, the pool records nothing.
        let a = p.alloc_from(1 << 20, 16, 1);
        assert!(!p.owns(a) && !p.free(a));
        p.system.free(a);
    }

    #[test]
    fn one_thread_repeating_itself_never_steps_aside() {
        let mut p = Pool::new(
            Model::default(),
            Config {
                threshold: 1,
                train_inline: true,
                min_period: 2,
                page_exact: true,
                interleaved_window: 4,
                ..Config::default()
            },
        );
        let mut live = Vec::new();
        for _ in 0..50 {
            iterate(&mut p, &[1 << 20, 3 << 20, 1 << 20, 2 << 20], &mut live);
        }
        assert!(
            !p.aside() && p.exact && p.stats.failed == 0,
            "{}",
            p.summary()
        );
        assert!(p.stats.hits > 0);
    }

    #[test]
    fn a_changed_program_is_learned_again_and_old_arenas_freed() {
        let mut p = pool();
        let mut live = Vec::new();
        for _ in 0..6 {
            iterate(&mut p, &[1 << 20, 2 << 20, 1 << 20], &mut live);
        }
        assert!(p.stats.hits > 0);
        for _ in 0..10 {
            iterate(&mut p, &[3 << 20, 5 << 20, 7 << 20, 5 << 20], &mut live);
        }
        assert!(p.stats.relearned >= 1 && p.stats.plans >= 2);
        assert!(p.retired.is_empty(), "an empty replaced arena is released");
        // Only the current arena is left with the system model.
        assert_eq!(p.system.live.borrow().len(), 1);
    }
}
