//! The preloadable pool's state machine ([`memplan_pool::process::Pool`]) on random
//! programs, single- and multi-threaded, against a model of the system allocator: every
//! block handed out is aligned, inside its arena or the system's, and overlaps no other
//! live block; every block comes back; periodic programs end up served from the arena.
//! Also run under Miri or valgrind by `.ci/run`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use memplan_pool::online::Method;
use memplan_pool::process::{Config, Pool, System};
use memplan_pool::Order;
use proptest::prelude::*;

/// A system allocator handing out disjoint, 4096-aligned addresses, tracking live blocks;
/// it checks that pages given back hold none of the program's live blocks.
#[derive(Default)]
struct Model {
    state: Mutex<(usize, BTreeMap<usize, usize>)>,
    /// The program's live blocks (shared with the test).
    live: Arc<Live>,
    /// Bytes given back with `release`.
    released: Mutex<usize>,
}

impl Model {
    fn new(live: &Arc<Live>) -> Model {
        Model {
            live: Arc::clone(live),
            ..Model::default()
        }
    }
}

impl System for Model {
    fn alloc(&self, size: usize, _align: usize) -> usize {
        let mut s = self.state.lock().unwrap();
        s.0 = s.0.max(1 << 32);
        let addr = s.0;
        s.0 += size.next_multiple_of(4096) + 4096;
        s.1.insert(addr, size);
        addr
    }
    fn free(&self, addr: usize) {
        let mut s = self.state.lock().unwrap();
        assert!(
            s.1.remove(&addr).is_some(),
            "system block freed twice or never made"
        );
    }
    fn map(&self, len: usize) -> usize {
        self.alloc(len, 4096)
    }
    fn unmap(&self, addr: usize, _len: usize) {
        self.free(addr);
    }
    fn release(&self, addr: usize, len: usize) {
        assert_eq!(addr % 4096, 0, "released range not page-aligned");
        assert_eq!(len % 4096, 0, "released length not whole pages");
        let live = self.live.lock().unwrap();
        if let Some((&a, &s)) = live.range(..addr + len).next_back() {
            assert!(
                a + s <= addr,
                "pages {addr:#x}+{len} released under live block {a:#x}+{s}"
            );
        }
        *self.released.lock().unwrap() += len;
    }
}

fn config(threshold: usize) -> Config {
    Config {
        threshold,
        train_inline: true,
        min_period: 2,
        capacity: 4096,
        ..Config::default()
    }
}

/// The method's size classes (interval 256, allocation order) instead of offsets.
fn size_classes(threshold: usize) -> Config {
    Config {
        method: Method::SizeClasses {
            interval: 256,
            order: Order::Allocation,
            pack: false,
        },
        ..config(threshold)
    }
}

/// Live blocks of every thread: address → size.
type Live = Mutex<BTreeMap<usize, usize>>;

fn take(live: &Live, addr: usize, size: usize) {
    let mut live = live.lock().unwrap();
    if let Some((&a, &s)) = live.range(..addr + size.max(1)).next_back() {
        assert!(
            a + s <= addr,
            "block {addr:#x}+{size} overlaps live {a:#x}+{s}"
        );
    }
    live.insert(addr, size);
}

/// Runs `iterations` of a program with fixed block sizes; `noise` adds an extra request
/// (not in the period) at some iterations. Blocks are freed in the order `order` gives.
fn run(
    pool: &Mutex<Pool<Model>>,
    live: &Live,
    sizes: &[usize],
    order: &[usize],
    iterations: usize,
    noise: &[usize],
) {
    for it in 0..iterations {
        let mut mine = Vec::new();
        for (i, &size) in sizes.iter().enumerate() {
            if noise.contains(&(it * sizes.len() + i)) {
                let a = pool.lock().unwrap().alloc(size + 7, 16);
                take(live, a, size + 7);
                mine.push((a, size + 7));
            }
            let a = pool.lock().unwrap().alloc(size, 16);
            assert_ne!(a, 0);
            assert_eq!(a % 16, 0, "misaligned");
            take(live, a, size);
            mine.push((a, size));
        }
        let n = mine.len();
        for k in 0..n {
            let (a, _) = mine[order[k % order.len()] % mine.len()];
            if live.lock().unwrap().remove(&a).is_none() {
                continue;
            }
            let mut p = pool.lock().unwrap();
            if !p.free(a) {
                p.system.free(a);
            }
        }
        for (a, _) in mine {
            if live.lock().unwrap().remove(&a).is_some() {
                let mut p = pool.lock().unwrap();
                if !p.free(a) {
                    p.system.free(a);
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: if cfg!(miri) { 4 } else { 64 }, ..ProptestConfig::default() })]

    #[test]
    fn random_periodic_programs_never_overlap(
        sizes in prop::collection::vec(1usize..5000, 1..12),
        order in prop::collection::vec(0usize..64, 1..16),
        noise in prop::collection::vec(0usize..200, 0..4),
        iterations in 3usize..12,
        classes in any::<bool>(),
        changed in prop::collection::vec(1usize..5000, 0..6),
    ) {
        let live = Arc::new(Live::default());
        let config = if classes { size_classes(1) } else { config(1) };
        let pool = Mutex::new(Pool::new(Model::new(&live), config));
        run(&pool, &live, &sizes, &order, iterations, &noise);
        // The program changes (a new batch size): the plan is dropped, its arena
        // retired and released page by page, a new one learned.
        if !changed.is_empty() {
            run(&pool, &live, &changed, &order, iterations, &noise);
        }
        let pool = pool.into_inner().unwrap();
        // Every block came back: only arenas may be left with the system.
        let left = pool.system.state.lock().unwrap().1.len();
        prop_assert!(left <= 1 + pool.stats.plans as usize);
        prop_assert_eq!(pool.stats.requests, pool.stats.hits + pool.stats.system);
    }
}

#[test]
fn a_periodic_program_is_served_from_the_arena() {
    for classes in [false, true] {
        let live = Arc::new(Live::default());
        let config = if classes { size_classes(1) } else { config(1) };
        let pool = Mutex::new(Pool::new(Model::new(&live), config));
        let sizes = [4096, 100_000, 8192, 100_000, 50_000];
        run(&pool, &live, &sizes, &[4, 3, 2, 1, 0], 4, &[]);
        let before = pool.lock().unwrap().stats.hits;
        run(&pool, &live, &sizes, &[4, 3, 2, 1, 0], 10, &[]);
        let pool = pool.into_inner().unwrap();
        assert_eq!(pool.stats.hits - before, 10 * sizes.len() as u64);
        if classes {
            // Blocks laid end to end with a header slot each: above the bound.
            assert!(pool.stats.arena > pool.stats.lower_bound);
        } else {
            assert_eq!(pool.stats.arena, pool.stats.lower_bound);
        }
    }
}

#[test]
fn a_changed_program_gives_the_old_arenas_pages_back() {
    let live = Arc::new(Live::default());
    let pool = Mutex::new(Pool::new(Model::new(&live), config(1)));
    // Two large blocks, the first still live across the iteration boundary.
    let sizes = [1 << 20, 2 << 20, 1 << 20];
    run(&pool, &live, &sizes, &[2, 1, 0], 6, &[]);
    assert!(pool.lock().unwrap().stats.hits > 0);
    // A live block keeps the arena from being unmapped when the program changes.
    let kept = pool.lock().unwrap().alloc(2 << 20, 16);
    take(&live, kept, 2 << 20);
    run(
        &pool,
        &live,
        &[3 << 20, 5 << 20, 7 << 20],
        &[2, 1, 0],
        6,
        &[],
    );
    let p = pool.lock().unwrap();
    assert!(p.stats.relearned >= 1);
    assert!(
        *p.system.released.lock().unwrap() >= 1 << 20,
        "the retired arena's free pages were not given back"
    );
}

#[test]
fn a_miss_is_served_from_a_free_slot_of_its_size() {
    let live = Arc::new(Live::default());
    let pool = Mutex::new(Pool::new(Model::new(&live), config(1)));
    // Two blocks of one size live together each iteration: two slots, two offsets.
    run(&pool, &live, &[100_000, 100_000], &[0, 1], 8, &[]);
    let mut p = pool.lock().unwrap();
    assert_eq!(p.stats.fallbacks, 0);
    let a = p.alloc(100_000, 16);
    let b = p.alloc(100_000, 16);
    assert!(p.owns(a) && p.owns(b));
    assert!(p.free(b));
    // The next request is slot 0's, whose range `a` still holds: a miss, served from
    // slot 1's free range rather than by the system.
    let c = p.alloc(100_000, 16);
    assert!(
        p.owns(c),
        "a miss with a free slot of its size went to the system"
    );
    assert_eq!(c, b);
    assert_eq!(p.stats.fallbacks, 1);
    assert!(p.free(a) && p.free(c));
}

#[test]
fn threads_sharing_the_pool_never_get_overlapping_blocks() {
    let live = Arc::new(Live::default());
    let pool = Arc::new(Mutex::new(Pool::new(Model::new(&live), config(1))));
    let threads = if cfg!(miri) { 2 } else { 4 };
    let iterations = if cfg!(miri) { 4 } else { 40 };
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let pool = Arc::clone(&pool);
            let live = Arc::clone(&live);
            std::thread::spawn(move || {
                let sizes = [1000 + t * 10, 70_000, 3000, 70_000 + t];
                run(&pool, &live, &sizes, &[3, 2, 1, 0], iterations, &[]);
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert!(live.lock().unwrap().is_empty());
}
