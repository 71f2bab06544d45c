//! Trace readers (errors name file, line or record, and field) and the trainer (plans
//! replayed through the pool are hit exactly as recorded).

use std::collections::HashMap;
use std::path::Path;

use memplan_pool::trace::{period, Location};
use memplan_pool::{train, Op, Order, Pool, PoolOptions, ReadOptions, Trace, TrainOptions};
use proptest::prelude::*;

fn csv(text: &str) -> Result<Trace, memplan_pool::TraceError> {
    Trace::from_csv(Path::new("t.csv"), text)
}

#[test]
fn csv_reads_iterations_and_defaults() {
    let trace = csv("seq,iter,op,size,id,align\n0,0,alloc,10,1,64\n1,0,free,10,1,\n2,1,alloc,5,1,\n3,1,free,5,1,\n").unwrap();
    assert_eq!(trace.events.len(), 4);
    assert_eq!(trace.iterations.len(), 2);
    assert_eq!(trace.iterations[1].number, 1);
    assert_eq!(trace.iterations[1].events, 2..4);
    assert_eq!(trace.events[0].align, 64);
    assert_eq!(
        trace.events[1].align, 64,
        "a free carries its allocation's alignment"
    );
    assert_eq!(trace.events[2].align, 16);
    let foreign = "op,size,id\nalloc,1,1\nfree,8,7\n";
    let e = csv(foreign).unwrap_err();
    assert_eq!((e.location, e.field), (Location::Line(3), Some("id")));
    assert!(e.to_string().contains("never allocated"), "{e}");
    let trace = Trace::from_csv_with(
        Path::new("t.csv"),
        foreign,
        memplan_pool::ForeignFrees::Skip,
    )
    .unwrap();
    assert_eq!((trace.events.len(), trace.foreign_frees), (1, 1));
    let e = Trace::from_bin(Path::new("t.bin"), &bin(&[(8, 1), (0, 2)]), 0).unwrap_err();
    assert_eq!((e.location, e.field), (Location::Record(1), Some("id")));
}

#[test]
fn csv_errors_name_line_and_field() {
    let cases: &[(&str, Location, Option<&str>)] = &[
        ("", Location::File, None),
        ("op,id\n", Location::Line(1), Some("size")),
        (
            "op,size,id\nalloc,1,1\nmalloc,1,2\n",
            Location::Line(3),
            Some("op"),
        ),
        ("op,size,id\nalloc,x,1\n", Location::Line(2), Some("size")),
        ("op,size,id\nalloc,0,1\n", Location::Line(2), Some("size")),
        (
            "op,size,id\nalloc,1,1\nfree,1,1\nfree,1,1\n",
            Location::Line(4),
            Some("id"),
        ),
        (
            "op,size,id\nalloc,1,1\nalloc,1,1\n",
            Location::Line(3),
            Some("id"),
        ),
        (
            "op,size,id\nalloc,1,1\nfree,2,1\n",
            Location::Line(3),
            Some("size"),
        ),
        (
            "op,size,id,iter\nalloc,1,1,2\nalloc,1,2,1\n",
            Location::Line(3),
            Some("iter"),
        ),
        (
            "seq,op,size,id\n5,alloc,1,1\n5,alloc,1,2\n",
            Location::Line(3),
            Some("seq"),
        ),
        (
            "op,size,id,align\nalloc,1,1,3\n",
            Location::Line(2),
            Some("align"),
        ),
        ("op,size,id\nalloc,1\n", Location::Line(2), None),
        (
            "op,size,id\nalloc,99999999999999999999999,1\n",
            Location::Line(2),
            Some("size"),
        ),
    ];
    for (text, location, field) in cases {
        let error = csv(text).expect_err(text);
        assert_eq!(error.location, *location, "{text:?}: {error}");
        assert_eq!(error.field, *field, "{text:?}: {error}");
        assert!(error.to_string().starts_with("t.csv"), "{error}");
    }
}

fn bin(records: &[(u64, u32)]) -> Vec<u8> {
    let mut out = Vec::new();
    for &(size, id) in records {
        out.extend_from_slice(&size.to_le_bytes());
        out.extend_from_slice(&id.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
    }
    out
}

#[test]
fn bin_iterations_come_from_the_period() {
    // Sizes 10,0,20,0 twice, then 10 (the last iteration cut short): period 4.
    let records = [
        (10, 0),
        (0, 0),
        (20, 1),
        (0, 1),
        (10, 2),
        (0, 2),
        (20, 3),
        (0, 3),
        (10, 4),
    ];
    let trace = Trace::from_bin(Path::new("t.bin"), &bin(&records), 1).unwrap();
    assert_eq!(
        trace
            .iterations
            .iter()
            .map(|i| i.number)
            .collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert_eq!(trace.iterations[2].events, 8..9);
    assert_eq!(
        trace.events[1].size, 10,
        "a free carries its allocation's size"
    );
    assert_eq!(trace.events[1].align, 64);
    let error = Trace::from_bin(Path::new("t.bin"), &[0u8; 17], 0).unwrap_err();
    assert_eq!(error.location, Location::File);
    let error = Trace::from_bin(Path::new("t.bin"), &bin(&[(1, 4), (1, 4)]), 0).unwrap_err();
    assert_eq!(error.location, Location::Record(1));
    assert!(error.to_string().contains("record 1"), "{error}");
}

#[test]
fn period_is_the_smallest() {
    assert_eq!(period(&[]), 1);
    assert_eq!(period(&[1]), 1);
    assert_eq!(period(&[1, 2, 3]), 3);
    assert_eq!(period(&[1, 2, 1, 2, 1]), 2);
    assert_eq!(period(&[1, 1, 2, 1, 1, 2, 1]), 3);
}

/// Replays every iteration of `trace` through `pool`, serving from the plan from
/// iteration `serve_from` on; returns (requests of at least `min_size` bytes, plan hits
/// among them) per served iteration.
fn replay(trace: &Trace, pool: &Pool, min_size: u64, serve_from: u64) -> Vec<(u64, u64)> {
    let mut live = HashMap::new();
    let mut out = Vec::new();
    for iteration in &trace.iterations {
        pool.begin_iteration();
        pool.set_serving(iteration.number >= serve_from);
        let (mut requests, mut hits) = (0, 0);
        for event in trace.events_of(iteration) {
            match event.op {
                Op::Alloc => {
                    let ptr = pool
                        .alloc(event.size as usize, event.align as usize)
                        .unwrap();
                    if event.size >= min_size {
                        requests += 1;
                        // SAFETY: live allocation of this pool.
                        if unsafe { pool.source(ptr) } == memplan_pool::Source::Plan {
                            hits += 1;
                        }
                    }
                    live.insert(event.id, ptr);
                }
                // SAFETY: allocated by this pool, freed once.
                Op::Free => unsafe { pool.free(live.remove(&event.id).unwrap()) },
            }
        }
        if iteration.number >= serve_from {
            out.push((requests, hits));
        }
    }
    for (_, ptr) in live {
        // SAFETY: as above.
        unsafe { pool.free(ptr) };
    }
    out
}

/// A periodic trace: `pattern` (local ids, each allocated and freed once, in order)
/// repeated `times` with fresh ids, cut into iterations of the pattern's length starting
/// at `shift`, so that tensors cross iteration boundaries.
fn periodic(pattern: &[(bool, u64, u64)], times: usize, shift: usize) -> Trace {
    let mut text = String::from("iter,op,size,id,align\n");
    let n = pattern.len();
    let ids = pattern.iter().filter(|e| e.0).count() as u64;
    for k in 0..times {
        for (i, &(alloc, local, size)) in pattern.iter().enumerate() {
            let position = k * n + i;
            let iteration = (position + n - shift) / n;
            let op = if alloc { "alloc" } else { "free" };
            text.push_str(&format!(
                "{iteration},{op},{size},{},64\n",
                local + k as u64 * ids
            ));
        }
    }
    csv(&text).unwrap()
}

fn pattern() -> impl Strategy<Value = Vec<(bool, u64, u64)>> {
    prop::collection::vec((1u64..20_000, any::<u16>()), 1..30).prop_map(|tensors| {
        // Tensor t is allocated at its slot and freed `delay` events of allocations later.
        let n = tensors.len();
        let mut events: Vec<(usize, bool, u64, u64)> = Vec::new();
        for (t, &(size, delay)) in tensors.iter().enumerate() {
            let free_at = (t + 1 + delay as usize % n).min(n);
            events.push((2 * t, true, t as u64, size));
            events.push((2 * free_at + 1, false, t as u64, size));
        }
        events.sort_by_key(|e| e.0);
        events
            .into_iter()
            .map(|(_, a, id, size)| (a, id, size))
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: if cfg!(miri) { 4 } else { 128 }, failure_persistence: None, ..ProptestConfig::default() })]

    /// A plan trained on one iteration of a periodic trace serves every planned request
    /// of every iteration from its scheduled block, whatever the order and interval; its
    /// total is at least the live peak.
    #[test]
    fn periodic_traces_hit_the_plan(pattern in pattern(), shift in 0usize..60, g in prop_oneof![Just(1u64), Just(512), Just(4096)], min_size in prop_oneof![Just(0u64), Just(5000)], pack in any::<bool>()) {
        let shift = shift % pattern.len();
        let trace = periodic(&pattern, 4, shift);
        let iteration = trace.iterations[1].number;
        for order in Order::ALL {
            let plan = train(&trace, &TrainOptions { class_interval: g, order, iteration, min_size, pack }).unwrap();
            plan.validate().unwrap();
            prop_assert!(plan.total_bytes >= plan.live_peak_bytes);
            if pack {
                prop_assert!(plan.arena_bytes >= plan.live_peak_bytes);
            }
            let json = serde_json::to_string(&plan).unwrap();
            let back: memplan_pool::Plan = serde_json::from_str(&json).unwrap();
            prop_assert_eq!(&back, &plan);
            let pool = Pool::new(&plan, PoolOptions::default()).unwrap();
            for (requests, hits) in replay(&trace, &pool, min_size.max(1), iteration) {
                prop_assert_eq!(requests, hits, "order {:?}", order);
            }
        }
    }
}

#[test]
fn hand_example_borrows_from_a_larger_class() {
    // a (8 KiB) lives [0,2); b (4 KiB) lives [2,4): b borrows a's block.
    let trace = csv("op,size,id\nalloc,8192,1\nfree,8192,1\nalloc,4096,2\nfree,4096,2\n").unwrap();
    let plan = train(
        &trace,
        &TrainOptions {
            class_interval: 4096,
            order: Order::Allocation,
            iteration: 0,
            min_size: 0,
            pack: false,
        },
    )
    .unwrap();
    assert_eq!(plan.blocks.len(), 1);
    assert_eq!(plan.total_bytes, 8192);
    assert_eq!(plan.live_peak_bytes, 8192);
    // In size order too; with g = 8 KiB both are one class.
    let plan = train(
        &trace,
        &TrainOptions {
            class_interval: 8192,
            order: Order::SizeDescending,
            iteration: 0,
            min_size: 0,
            pack: false,
        },
    )
    .unwrap();
    assert_eq!(plan.stats().blocks_per_class, vec![(8192, 1)]);
    assert!(train(
        &trace,
        &TrainOptions {
            class_interval: 0,
            order: Order::Allocation,
            iteration: 0,
            min_size: 0,
            pack: false,
        }
    )
    .is_err());
    assert!(train(
        &trace,
        &TrainOptions {
            class_interval: 1,
            order: Order::Allocation,
            iteration: 9,
            min_size: 0,
            pack: false,
        }
    )
    .is_err());
}

/// The real traces of `../shared/traces` (beside the project root), when present.
#[test]
fn real_traces_read_and_plan() {
    let dir = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/traces"
    ));
    if !dir.exists() || cfg!(miri) {
        eprintln!("skipping: ../shared not found");
        return;
    }
    let bin = Trace::read(
        &dir.join("resnet18_b8_replay_iters1-5.bin"),
        ReadOptions {
            first_iteration: 1,
            ..ReadOptions::default()
        },
    )
    .unwrap();
    assert_eq!(bin.iterations.len(), 5);
    assert_eq!(bin.iterations[0].events.len(), 21902);
    let csv = Trace::read(
        &dir.join("resnet18_b8_iters0-5_ge32KiB.csv"),
        ReadOptions::default(),
    )
    .unwrap();
    assert_eq!(csv.iterations.len(), 6);
    for trace in [&bin, &csv] {
        let plan = train(
            trace,
            &TrainOptions {
                class_interval: 4096,
                order: Order::Allocation,
                iteration: 2,
                min_size: 32 * 1024,
                pack: true,
            },
        )
        .unwrap();
        let pool = Pool::new(&plan, PoolOptions::default()).unwrap();
        let hits = replay(trace, &pool, 32 * 1024, 1);
        assert_eq!(hits.len(), 5);
        for &(requests, hit) in &hits {
            assert!(hit * 100 >= requests * 99, "{hits:?}");
        }
    }
    // The profiler's file holds every allocation it frees; the shim's single iteration
    // frees objects allocated before the recording began.
    Trace::read(
        &dir.join("resnet18_b8_profiler_tensors_iter0-2.csv"),
        ReadOptions::default(),
    )
    .unwrap();
    let all_calls = dir.join("resnet18_b8_iter2_all_calls.csv");
    let e = Trace::read(&all_calls, ReadOptions::default()).unwrap_err();
    assert_eq!(e.field, Some("id"), "{e}");
    let skipped = ReadOptions {
        foreign_frees: memplan_pool::ForeignFrees::Skip,
        ..ReadOptions::default()
    };
    assert!(Trace::read(&all_calls, skipped).unwrap().foreign_frees > 0);
}

#[test]
fn reused_ids_are_separate_tensors() {
    // Id 1 is used twice per iteration, by tensors that never overlap: one 4 KiB block
    // serves both, and a replay hits the plan every time.
    let mut text = String::from("iter,op,size,id\n");
    for iter in 0..3 {
        for line in ["alloc,4096,1", "free,4096,1", "alloc,4096,1", "free,4096,1"] {
            text.push_str(&format!("{iter},{line}\n"));
        }
    }
    let trace = csv(&text).unwrap();
    let plan = train(
        &trace,
        &TrainOptions {
            class_interval: 4096,
            order: Order::Allocation,
            iteration: 1,
            min_size: 0,
            pack: false,
        },
    )
    .unwrap();
    assert_eq!(plan.blocks.len(), 1);
    assert_eq!(plan.blocks[0].tensors, 2);
    assert_eq!(plan.live_peak_bytes, 4096);
    let pool = Pool::new(&plan, PoolOptions::default()).unwrap();
    for (requests, hits) in replay(&trace, &pool, 1, 1) {
        assert_eq!(requests, hits);
    }
}
