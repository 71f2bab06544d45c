//! `tflm-greedy` on hand-made problems: every expected offset below is worked out by hand
//! from TFLM's algorithm as `src/planner/tflm_greedy.rs` documents it (fixed offsets first
//! in id order; then size-descending, equal sizes later-added first; each buffer at the
//! lowest candidate below the first live placed buffer, in offset order, that leaves room).

use memplan::checker::check;
use memplan::planner::{tflm_greedy_offsets, PlanError, Planner, TflmGreedy};
use memplan::{bound, Buffer, BufferId, Plan, Problem};
use proptest::prelude::*;

/// A buffer of `size` bytes live over the half-open steps `[start, end)`.
fn buffer(name: &str, size: u64, start: u64, end: u64) -> Buffer {
    Buffer::new(name, size, start, end)
}

fn fixed(name: &str, size: u64, start: u64, end: u64, offset: u64) -> Buffer {
    let mut b = Buffer::new(name, size, start, end);
    b.fixed_offset = Some(offset);
    b
}

/// Plans with `tflm-greedy`, checks the plan and returns its offsets.
fn planned(problem: &Problem) -> Plan {
    let plan = TflmGreedy.plan(problem).expect("tflm-greedy plans it");
    let report = check(problem, &plan);
    assert!(report.is_valid(), "invalid plan: {:?}", report.violations);
    assert_eq!(plan.arena_bytes, report.arena_bytes);
    assert_eq!(
        plan.offsets,
        tflm_greedy_offsets(problem).unwrap(),
        "the planner and tflm_greedy_offsets agree"
    );
    plan
}

/// Four 16-byte buffers whose first-fit result depends on the tie order: taken
/// x1 = [2, 4), x2 = [10, 12), x3 = [5, 11), x4 = [0, 6), first fit needs three slots
/// (x4 meets x1 in slot 0 and x3 in slot 1); taken x4, x3, x2, x1 it needs two (max-live).
fn tie_buffers() -> Vec<Buffer> {
    vec![
        buffer("x4", 16, 0, 6),
        buffer("x3", 16, 5, 11),
        buffer("x2", 16, 10, 12),
        buffer("x1", 16, 2, 4),
    ]
}

#[test]
fn equal_sizes_are_placed_later_added_first() {
    // Ids 0..3 are x4, x3, x2, x1: TFLM places id 3 first.
    //   x1 [2,4):   nothing placed                        -> 0
    //   x2 [10,12): x1@0 not live                          -> 0
    //   x3 [5,11):  x1@0 not live, x2@0 live, no room      -> 16
    //   x4 [0,6):   x1@0 live -> 16, x2 not live, x3@16 live -> 32
    let problem = Problem::from_buffers(tie_buffers()).unwrap();
    let plan = planned(&problem);
    assert_eq!(plan.offsets, vec![32, 16, 0, 0]);
    assert_eq!(plan.arena_bytes, Some(48));
    assert_eq!(bound::max_live(&problem), Some(32));

    // The same buffers added in the opposite order: now x4 is placed first, and the
    // earlier-added-first order of the first problem gives a different, smaller arena.
    //   x4 [0,6)   -> 0;  x3 [5,11): x4@0 live -> 16;
    //   x2 [10,12): x4@0 not live, x3@16 live and 16 above 0 -> 0;
    //   x1 [2,4):  x4@0 live -> 16, x2@0 not live, x3@16 not live -> 16
    let mut reversed = tie_buffers();
    reversed.reverse();
    let problem = Problem::from_buffers(reversed).unwrap();
    let plan = planned(&problem);
    // Ids 0..3 are now x1, x2, x3, x4.
    assert_eq!(plan.offsets, vec![16, 0, 16, 0]);
    assert_eq!(plan.arena_bytes, Some(32));
}

#[test]
fn sizes_go_largest_first_whatever_the_id() {
    // Size order beats id order: c (48) before b (32) before a (16), all live together.
    let problem = Problem::from_buffers(vec![
        buffer("a", 16, 0, 2),
        buffer("b", 32, 0, 2),
        buffer("c", 48, 0, 2),
    ])
    .unwrap();
    let plan = planned(&problem);
    assert_eq!(plan.offsets, vec![80, 48, 0]);
    assert_eq!(plan.arena_bytes, Some(96));
}

#[test]
fn fixed_offsets_come_first_and_the_others_flow_around_them() {
    // f is fixed at 48; the others (all but c live with f over [0, 4)) go in size order,
    // ties later-added first: c (48), d (32), a (32), b (16).
    //   c [4,6):  f not live                              -> 0
    //   d [0,4):  c not live, f@48 is 48 above 0            -> 0
    //   a [0,4):  d@0 live -> 32, f@48 only 16 above 32 -> 64
    //   b [0,4):  d@0 live -> 32, f@48 is 16 above 32       -> 32 (the gap below f)
    let problem = Problem::from_buffers(vec![
        fixed("f", 16, 0, 4, 48),
        buffer("a", 32, 0, 4),
        buffer("b", 16, 0, 4),
        buffer("c", 48, 4, 6),
        buffer("d", 32, 0, 4),
    ])
    .unwrap();
    let plan = planned(&problem);
    assert_eq!(plan.offsets, vec![48, 64, 32, 0, 0]);
    assert_eq!(plan.arena_bytes, Some(96));
}

#[test]
fn a_fixed_buffer_is_placed_before_larger_free_ones() {
    // Without its fixed offset g (16 bytes) would come last and land at 64; fixed, it is
    // placed first at 0 and the 64-byte buffer goes above it.
    let problem =
        Problem::from_buffers(vec![buffer("big", 64, 0, 3), fixed("g", 16, 1, 2, 0)]).unwrap();
    let plan = planned(&problem);
    assert_eq!(plan.offsets, vec![16, 0]);
    assert_eq!(plan.arena_bytes, Some(80));
}

#[test]
fn clashing_fixed_offsets_are_refused() {
    let problem = Problem::from_buffers(vec![
        buffer("free", 8, 0, 4),
        fixed("f1", 32, 0, 2, 0),
        fixed("f2", 16, 1, 3, 16),
    ])
    .unwrap();
    match TflmGreedy.plan(&problem) {
        Err(PlanError::FixedOffsetsClash { a, b }) => {
            assert_eq!((a.as_str(), b.as_str()), ("f1", "f2"));
        }
        other => panic!("expected FixedOffsetsClash, got {other:?}"),
    }
    // TFLM itself takes offline offsets as given: tflm_greedy_offsets keeps the clash and
    // places the free buffer above both (f1@0 live -> 32, f2@16 below 32 ends at 32).
    assert_eq!(tflm_greedy_offsets(&problem).unwrap(), vec![32, 0, 16]);

    // The same offsets for buffers never live together are no clash.
    let problem =
        Problem::from_buffers(vec![fixed("f1", 32, 0, 2, 0), fixed("f2", 16, 2, 3, 16)]).unwrap();
    assert_eq!(planned(&problem).offsets, vec![0, 16]);
}

#[test]
fn a_buffer_takes_the_lowest_gap_that_is_big_enough() {
    // Fixed p@0, q@32, r@96 (16 bytes each, live over [0, 10)) leave gaps [16, 32) of 16
    // bytes and [48, 96) of 48. t (64 bytes, [10, 12)) is live with none of them.
    // Order: p, q, r (fixed), then t (64), x (32), then w, z, y (16, later-added first).
    //   t: nothing live                                       -> 0
    //   x: t skipped, p -> 16, q@32 only 16 above -> 48, r@96 48 above  -> 48
    //   w: t skipped, p -> 16, q@32 is 16 above 16              -> 16
    //   z: p -> 16, w@16 -> 32, q@32 -> 48, x@48 -> 80, r@96 16 above  -> 80
    //   y: ... z@80 -> 96, r@96 -> 112                          -> 112
    let problem = Problem::from_buffers(vec![
        fixed("p", 16, 0, 10, 0),
        fixed("q", 16, 0, 10, 32),
        fixed("r", 16, 0, 10, 96),
        buffer("x", 32, 0, 10),
        buffer("y", 16, 0, 10),
        buffer("z", 16, 0, 10),
        buffer("w", 16, 0, 10),
        buffer("t", 64, 10, 12),
    ])
    .unwrap();
    let plan = planned(&problem);
    assert_eq!(plan.offsets, vec![0, 32, 96, 48, 112, 80, 16, 0]);
    assert_eq!(plan.arena_bytes, Some(128));
}

#[test]
fn the_candidate_only_rises_past_a_live_buffer() {
    // l@0 (64 bytes) and k@16 (16 bytes) are never live together; n is live with both.
    // Walking in offset order, l pushes the candidate to 64; k starts below it and ends at
    // 32, which leaves the candidate at 64 (falling back to 32 would overlap l).
    let problem = Problem::from_buffers(vec![
        fixed("l", 64, 0, 4, 0),
        fixed("k", 16, 4, 8, 16),
        buffer("n", 16, 0, 8),
    ])
    .unwrap();
    let plan = planned(&problem);
    assert_eq!(plan.offsets, vec![0, 16, 64]);
    assert_eq!(plan.arena_bytes, Some(80));
}

#[test]
fn buffers_not_live_together_share_bytes() {
    // a [0,2) and c [2,4) never meet, so a reuses c's bytes; b meets both and goes above c.
    // Order c (32), then b and a (16, later-added first):
    //   c [2,4) -> 0;  b [1,3): c@0 live -> 32;  a [0,2): c not live, b@32 is 32 above 0 -> 0
    let problem = Problem::from_buffers(vec![
        buffer("a", 16, 0, 2),
        buffer("b", 16, 1, 3),
        buffer("c", 32, 2, 4),
    ])
    .unwrap();
    let plan = planned(&problem);
    assert_eq!(plan.offsets, vec![0, 32, 0]);
    assert_eq!(plan.arena_bytes, Some(48));
}

#[test]
fn conflicts_and_alignment_are_honoured() {
    // a and b are never live together but form a conflict pair: b goes above a.
    // c (alignment 16) is live with a (10 bytes): its candidate 10 is rounded up to 16.
    let mut c = buffer("c", 4, 0, 1);
    c.alignment = 16;
    let problem = Problem::new(
        vec![buffer("a", 10, 0, 2), buffer("b", 6, 2, 4), c],
        [(BufferId(0), BufferId(1))],
    )
    .unwrap();
    let plan = planned(&problem);
    // Order a (10), b (6), c (4): a@0; b: a@0 conflicts -> 10; c: a@0 live -> 16,
    // b@10 not live.
    assert_eq!(plan.offsets, vec![0, 10, 16]);
    assert_eq!(plan.arena_bytes, Some(20));
}

#[test]
fn an_empty_problem_has_an_empty_plan() {
    let problem = Problem::from_buffers(Vec::new()).unwrap();
    let plan = planned(&problem);
    assert!(plan.offsets.is_empty());
    assert_eq!(plan.arena_bytes, Some(0));
}

#[test]
fn an_arena_past_2_64_is_an_error() {
    let half = 1u64 << 63;
    let problem = Problem::from_buffers(vec![
        buffer("a", half, 0, 2),
        buffer("b", half, 0, 2),
        buffer("c", 16, 0, 2),
    ])
    .unwrap();
    assert_eq!(TflmGreedy.plan(&problem), Err(PlanError::ArenaOverflow));
}

/// Small random problems: sizes, lifetimes, alignments, sometimes a gap and sometimes a
/// fixed offset (which may clash: then the only acceptable answer is the clash error).
fn problems() -> impl Strategy<Value = Problem> {
    let one = (
        1u64..64,
        0u64..12,
        1u64..8,
        prop::sample::select(vec![1u64, 2, 4, 8, 16]),
        prop::option::weighted(0.2, 0u64..8),
        any::<bool>(),
    );
    prop::collection::vec(one, 0..14).prop_map(|specs| {
        let buffers = specs
            .into_iter()
            .enumerate()
            .map(|(i, (size, start, len, alignment, fixed, gap))| {
                let mut b = Buffer::new(format!("b{i}"), size, start, start + len);
                b.alignment = alignment;
                b.fixed_offset = fixed.map(|k| k * alignment * 4);
                if gap && len >= 3 {
                    b.gaps = vec![memplan::Lifetime::new(start + 1, start + 2).unwrap()];
                }
                b
            })
            .collect();
        Problem::from_buffers(buffers).unwrap()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn every_plan_is_valid(problem in problems()) {
        match TflmGreedy.plan(&problem) {
            Ok(plan) => {
                let report = check(&problem, &plan);
                prop_assert!(report.is_valid(), "{:?}", report.violations);
                prop_assert_eq!(plan.arena_bytes, report.arena_bytes);
                let arena = plan.arena_bytes.unwrap();
                prop_assert!(arena >= bound::max_live(&problem).unwrap());
                for (b, &offset) in problem.buffers().iter().zip(&plan.offsets) {
                    if let Some(fixed) = b.fixed_offset {
                        prop_assert_eq!(offset, fixed, "{}", b.name);
                    }
                }
                // Deterministic: the same problem, the same plan.
                prop_assert_eq!(&TflmGreedy.plan(&problem).unwrap().offsets, &plan.offsets);
            }
            Err(PlanError::FixedOffsetsClash { a, b }) => {
                // Only an actual clash of two fixed buffers may refuse the problem.
                let find = |name: &str| problem.buffers().iter().find(|x| x.name == name).unwrap();
                let (x, y) = (find(&a), find(&b));
                let (ox, oy) = (x.fixed_offset.unwrap(), y.fixed_offset.unwrap());
                prop_assert!(ox < oy + y.size && oy < ox + x.size, "{a} and {b} do not overlap");
                prop_assert!(x.live_together(y), "{a} and {b} are never live together");
            }
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    }
}

/// TFLM's walk as TFLM does it (every placed buffer, in offset order, equal offsets in
/// placement order): the reference for the indexed walk of `tflm_greedy_offsets`.
fn tflm_walk_every_buffer(problem: &Problem) -> Vec<u64> {
    let buffers = problem.buffers();
    let conflicts: std::collections::HashSet<(u32, u32)> = problem
        .conflicts()
        .iter()
        .map(|&(a, b)| (a.0, b.0))
        .collect();
    let together = |a: usize, b: usize| {
        buffers[a].lifetime.overlaps(buffers[b].lifetime)
            || conflicts.contains(&(a.min(b) as u32, a.max(b) as u32))
    };
    let mut offsets = vec![0u64; buffers.len()];
    for (i, b) in buffers.iter().enumerate() {
        if b.size == 0 {
            offsets[i] = b.fixed_offset.unwrap_or(0);
        }
    }
    let mut order: Vec<usize> = (0..buffers.len())
        .filter(|&i| buffers[i].fixed_offset.is_some() && buffers[i].size > 0)
        .collect();
    let mut online: Vec<usize> = (0..buffers.len())
        .rev()
        .filter(|&i| buffers[i].fixed_offset.is_none() && buffers[i].size > 0)
        .collect();
    online.sort_by(|&a, &b| buffers[b].size.cmp(&buffers[a].size));
    order.extend(online);
    let mut by_offset: Vec<usize> = Vec::new();
    for &id in &order {
        let wanted = &buffers[id];
        let offset = match wanted.fixed_offset {
            Some(fixed) => fixed,
            None => {
                let mut candidate = 0u64;
                for &placed in &by_offset {
                    if !together(placed, id) {
                        continue;
                    }
                    if offsets[placed] >= candidate && offsets[placed] - candidate >= wanted.size {
                        break;
                    }
                    let end = offsets[placed] + buffers[placed].size;
                    if end > candidate {
                        candidate = end.next_multiple_of(wanted.alignment);
                    }
                }
                candidate
            }
        };
        offsets[id] = offset;
        let at = by_offset.partition_point(|&p| offsets[p] <= offset);
        by_offset.insert(at, id);
    }
    offsets
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// The indexed walk gives TFLM's offsets exactly: random lifetimes (many sharing
    /// starts and ends), sizes with ties, alignments, fixed offsets and conflict pairs.
    #[test]
    fn the_indexed_walk_is_tflms_walk(
        specs in prop::collection::vec(
            (0u64..12, 1u64..6, prop::sample::select(vec![0u64, 16, 32, 48, 64]), 0u8..10),
            1..40,
        ),
        pairs in prop::collection::vec((0usize..40, 0usize..40), 0..6),
    ) {
        let buffers: Vec<Buffer> = specs
            .iter()
            .enumerate()
            .map(|(i, &(start, len, size, kind))| {
                let mut b = Buffer::new(format!("b{i}"), size, start, start + len);
                if kind == 0 {
                    b.fixed_offset = Some(64 * (i as u64 % 3));
                } else if kind == 1 {
                    b.alignment = 32;
                }
                b
            })
            .collect();
        let n = buffers.len();
        let conflicts: Vec<(BufferId, BufferId)> = pairs
            .iter()
            .filter(|&&(a, b)| a < n && b < n && a != b)
            .map(|&(a, b)| (BufferId(a as u32), BufferId(b as u32)))
            .collect();
        let problem = Problem::new(buffers, conflicts).unwrap();
        prop_assert_eq!(tflm_greedy_offsets(&problem).unwrap(), tflm_walk_every_buffer(&problem));
    }
}
