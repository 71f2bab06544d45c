//! The preloadable pool's state machine ([`memplan_pool::process::Pool`]) on random
//! programs, single- and multi-threaded, against a model of the system allocator: every
//! block handed out is aligned, inside its arena or the system's, and overlaps no other
//! live block; every block comes back; periodic programs end up served from the arena.
//! Also run under Miri or valgrind by `.ci/run`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use memplan_pool::process::{Config, Pool, System};
use proptest::prelude::*;

/// A system allocator handing out disjoint, 4096-aligned addresses, tracking live blocks.
#[derive(Default)]
struct Model {
    state: Mutex<(usize, BTreeMap<usize, usize>)>,
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
    ) {
        let pool = Mutex::new(Pool::new(Model::default(), config(1)));
        let live = Live::default();
        run(&pool, &live, &sizes, &order, iterations, &noise);
        let pool = pool.into_inner().unwrap();
        // Every block came back: only arenas may be left with the system.
        let left = pool.system.state.lock().unwrap().1.len();
        prop_assert!(left <= 1 + pool.stats.plans as usize);
        prop_assert_eq!(pool.stats.requests, pool.stats.hits + pool.stats.system);
    }
}

#[test]
fn a_periodic_program_is_served_from_the_arena() {
    let pool = Mutex::new(Pool::new(Model::default(), config(1)));
    let live = Live::default();
    let sizes = [4096, 100_000, 8192, 100_000, 50_000];
    run(&pool, &live, &sizes, &[4, 3, 2, 1, 0], 4, &[]);
    let before = pool.lock().unwrap().stats.hits;
    run(&pool, &live, &sizes, &[4, 3, 2, 1, 0], 10, &[]);
    let pool = pool.into_inner().unwrap();
    assert_eq!(pool.stats.hits - before, 10 * sizes.len() as u64);
    assert_eq!(pool.stats.arena, pool.stats.lower_bound);
}

#[test]
fn threads_sharing_the_pool_never_get_overlapping_blocks() {
    let pool = Arc::new(Mutex::new(Pool::new(Model::default(), config(1))));
    let live = Arc::new(Live::default());
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
