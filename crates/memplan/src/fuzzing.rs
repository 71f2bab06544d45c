//! The logic behind the fuzz targets in `fuzz/`, shared with the smoke tests.
//!
//! Each function takes arbitrary bytes and panics when an invariant breaks; that panic is
//! what the fuzzer reports. Keeping the logic here (enabled by the `fuzzing` feature) lets
//! the targets stay one line long and lets `cargo test` run the same checks.

use crate::io::{csv, json, memops};
use crate::planner::{self, PlanError};
use crate::problem::{Buffer, Problem};
use crate::{bound, checker};

/// xorshift64*: a tiny fixed-seed generator for the smoke tests' mutations, so that every
/// run sees the same inputs.
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform enough in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// One of `items` (not empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Problems with more buffers than this are read and round-tripped, but not planned, so that
/// one input stays cheap (the reference checker is quadratic).
pub const MAX_PLANNED_BUFFERS: usize = 200;

/// Fuzzes the minimalloc CSV reader, the writers, every planner and the checker.
///
/// The bytes are read as (lossy) UTF-8 by [`csv::read_problem`]. An error must carry a
/// message and a line. A problem must survive `write_problem` → `read_problem` unchanged.
/// Then (for at most [`MAX_PLANNED_BUFFERS`] buffers) every planner of
/// [`planner::all`] plans it: a plan must pass [`checker::check`] with an arena of at least
/// the max-live bound, and must survive the solution CSV and the plan JSON round trips.
pub fn csv_reader(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let problem = match csv::read_problem(&text, "fuzz.csv") {
        Ok(problem) => problem,
        Err(error) => {
            assert!(!error.message.is_empty(), "empty error message: {error:?}");
            assert!(error.line >= 1, "error without a line: {error:?}");
            return;
        }
    };
    let written = csv::write_problem(&problem);
    match csv::read_problem(&written, "rewritten.csv") {
        Ok(reread) => assert_eq!(
            reread, problem,
            "write_problem/read_problem changed the problem:\n{written}"
        ),
        Err(error) => panic!("write_problem wrote what read_problem rejects: {error}\n{written}"),
    }
    if problem.len() > MAX_PLANNED_BUFFERS {
        return;
    }
    let lower_bound = bound::max_live(&problem);
    let clash = fixed_offsets_clash(&problem);
    // Every planner, and `exclusive --fragmented`, whose plans carry extents.
    let fragmented: &dyn planner::Planner = &planner::Exclusive::FRAGMENTED;
    for planner in planner::all().iter().copied().chain([fragmented]) {
        let name = planner.name();
        let plan = match planner.plan(&problem) {
            Ok(plan) => plan,
            Err(PlanError::FixedOffsetsClash { a, b }) => {
                assert!(
                    clash.is_some(),
                    "{name} reports fixed offsets of '{a}' and '{b}' clashing, but no fixed offsets clash"
                );
                continue;
            }
            Err(PlanError::ArenaOverflow) => continue,
            Err(PlanError::Internal(message)) => panic!("{name}: {message}"),
        };
        let report = checker::check(&problem, &plan);
        if let Some((a, b)) = &clash {
            panic!(
                "{name} returned a plan although the fixed offsets of '{a}' and '{b}' clash (no valid plan exists); checker verdict: {:?}",
                report.violations
            );
        } else {
            assert!(
                report.is_valid(),
                "{name} made an invalid plan: {:?}\n{written}",
                report.violations
            );
            let arena = report.arena_bytes;
            assert!(
                matches!((arena, lower_bound), (Some(arena), Some(bound)) if arena >= bound),
                "{name}: arena {arena:?} is below the max-live bound {lower_bound:?}"
            );
            // Zero-size buffers go to their fixed offset or 0, whatever the planner.
            for (buffer, &offset) in problem.buffers().iter().zip(&plan.offsets) {
                if buffer.size == 0 {
                    assert_eq!(
                        offset,
                        buffer.fixed_offset.unwrap_or(0),
                        "{name} moved the zero-size buffer '{}'",
                        buffer.name
                    );
                }
            }
        }
        if report.arena_bytes.is_none() {
            continue;
        }
        // A solution CSV has one offset per buffer: it cannot carry extents.
        if plan.extents.is_none() {
            let solution = csv::write_solution(&problem, &plan);
            match csv::read_solution(&solution, "solution.csv", &problem) {
                Ok(reread) => assert_eq!(
                    reread.offsets, plan.offsets,
                    "solution round trip:\n{solution}"
                ),
                Err(error) => {
                    panic!("write_solution wrote what read_solution rejects: {error}\n{solution}")
                }
            }
        }
        let summary = json::PlanSummary {
            planner: name.to_string(),
            lower_bound_bytes: lower_bound.unwrap_or(0),
            alignment: 1,
            extra: serde_json::Map::new(),
        };
        let text = json::write_plan_json(&problem, &plan, &summary, None);
        match json::read_plan_json(&text, "plan.json", &problem) {
            Ok(reread) => {
                assert_eq!(
                    reread.offsets, plan.offsets,
                    "plan JSON round trip:\n{text}"
                );
                // With no buffers, a fragmented plan lists no extents and reads back as
                // the (identical) contiguous plan.
                if !problem.is_empty() {
                    assert_eq!(
                        reread.extents, plan.extents,
                        "plan JSON round trip:\n{text}"
                    );
                }
                let claimed = plan.arena_bytes.or(report.arena_bytes);
                assert_eq!(reread.arena_bytes, claimed, "plan JSON round trip:\n{text}");
            }
            Err(error) => {
                panic!("write_plan_json wrote what read_plan_json rejects: {error}\n{text}")
            }
        }
    }
}

/// The problem the plan readers of [`plan_files`] read plans for: four buffers, two of
/// them live together, one with alignment 8.
fn plan_files_problem() -> Problem {
    csv::read_problem(
        "id,lower,upper,size,alignment\na,0,2,16,8\nb,1,3,8,\nc,2,4,24,\nd,3,5,0,\n",
        "fixed.csv",
    )
    .expect("the fixed problem reads")
}

/// Fuzzes the readers of plans and of memory-operation sequences with arbitrary text:
/// the plan JSON reader and the solution CSV reader (for a fixed problem), and the
/// memory-operation reader. Errors must carry a message (and, for CSV, a line); a plan
/// read must go through [`checker::check`] without panicking, and one judged valid must
/// sit inside the arena the checker computes; a sequence read must give a problem whose
/// plans by `best-of` pass the checker.
pub fn plan_files(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let problem = plan_files_problem();
    let judge = |plan: crate::plan::Plan, problem: &Problem| {
        let report = checker::check(problem, &plan);
        if report.is_valid() {
            let arena = report.arena_bytes.expect("a valid plan has an arena");
            for (buffer, &offset) in problem.buffers().iter().zip(&plan.offsets) {
                if plan.extents.is_none() {
                    assert!(
                        offset
                            .checked_add(buffer.size)
                            .is_some_and(|end| end <= arena),
                        "valid plan with '{}' outside its arena",
                        buffer.name
                    );
                }
            }
        }
    };
    match json::read_plan_json(&text, "fuzz.json", &problem) {
        Ok(plan) => judge(plan, &problem),
        Err(error) => assert!(!error.to_string().is_empty(), "empty JSON error"),
    }
    match csv::read_solution_aligned(&text, "fuzz.csv", &problem) {
        Ok((plan, aligned)) => judge(plan, &aligned),
        Err(error) => {
            assert!(!error.message.is_empty(), "empty error message: {error:?}");
            assert!(error.line >= 1, "error without a line: {error:?}");
        }
    }
    match memops::read_problem(&text, "fuzz.memops") {
        Ok(problem) => {
            if problem.len() <= MAX_PLANNED_BUFFERS {
                if let Ok(plan) = planner::Planner::plan(&planner::BestOf, &problem) {
                    let report = checker::check(&problem, &plan);
                    assert!(
                        report.is_valid(),
                        "best-of made an invalid plan of a memory-operation sequence: {:?}",
                        report.violations
                    );
                }
            }
        }
        Err(error) => {
            assert!(!error.message.is_empty(), "empty error message: {error:?}");
            assert!(error.line >= 1, "error without a line: {error:?}");
        }
    }
}

/// Two buffers whose fixed offsets overlap while they must not share bytes, if any:
/// then no valid plan exists. Found independently of the planners and the checker.
fn fixed_offsets_clash(problem: &Problem) -> Option<(String, String)> {
    let fixed: Vec<(usize, &Buffer, u64)> = problem
        .buffers()
        .iter()
        .enumerate()
        .filter_map(|(i, b)| b.fixed_offset.map(|o| (i, b, o)))
        .collect();
    let conflict = |i: usize, j: usize| {
        problem
            .conflicts()
            .iter()
            .any(|&(a, b)| (a.index(), b.index()) == (i.min(j), i.max(j)))
    };
    for (k, &(i, a, a_offset)) in fixed.iter().enumerate() {
        for &(j, b, b_offset) in &fixed[k + 1..] {
            let a_end = a_offset.saturating_add(a.size);
            let b_end = b_offset.saturating_add(b.size);
            // Empty ranges (zero-size buffers) share no byte with anything.
            let share_bytes = a_offset.max(b_offset) < a_end.min(b_end);
            if share_bytes && (a.live_together(b) || conflict(i, j)) {
                return Some((a.name.clone(), b.name.clone()));
            }
        }
    }
    None
}
