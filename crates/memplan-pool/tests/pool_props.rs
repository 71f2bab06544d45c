//! Property tests of the runtime pool: random alloc/free programs against random plans.
//! Every allocation must be aligned, writable over its whole size, never overlap another
//! live one, and keep its contents until freed. Small enough to run under Miri.

use std::ptr::NonNull;

use memplan_pool::train::{Block, Schedule};
use memplan_pool::{Order, Plan, Pool, PoolOptions};
use proptest::prelude::*;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: if cfg!(miri) { 6 } else { 256 },
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

#[derive(Clone, Debug)]
enum Step {
    Alloc { size: usize, align_log2: u32 },
    Free(usize),
    BeginIteration,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0usize..700, 0u32..9).prop_map(|(size, align_log2)| Step::Alloc { size, align_log2 }),
        4 => any::<usize>().prop_map(Step::Free),
        1 => Just(Step::BeginIteration),
    ]
}

/// A random but valid plan with class interval `g`: blocks per class, schedules pointing
/// at blocks at least as large as their class.
fn plan() -> impl Strategy<Value = Plan> {
    let g = prop_oneof![Just(1u64), Just(64), Just(100), Just(256)];
    (
        g,
        prop::collection::vec(1u64..6, 0..8),
        prop::collection::vec((1u64..6, any::<u32>()), 0..24),
        prop::option::of(prop::collection::vec(0u64..40, 8)),
    )
        .prop_map(|(g, block_classes, requests, offsets)| {
            let mut classes: Vec<u64> = block_classes
                .iter()
                .map(|c| c * g * if g == 1 { 50 } else { 1 })
                .collect();
            classes.sort_unstable();
            // Packed plans get random slot offsets: blocks share bytes in every way.
            let blocks: Vec<Block> = classes
                .iter()
                .enumerate()
                .map(|(i, &c)| Block {
                    class_bytes: c,
                    tensors: 1,
                    offset: offsets.as_ref().map(|o| o[i] * 64),
                })
                .collect();
            let mut schedules: Vec<Schedule> = Vec::new();
            for (k, pick) in requests {
                let class = k * g * if g == 1 { 50 } else { 1 };
                let fitting: Vec<u32> = (0..blocks.len() as u32)
                    .filter(|&b| blocks[b as usize].class_bytes >= class)
                    .collect();
                if fitting.is_empty() {
                    continue;
                }
                let b = fitting[pick as usize % fitting.len()];
                match schedules.iter_mut().find(|s| s.class_bytes == class) {
                    Some(s) => s.blocks.push(b),
                    None => schedules.push(Schedule {
                        class_bytes: class,
                        blocks: vec![b],
                    }),
                }
            }
            schedules.sort_by_key(|s| s.class_bytes);
            let mut plan = Plan {
                format: "memplan-pool-plan".into(),
                version: 1,
                class_interval: g,
                order: Order::Allocation,
                iteration: 0,
                min_size: 0,
                total_bytes: blocks.iter().map(|b| b.class_bytes).sum(),
                arena_bytes: 0,
                live_peak_bytes: 0,
                blocks,
                schedules,
            };
            plan.arena_bytes = plan.layout().unwrap().1;
            plan
        })
}

struct Live {
    ptr: NonNull<u8>,
    size: usize,
    tag: u8,
}

fn fill(live: &Live) {
    // SAFETY: the pool promises `size` writable bytes at `ptr` while live.
    unsafe { std::ptr::write_bytes(live.ptr.as_ptr(), live.tag, live.size) };
}

fn intact(live: &Live) -> bool {
    // SAFETY: as in `fill`; the bytes were initialised by `fill`.
    let bytes = unsafe { std::slice::from_raw_parts(live.ptr.as_ptr(), live.size) };
    bytes.iter().all(|&b| b == live.tag)
}

fn run(pool: &Pool, steps: &[Step]) -> Result<(), TestCaseError> {
    let mut live: Vec<Live> = Vec::new();
    let mut tag = 0u8;
    for step in steps {
        match *step {
            Step::Alloc { size, align_log2 } => {
                let align = 1usize << align_log2;
                let ptr = pool.alloc(size, align).expect("small allocations succeed");
                prop_assert_eq!(ptr.as_ptr() as usize % align, 0, "misaligned");
                let start = ptr.as_ptr() as usize;
                let end = start + size.max(1);
                for other in &live {
                    let (s, e) = (
                        other.ptr.as_ptr() as usize,
                        other.ptr.as_ptr() as usize + other.size.max(1),
                    );
                    prop_assert!(end <= s || e <= start, "overlaps a live allocation");
                }
                tag = tag.wrapping_add(1);
                let entry = Live { ptr, size, tag };
                fill(&entry);
                live.push(entry);
            }
            Step::Free(pick) => {
                if live.is_empty() {
                    continue;
                }
                let entry = live.swap_remove(pick % live.len());
                prop_assert!(intact(&entry), "contents changed while live");
                // SAFETY: allocated by this pool, freed once.
                unsafe { pool.free(entry.ptr) };
            }
            Step::BeginIteration => pool.begin_iteration(),
        }
        for entry in &live {
            prop_assert!(intact(entry), "contents changed while live");
        }
    }
    for entry in live {
        prop_assert!(intact(&entry));
        // SAFETY: allocated by this pool, freed once.
        unsafe { pool.free(entry.ptr) };
    }
    let stats = pool.stats();
    prop_assert_eq!(
        stats.requests,
        stats.plan_hits + stats.class_fallbacks + stats.os_fallbacks
    );
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn random_programs_are_served_correctly(plan in plan(), steps in prop::collection::vec(step(), 0..60)) {
        let pool = Pool::new(&plan, PoolOptions { prefault: true }).unwrap();
        run(&pool, &steps)?;
        let stats = pool.stats();
        let allocs = steps.iter().filter(|s| matches!(s, Step::Alloc { .. })).count();
        prop_assert_eq!(stats.requests as usize, allocs);
    }

    #[test]
    fn threads_share_a_pool(plan in plan(), programs in prop::collection::vec(prop::collection::vec(step(), 0..30), 2..4)) {
        let pool = Pool::new(&plan, PoolOptions::default()).unwrap();
        std::thread::scope(|scope| {
            let handles: Vec<_> = programs.iter().map(|steps| {
                let pool = &pool;
                scope.spawn(move || run(pool, steps))
            }).collect();
            for handle in handles {
                handle.join().unwrap().unwrap();
            }
        });
    }
}

#[test]
fn zero_sized_and_huge_requests() {
    let pool = Pool::new(&plan_of(&[64]), PoolOptions::default()).unwrap();
    let a = pool.alloc(0, 1).unwrap();
    let b = pool.alloc(0, 1).unwrap();
    assert_ne!(a, b);
    assert!(pool.alloc(usize::MAX - 10, 8).is_none());
    assert!(
        pool.alloc(8, 3).is_none(),
        "non-power-of-two alignment is refused"
    );
    // SAFETY: allocated above, freed once.
    unsafe {
        pool.free(a);
        pool.free(b);
    }
}

fn plan_of(classes: &[u64]) -> Plan {
    let mut plan = Plan {
        format: "memplan-pool-plan".into(),
        version: 1,
        class_interval: 64,
        order: Order::Allocation,
        iteration: 0,
        min_size: 0,
        total_bytes: classes.iter().sum(),
        arena_bytes: 0,
        live_peak_bytes: 0,
        blocks: classes
            .iter()
            .map(|&c| Block {
                class_bytes: c,
                tensors: 1,
                offset: None,
            })
            .collect(),
        schedules: vec![Schedule {
            class_bytes: 64,
            blocks: (0..classes.len() as u32).collect(),
        }],
    };
    plan.arena_bytes = plan.layout().unwrap().1;
    plan
}

#[test]
fn invalid_plans_are_rejected() {
    let mut plan = plan_of(&[64]);
    plan.schedules[0].blocks.push(7);
    assert!(Pool::new(&plan, PoolOptions::default()).is_err());
    let mut plan = plan_of(&[64]);
    plan.total_bytes = 1;
    assert!(Pool::new(&plan, PoolOptions::default()).is_err());
    let mut plan = plan_of(&[64, 64]);
    plan.blocks[0].offset = Some(0);
    assert!(
        Pool::new(&plan, PoolOptions::default()).is_err(),
        "offsets on some blocks only"
    );
    plan.blocks[1].offset = Some(32);
    assert!(
        Pool::new(&plan, PoolOptions::default()).is_err(),
        "offset not a multiple of 64"
    );
    plan.blocks[1].offset = Some(0);
    plan.arena_bytes = 128;
    let pool = Pool::new(&plan, PoolOptions::default()).unwrap();
    // Both blocks share their bytes: only one can be handed out from the plan at a time.
    let a = pool.alloc(64, 64).unwrap();
    let b = pool.alloc(64, 64).unwrap();
    // SAFETY: live allocations of this pool.
    unsafe {
        assert_eq!(pool.source(a), memplan_pool::Source::Plan);
        assert_eq!(pool.source(b), memplan_pool::Source::Os);
        pool.free(a);
        pool.free(b);
    }
}
