//! The logic behind the `traces` fuzz target in `fuzz/`, shared with the smoke test.
//!
//! [`traces`] takes arbitrary bytes and panics when an invariant breaks; that panic is what
//! the fuzzer reports. Keeping the logic here (enabled by the `fuzzing` feature) lets the
//! target stay one line long and lets `cargo test` run the same checks.

use std::collections::HashMap;
use std::path::Path;

use crate::online::{self, Recorder, Server};
use crate::trace::{ForeignFrees, Location, Op, ReadOptions, Trace};
use crate::train::{self, Order, TrainOptions};

/// Traces with more events than this are read and checked, but neither trained nor
/// served, so that one input stays cheap.
pub const MAX_TRAINED_EVENTS: usize = 2_000;

/// Fuzzes the trace readers, the plan trainer and the in-process pool's server.
///
/// The first byte picks the format: even, the rest is CSV text (lossy UTF-8); odd, the
/// rest is a replay `.bin` stream. Each input is read twice, with foreign frees an error
/// and skipped. A reader error must carry a message and a location in range (a line of
/// the text, a record of the stream). A trace must keep its documented invariants
/// ([`check_trace`]). For small traces every iteration is trained with each traversal
/// order, packed and not: a plan must pass [`train::Plan::validate`], survive its JSON
/// round trip, and have an arena no smaller than its live peak. Finally the trace drives
/// the in-process pool ([`online`]): recorded, trained once a period is found, and
/// served, every offset handed out must lie in the arena, be aligned, and overlap no
/// live block. Returns what was reached, so that tests can tell the checks ran.
pub fn traces(data: &[u8]) -> Reached {
    let mut reached = Reached::default();
    let Some((&selector, body)) = data.split_first() else {
        return reached;
    };
    let bin = selector % 2 == 1;
    let text = String::from_utf8_lossy(body);
    for foreign_frees in [ForeignFrees::Error, ForeignFrees::Skip] {
        let options = ReadOptions {
            first_iteration: u64::from(selector / 2),
            foreign_frees,
        };
        let path = Path::new(if bin { "fuzz.bin" } else { "fuzz.csv" });
        let read = if bin {
            Trace::from_bin_with(path, body, options)
        } else {
            Trace::from_csv_with(path, &text, foreign_frees)
        };
        let trace = match read {
            Ok(trace) => trace,
            Err(error) => {
                assert!(!error.message.is_empty(), "empty error message: {error:?}");
                match error.location {
                    Location::File => {}
                    Location::Line(line) => assert!(
                        line >= 1 && line <= text.lines().count().max(1),
                        "line {line} out of range: {error:?}"
                    ),
                    Location::Record(record) => assert!(
                        bin && record < body.len() / 16,
                        "record {record} out of range: {error:?}"
                    ),
                }
                assert!(!error.to_string().is_empty());
                continue;
            }
        };
        check_trace(&trace, foreign_frees);
        reached.traces += 1;
        if trace.events.len() <= MAX_TRAINED_EVENTS {
            reached.plans += train_every_iteration(&trace);
            reached.served += serve(&trace);
        }
    }
    reached
}

/// What one input of [`traces`] reached (summed over its two readings).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reached {
    /// Traces read and checked.
    pub traces: u32,
    /// Trained plans checked.
    pub plans: u32,
    /// Requests served from the in-process pool's arena and checked.
    pub served: u32,
}

/// The invariants [`Trace`] documents: iterations consecutive, non-empty, covering the
/// events, numbers increasing; allocations of ids not live, sizes at least 1, alignments
/// powers of two; frees of live ids with their allocation's size and alignment; no
/// foreign frees counted unless they are skipped.
pub fn check_trace(trace: &Trace, foreign_frees: ForeignFrees) {
    let mut next = 0;
    for (index, iteration) in trace.iterations.iter().enumerate() {
        assert_eq!(
            iteration.events.start, next,
            "iteration {index} leaves a gap"
        );
        assert!(
            iteration.events.end > iteration.events.start,
            "iteration {index} is empty"
        );
        if index > 0 {
            assert!(
                iteration.number > trace.iterations[index - 1].number,
                "iteration numbers do not increase"
            );
        }
        next = iteration.events.end;
    }
    assert_eq!(
        next,
        trace.events.len(),
        "iterations do not cover the events"
    );
    if foreign_frees == ForeignFrees::Error {
        assert_eq!(trace.foreign_frees, 0, "foreign frees counted, not refused");
    }
    let mut live: HashMap<u64, (u64, u64)> = HashMap::new();
    for (index, event) in trace.events.iter().enumerate() {
        assert!(
            event.align.is_power_of_two(),
            "event {index}: alignment {}",
            event.align
        );
        match event.op {
            Op::Alloc => {
                assert!(event.size >= 1, "event {index}: allocation of 0 bytes");
                let previous = live.insert(event.id, (event.size, event.align));
                assert!(previous.is_none(), "event {index}: id {} is live", event.id);
            }
            Op::Free => {
                let allocated = live.remove(&event.id);
                assert_eq!(
                    allocated,
                    Some((event.size, event.align)),
                    "event {index}: free of id {} does not match its allocation",
                    event.id
                );
            }
        }
    }
}

/// Trains every iteration with every order, packed and not, and checks each plan; returns
/// how many plans were checked.
fn train_every_iteration(trace: &Trace) -> u32 {
    let mut plans = 0;
    for iteration in trace.iterations.iter().take(8) {
        for order in Order::ALL {
            for pack in [false, true] {
                let options = TrainOptions {
                    class_interval: 512,
                    order,
                    iteration: iteration.number,
                    min_size: 0,
                    pack,
                };
                let plan = match train::train(trace, &options) {
                    Ok(plan) => plan,
                    // Sizes near 2^64 overflow a class or the total: a clear error.
                    Err(train::TrainError::Overflow) => continue,
                    Err(error) => panic!("training iteration {}: {error}", iteration.number),
                };
                if let Err(message) = plan.validate() {
                    panic!("trained plan is invalid: {message}");
                }
                assert!(
                    plan.arena_bytes >= plan.live_peak_bytes,
                    "arena {} below the live peak {}",
                    plan.arena_bytes,
                    plan.live_peak_bytes
                );
                let json = serde_json::to_string(&plan).expect("a plan serialises");
                let reread: train::Plan = serde_json::from_str(&json).expect("a plan reads back");
                assert_eq!(reread, plan, "JSON round trip changed the plan");
                plans += 1;
            }
        }
    }
    plans
}

/// A server for the plan `best-of` trains on `period`, if it trains one.
fn start_serving(period: &online::Period) -> Option<Server> {
    online::train(period, &memplan::planner::BestOf)
        .map(|schedule| Server::starting_at(schedule, 0))
}

/// Drives the in-process pool with the trace: every allocation is recorded; once the
/// recorder finds a period (or, with iteration marks, two identical iterations), the
/// period is trained and later requests are served. Checks every offset served; returns
/// how many were.
fn serve(trace: &Trace) -> u32 {
    let mut served_count = 0;
    let mut recorder = Recorder::new(4 * MAX_TRAINED_EVENTS, 2);
    let mut server: Option<Server> = None;
    // Trace id → (recorder id, served offset and range end).
    let mut live: HashMap<u64, (u64, Option<(u64, u64)>)> = HashMap::new();
    for iteration in &trace.iterations {
        for event in trace.events_of(iteration) {
            match event.op {
                Op::Alloc => {
                    let (block, period) = recorder.alloc(event.size);
                    let served = server.as_mut().and_then(|s| s.alloc(event.size));
                    let range = served.map(|offset| {
                        let schedule = &server.as_ref().unwrap().schedule;
                        let end = offset
                            .checked_add(event.size)
                            .expect("a served range overflows");
                        assert_eq!(offset % online::ALIGNMENT, 0, "offset {offset} misaligned");
                        assert!(
                            end <= schedule.arena,
                            "range {offset}..{end} beyond the arena of {}",
                            schedule.arena
                        );
                        for (_, other) in live.values() {
                            if let Some((start, stop)) = *other {
                                assert!(
                                    end <= start || stop <= offset,
                                    "served {offset}..{end} overlaps live {start}..{stop}"
                                );
                            }
                        }
                        served_count += 1;
                        (offset, end)
                    });
                    live.insert(event.id, (block, range));
                    if let (None, Some(period)) = (&server, period) {
                        server = start_serving(&period);
                    }
                }
                Op::Free => {
                    let (block, range) = live.remove(&event.id).expect("free of a live id");
                    recorder.free(block);
                    if let (Some(server), Some((offset, end))) = (server.as_mut(), range) {
                        let freed = server.free(offset).expect("a served block frees");
                        assert!(freed >= end - offset, "freed range shorter than served");
                    }
                }
            }
        }
        if server.is_none() {
            if let Some(period) = recorder.mark() {
                server = start_serving(&period);
            }
        }
    }
    served_count
}

/// Plans whose arena is at most this many bytes are also made into a [`crate::Pool`] and
/// served from, so that one input stays cheap.
pub const MAX_SERVED_ARENA: u64 = 1 << 22;

/// What one input of [`pool_plan`] reached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlanReached {
    /// Read as a pool plan JSON.
    pub read: bool,
    /// Passed [`train::Plan::validate`].
    pub valid: bool,
    /// Requests served from a pool made from it.
    pub served: u32,
}

/// Fuzzes the pool plan JSON reader (`memplan pool replay --plan`, the preload
/// allocator's `MEMPLAN_POOL_PLAN`) with arbitrary text. A refused text must say why; a
/// plan read must either fail [`train::Plan::validate`] with a message or keep what the
/// runtime pool relies on: a layout whose end is `arena_bytes` with every block inside
/// it, a JSON round trip to the same plan, and (for small arenas) a [`crate::Pool`] that
/// builds and serves each schedule's blocks inside its arena, no two live ones sharing a
/// byte.
pub fn pool_plan(data: &[u8]) -> PlanReached {
    let mut reached = PlanReached::default();
    let text = String::from_utf8_lossy(data);
    let plan: train::Plan = match serde_json::from_str(&text) {
        Ok(plan) => plan,
        Err(error) => {
            assert!(!error.to_string().is_empty(), "empty JSON error");
            return reached;
        }
    };
    reached.read = true;
    if let Err(why) = plan.validate() {
        assert!(!why.is_empty(), "empty validation error");
        let pool = crate::Pool::new(&plan, crate::PoolOptions::default());
        assert!(pool.is_err(), "a pool was made from an invalid plan: {why}");
        return reached;
    }
    reached.valid = true;
    let (slots, end) = plan.layout().expect("a valid plan has a layout");
    assert_eq!(end, plan.arena_bytes, "layout end and arena_bytes differ");
    for (block, &slot) in plan.blocks.iter().zip(&slots) {
        let block_end = slot
            .checked_add(block.class_bytes)
            .expect("a block's end overflows");
        assert!(block_end <= end, "a block ends past the arena");
    }
    let again: train::Plan =
        serde_json::from_str(&serde_json::to_string(&plan).expect("a plan serialises"))
            .expect("a written plan reads back");
    assert_eq!(again, plan, "the JSON round trip changed the plan");
    if plan.arena_bytes > MAX_SERVED_ARENA {
        return reached;
    }
    let pool = match crate::Pool::new(&plan, crate::PoolOptions::default()) {
        Ok(pool) => pool,
        Err(error) => panic!(
            "a valid plan of {} bytes made no pool: {error}",
            plan.arena_bytes
        ),
    };
    // One request of each scheduled class, all live together, then all freed.
    let mut live: Vec<(usize, usize)> = Vec::new();
    let mut pointers = Vec::new();
    for schedule in plan.schedules.iter().take(64) {
        let Ok(size) = usize::try_from(schedule.class_bytes) else {
            continue;
        };
        if size > MAX_SERVED_ARENA as usize {
            continue;
        }
        let Some(ptr) = pool.alloc(size.max(1), 64) else {
            continue;
        };
        let start = ptr.as_ptr() as usize;
        assert_eq!(start % 64, 0, "a served pointer is misaligned");
        for &(other, other_end) in &live {
            assert!(
                start + size.max(1) <= other || other_end <= start,
                "served ranges overlap"
            );
        }
        live.push((start, start + size.max(1)));
        pointers.push(ptr);
        reached.served += 1;
    }
    for ptr in pointers {
        // SAFETY: each pointer came from this pool's alloc and is freed once.
        unsafe { pool.free(ptr) };
    }
    reached
}
