//! The sweep-line checker against the pairwise reference, and the max-live bound against
//! a brute force and the published numbers of the shared benchmarks.

use memplan::checker::{check, check_naive, Report, Violation};
use memplan::planner::{Naive, Planner};
use memplan::{bound, Buffer, BufferId, Lifetime, Plan, Problem};
use proptest::prelude::*;

/// Everything random about one buffer: its shape, and the offset a random plan gives it.
#[derive(Clone, Debug)]
struct Spec {
    size: u64,
    start: u64,
    len: u64,
    gap_points: Vec<u64>,
    alignment: u64,
    fixed_slot: Option<u64>,
    offset_kind: u8,
    offset_raw: u64,
}

const STEPS: u64 = 50;

fn spec() -> impl Strategy<Value = Spec> {
    (
        (1..100u64, 0..STEPS, 1..=STEPS),
        prop_oneof![
            3 => Just(Vec::new()),
            2 => prop::collection::vec(0..=STEPS, 1..6),
        ],
        prop::sample::select(vec![1u64, 1, 1, 2, 4, 8]),
        prop::option::weighted(0.15, 0..4u64),
        (0..12u8, 0..40u64),
    )
        .prop_map(
            |((size, start, len), gap_points, alignment, fixed_slot, (offset_kind, offset_raw))| {
                Spec {
                    size,
                    start,
                    len: len.min(STEPS - start).max(1),
                    gap_points,
                    alignment,
                    fixed_slot,
                    offset_kind,
                    offset_raw,
                }
            },
        )
}

/// The buffer of a spec: gaps are made from its random points, kept inside the lifetime
/// and never covering all of it. Fixed offsets are `slot * 128` (aligned, and disjoint
/// for distinct slots since sizes are below 128).
fn buffer(index: usize, spec: &Spec, fixed_slot: Option<u64>) -> Buffer {
    let end = spec.start + spec.len;
    let mut buffer = Buffer::new(format!("b{index}"), spec.size, spec.start, end);
    let mut points: Vec<u64> = spec
        .gap_points
        .iter()
        .map(|p| spec.start + p % (spec.len + 1))
        .collect();
    points.sort_unstable();
    points.dedup();
    buffer.gaps = points
        .chunks_exact(2)
        .map(|pair| Lifetime {
            start: pair[0],
            end: pair[1],
        })
        .collect();
    let covered: u64 = buffer.gaps.iter().map(|g| g.len()).sum();
    if covered == spec.len {
        buffer.gaps.pop();
    }
    buffer.alignment = spec.alignment;
    buffer.fixed_offset = fixed_slot.map(|slot| slot * 128);
    buffer
}

/// A problem with random conflict pairs; `distinct_fixed` gives each fixed buffer its own
/// slot (so that a valid plan exists).
fn problem(specs: &[Spec], raw_conflicts: &[(usize, usize)], distinct_fixed: bool) -> Problem {
    let buffers: Vec<Buffer> = specs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let slot = s
                .fixed_slot
                .map(|slot| if distinct_fixed { i as u64 } else { slot });
            buffer(i, s, slot)
        })
        .collect();
    let n = buffers.len();
    let conflicts: Vec<(BufferId, BufferId)> = if n < 2 {
        Vec::new()
    } else {
        raw_conflicts
            .iter()
            .map(|&(a, b)| (a % n, b % n))
            .filter(|(a, b)| a != b)
            .map(|(a, b)| (BufferId(a as u32), BufferId(b as u32)))
            .collect()
    };
    Problem::new(buffers, conflicts).expect("generated problems satisfy the contract")
}

/// Offsets from a small range (many overlaps), sometimes aligned, sometimes the fixed
/// offset, rarely overflowing; a claimed arena that is absent, right or wrong; rarely the
/// wrong length.
fn random_plan(problem: &Problem, specs: &[Spec], claim: u8, claimed: u64, length: u8) -> Plan {
    let mut offsets: Vec<u64> = problem
        .buffers()
        .iter()
        .zip(specs)
        .map(|(b, s)| match s.offset_kind {
            0..=2 => b.fixed_offset.unwrap_or(s.offset_raw),
            3 | 4 => s.offset_raw * b.alignment,
            5 => u64::MAX - s.offset_raw,
            _ => s.offset_raw,
        })
        .collect();
    match length {
        0 => {
            offsets.pop();
        }
        1 => offsets.push(0),
        _ => {}
    }
    let arena_bytes = match claim {
        0 => None,
        1 => Some(claimed),
        _ => memplan::plan::arena_bytes(problem, &offsets),
    };
    Plan {
        offsets,
        arena_bytes,
        extents: None,
    }
}

/// A first-fit planner written for this test: lowest aligned offset clear of every
/// already placed buffer that must not share bytes with it. Fixed buffers are placed
/// first. Unlike `Naive`, it shares addresses between buffers live at different steps,
/// so valid plans put buffers right next to each other in time and address.
fn first_fit(problem: &Problem) -> Plan {
    let buffers = problem.buffers();
    let must_not_share = |i: usize, j: usize| {
        buffers[i].live_together(&buffers[j])
            || problem
                .conflicts()
                .contains(&(BufferId(i.min(j) as u32), BufferId(i.max(j) as u32)))
    };
    let mut offsets: Vec<Option<u64>> = buffers.iter().map(|b| b.fixed_offset).collect();
    for i in 0..buffers.len() {
        if offsets[i].is_some() {
            continue;
        }
        let placed: Vec<(u64, u64)> = (0..buffers.len())
            .filter(|&j| j != i && must_not_share(i, j))
            .filter_map(|j| offsets[j].map(|o| (o, o + buffers[j].size)))
            .collect();
        let align = buffers[i].alignment;
        let fits = |o: u64| {
            placed
                .iter()
                .all(|&(lo, hi)| o + buffers[i].size <= lo || hi <= o)
        };
        let best = std::iter::once(0)
            .chain(placed.iter().map(|&(_, hi)| hi))
            .map(|o| o.next_multiple_of(align))
            .filter(|&o| fits(o))
            .min()
            .expect("above every placed buffer always fits");
        offsets[i] = Some(best);
    }
    Plan::new(problem, offsets.into_iter().map(Option::unwrap).collect()).unwrap()
}

fn both_agree(problem: &Problem, plan: &Plan) -> Report {
    let report = check(problem, plan);
    assert_eq!(report, check_naive(problem, plan));
    report
}

/// The largest total size live at one step, step by step.
fn brute_force_max_live(problem: &Problem) -> u64 {
    (0..=STEPS)
        .map(|t| {
            problem
                .buffers()
                .iter()
                .filter(|b| b.live_segments().iter().any(|s| s.start <= t && t < s.end))
                .map(|b| b.size)
                .sum()
        })
        .max()
        .unwrap_or(0)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn sweep_matches_reference_on_random_plans(
        specs in prop::collection::vec(spec(), 0..40),
        raw_conflicts in prop::collection::vec((0..40usize, 0..40usize), 0..6),
        (claim, claimed, length) in (0..4u8, 0..200u64, 0..30u8),
    ) {
        let p = problem(&specs, &raw_conflicts, false);
        let plan = random_plan(&p, &specs, claim, claimed, length);
        prop_assert_eq!(check(&p, &plan), check_naive(&p, &plan));
    }

    #[test]
    fn valid_plans_are_valid_for_both_and_one_move_agrees(
        specs in prop::collection::vec(spec(), 0..40),
        raw_conflicts in prop::collection::vec((0..40usize, 0..40usize), 0..6),
        (moved, to) in (0..40usize, 0..300u64),
    ) {
        let p = problem(&specs, &raw_conflicts, true);
        let naive = Naive.plan(&p).unwrap();
        let report = both_agree(&p, &naive);
        prop_assert!(report.is_valid(), "{:?}", report);
        prop_assert_eq!(report.arena_bytes, naive.arena_bytes);

        let mut packed = first_fit(&p);
        let report = both_agree(&p, &packed);
        prop_assert!(report.is_valid(), "{:?}", report);
        if !p.is_empty() {
            packed.offsets[moved % p.len()] = to;
            both_agree(&p, &packed);
        }
    }

    #[test]
    fn max_live_matches_a_step_by_step_brute_force(
        specs in prop::collection::vec(spec(), 0..40),
    ) {
        let p = problem(&specs, &[], false);
        prop_assert_eq!(bound::max_live(&p), Some(brute_force_max_live(&p)));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn sweep_matches_reference_on_larger_plans(
        specs in prop::collection::vec(spec(), 100..400),
        raw_conflicts in prop::collection::vec((0..400usize, 0..400usize), 0..20),
        spread in 1..60u64,
    ) {
        let p = problem(&specs, &raw_conflicts, false);
        let mut plan = random_plan(&p, &specs, 2, 0, 2);
        for (offset, s) in plan.offsets.iter_mut().zip(&specs) {
            if s.offset_kind != 5 {
                *offset *= spread;
            }
        }
        prop_assert_eq!(check(&p, &plan), check_naive(&p, &plan));
    }
}

// The shared benchmarks: a tiny reader of `id,lower,upper,size` CSVs (the real reader
// lives in `memplan::io`), checked against the numbers published in their READMEs.

mod common;
use common::{read_benchmark as read_csv, shared_benchmarks, BENCHMARKS};

#[test]
fn shared_benchmarks_have_their_published_max_live_and_naive_plans_check_valid() {
    let Some(shared) = shared_benchmarks() else {
        return;
    };
    for &(file, buffers, max_live, total) in BENCHMARKS {
        let p = read_csv(&shared.join(file));
        assert_eq!(p.len(), buffers, "{file}: buffers");
        assert_eq!(p.total_size(), Some(total), "{file}: sum of sizes");
        assert_eq!(bound::max_live(&p), Some(max_live), "{file}: max-live");

        let plan = Naive.plan(&p).unwrap();
        let report = check(&p, &plan);
        assert!(report.is_valid(), "{file}: {:?}", &report.violations[..1]);
        assert_eq!(report.arena_bytes, Some(total), "{file}: naive arena");

        if p.len() > 2000 {
            continue;
        }
        // Plant overlaps: every 7th buffer onto its successor, every 13th at 0.
        let mut planted = plan.clone();
        for i in 0..p.len() {
            if i % 7 == 0 && i + 1 < p.len() {
                planted.offsets[i] = plan.offsets[i + 1];
            }
            if i % 13 == 5 {
                planted.offsets[i] = 0;
            }
        }
        let report = check(&p, &planted);
        assert_eq!(report, check_naive(&p, &planted), "{file}: planted");
        if p.len() > 100 {
            assert!(
                report
                    .violations
                    .iter()
                    .any(|v| matches!(v, Violation::Overlap { .. })),
                "{file}: planted overlaps found"
            );
        }
    }
}
