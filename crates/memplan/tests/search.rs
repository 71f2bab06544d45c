//! The `search` planner: optimality against brute force on tiny problems, alignment,
//! fixed offsets and conflict pairs, anytime behaviour, determinism, and one ablation test
//! per pruning rule. Every plan goes through `check_naive`.

use std::time::Duration;

use memplan::checker::check_naive;
use memplan::planner::search::{Outcome, Rules, Search, Stop};
use memplan::planner::{BestOf, Planner};
use memplan::{bound, Buffer, BufferId, Lifetime, Problem};
use proptest::prelude::*;

mod common;

/// One thread, no time pressure: deterministic.
fn exact() -> Search {
    Search {
        time_limit: Duration::from_secs(60),
        threads: 1,
        ..Search::default()
    }
}

fn run(search: &Search, problem: &Problem) -> Outcome {
    let outcome = search.run(problem, None).unwrap();
    let report = check_naive(problem, &outcome.plan);
    assert!(report.is_valid(), "{:?}", report.violations);
    assert_eq!(report.arena_bytes, Some(outcome.arena));
    assert_eq!(outcome.plan.arena_bytes, Some(outcome.arena));
    for (b, &offset) in problem.buffers().iter().zip(&outcome.plan.offsets) {
        assert_eq!(offset % b.alignment, 0, "{}", b.name);
        if let Some(fixed) = b.fixed_offset {
            assert_eq!(offset, fixed, "{}", b.name);
        }
    }
    assert!(outcome.arena >= outcome.lower_bound);
    outcome
}

/// The optimum by brute force: every order of the buffers, each placed at the lowest
/// aligned offset free of the placed buffers (and fixed ones) it must not share bytes with.
/// Taking the buffers of an optimal plan by increasing offset gives an order whose
/// placements are no higher, so the minimum over all orders is the optimum.
fn brute_force(problem: &Problem) -> u64 {
    let buffers = problem.buffers();
    let n = buffers.len();
    let clash = |i: usize, j: usize| {
        buffers[i].live_together(&buffers[j])
            || problem
                .conflicts()
                .contains(&(BufferId(i.min(j) as u32), BufferId(i.max(j) as u32)))
    };
    let fixed: Vec<usize> = (0..n)
        .filter(|&i| buffers[i].fixed_offset.is_some())
        .collect();
    let mut free: Vec<usize> = (0..n)
        .filter(|&i| buffers[i].fixed_offset.is_none())
        .collect();
    let mut best = u64::MAX;
    let mut offsets = vec![0u64; n];
    for &i in &fixed {
        offsets[i] = buffers[i].fixed_offset.unwrap();
    }
    permute(&mut free, 0, &mut |order: &[usize]| {
        let mut placed: Vec<usize> = fixed.clone();
        for &i in order {
            let b = &buffers[i];
            let mut candidates: Vec<u64> = placed
                .iter()
                .map(|&j| offsets[j] + buffers[j].size)
                .chain([0])
                .map(|c| c.next_multiple_of(b.alignment))
                .collect();
            candidates.sort_unstable();
            offsets[i] = candidates
                .into_iter()
                .find(|&c| {
                    placed.iter().all(|&j| {
                        !clash(i, j)
                            || c + b.size <= offsets[j]
                            || offsets[j] + buffers[j].size <= c
                    })
                })
                .unwrap();
            placed.push(i);
        }
        let arena = (0..n)
            .map(|i| offsets[i] + buffers[i].size)
            .max()
            .unwrap_or(0);
        best = best.min(arena);
    });
    best
}

fn permute(items: &mut Vec<usize>, k: usize, visit: &mut dyn FnMut(&[usize])) {
    if k == items.len() {
        visit(items);
        return;
    }
    for i in k..items.len() {
        items.swap(k, i);
        permute(items, k + 1, visit);
        items.swap(k, i);
    }
}

/// Tiny random problems: up to 6 buffers, alignments 1, 2 or 4, some gaps, fixed offsets
/// and conflict pairs.
fn tiny_problems() -> impl Strategy<Value = Problem> {
    let buffer = (
        1u64..=12,
        0u64..8,
        1u64..7,
        prop::sample::select(vec![1u64, 1, 2, 4]),
        prop::option::weighted(0.15, 0u64..6),
        prop::option::weighted(0.15, 0u64..4),
    );
    (
        prop::collection::vec(buffer, 0..=6),
        prop::collection::vec((0usize..6, 0usize..6), 0..3),
    )
        .prop_map(|(raw, pairs)| {
            let mut buffers: Vec<Buffer> = Vec::new();
            for (i, (size, start, len, alignment, gap, fixed)) in raw.into_iter().enumerate() {
                let mut b = Buffer::new(format!("b{i}"), size, start, start + len);
                b.alignment = alignment;
                if let (Some(at), true) = (gap, len >= 3) {
                    let gap_start = start + 1 + at % (len - 2);
                    b.gaps = vec![Lifetime {
                        start: gap_start,
                        end: gap_start + 1,
                    }];
                }
                b.fixed_offset = fixed.map(|k| k * 4 * alignment);
                buffers.push(b);
            }
            let n = buffers.len();
            let conflicts: Vec<(BufferId, BufferId)> = pairs
                .into_iter()
                .filter(|&(a, b)| a < n && b < n && a != b)
                .map(|(a, b)| (BufferId(a as u32), BufferId(b as u32)))
                .collect();
            let problem = Problem::new(buffers.clone(), conflicts.clone()).unwrap();
            // Drop the fixed offsets when two of them clash.
            if BestOf.plan(&problem).is_ok() {
                problem
            } else {
                for b in &mut buffers {
                    b.fixed_offset = None;
                }
                Problem::new(buffers, conflicts).unwrap()
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn search_finds_and_proves_the_brute_force_optimum(problem in tiny_problems()) {
        let outcome = run(&exact(), &problem);
        prop_assert!(outcome.proven_optimal, "{:?}", outcome.stop);
        prop_assert_eq!(outcome.arena, brute_force(&problem));
    }

    #[test]
    fn every_rule_set_keeps_the_optimum(problem in tiny_problems(), mask in 0u16..4096) {
        let rules = Rules {
            canonical: mask & 1 != 0,
            dominance: mask & 2 != 0,
            sections: mask & 4 != 0,
            hatless: mask & 8 != 0,
            restarts: mask & 16 != 0,
            decompose: mask & 32 != 0,
            reuse: mask & 64 != 0,
            lns: mask & 128 != 0,
            reorder: mask & 256 != 0,
            dive: mask & 512 != 0,
            probe: mask & 1024 != 0,
            memo: mask & 2048 != 0,
        };
        let outcome = run(&Search { rules, ..exact() }, &problem);
        prop_assert!(outcome.proven_optimal);
        prop_assert_eq!(outcome.arena, brute_force(&problem));
    }

    #[test]
    fn capacity_decides_like_brute_force(
        problem in tiny_problems(),
        slack in -3i64..=3,
        threads in 1usize..=2,
    ) {
        let optimum = brute_force(&problem);
        let capacity = optimum.saturating_add_signed(slack);
        let search = Search { capacity: Some(capacity), threads, ..exact() };
        let outcome = run(&search, &problem);
        if capacity >= optimum {
            prop_assert_eq!(outcome.capacity_met, Some(true));
            prop_assert_eq!(outcome.stop, Stop::Capacity);
            prop_assert!(outcome.arena <= capacity);
        } else {
            prop_assert_eq!(outcome.capacity_met, Some(false));
            prop_assert_eq!(outcome.stop, Stop::Infeasible);
            prop_assert!(outcome.lower_bound > capacity);
        }
    }

    #[test]
    fn anytime_is_never_worse_than_best_of(problem in tiny_problems(), nodes in 1u64..40) {
        let search = Search { node_limit: Some(nodes), ..exact() };
        let outcome = run(&search, &problem);
        let best_of = BestOf.plan(&problem).unwrap().arena_bytes.unwrap();
        prop_assert!(outcome.arena <= best_of);
        prop_assert_eq!(outcome.start_arena, best_of);
    }
}

/// A fixed mid-sized instance: 24 buffers with sizes and lifetimes from a small LCG, where
/// the greedy plan is above the optimum and the proof takes some search.
fn ablation_instance(seed: u64, n: usize) -> Problem {
    common::lcg_problem(seed, n, 30, 12, 16)
}

#[test]
fn the_search_proves_optimality_and_reports_why() {
    // All of input.12's buffers fit in max-live: the bound itself proves it.
    let problem = Problem::from_buffers(vec![
        Buffer::new("b1", 4, 0, 3),
        Buffer::new("b2", 4, 3, 9),
        Buffer::new("b3", 4, 0, 9),
        Buffer::new("b4", 4, 9, 21),
        Buffer::new("b5", 4, 0, 21),
    ])
    .unwrap();
    let outcome = run(&exact(), &problem);
    assert_eq!((outcome.arena, outcome.proven_optimal), (12, true));
    assert_eq!(outcome.stop, Stop::LowerBound);
    // Three buffers pairwise live together with sizes 2, 3, 3 and a fourth (size 5) live
    // with both 3s but not the 2: max-live is 8 at every step, but no plan beats 10 ...
    // so the optimum is only proven by exhausting the search.
    let problem = Problem::from_buffers(vec![
        Buffer::new("a", 2, 0, 2),
        Buffer::new("b", 3, 0, 4),
        Buffer::new("c", 3, 1, 4),
        Buffer::new("d", 2, 2, 4),
        Buffer::new("e", 5, 4, 6),
        Buffer::new("f", 3, 3, 6),
    ])
    .unwrap();
    let outcome = run(&exact(), &problem);
    assert!(outcome.proven_optimal);
    assert_eq!(outcome.arena, brute_force(&problem));
    if outcome.arena > bound::max_live(&problem).unwrap() {
        assert_eq!(outcome.stop, Stop::Exhausted);
    }
}

#[test]
fn a_node_limit_stops_the_search_with_the_best_plan_so_far() {
    let problem = ablation_instance(7, 40);
    let outcome = run(
        &Search {
            node_limit: Some(50),
            rules: Rules {
                restarts: false,
                ..Rules::DEFAULT
            },
            ..exact()
        },
        &problem,
    );
    if !outcome.proven_optimal {
        assert_eq!(outcome.stop, Stop::NodeLimit);
    }
    assert!(outcome.arena <= outcome.start_arena);
}

#[test]
fn one_thread_with_a_node_limit_is_deterministic() {
    for seed in [0, 1, 2] {
        let problem = ablation_instance(11 + seed, 30);
        let search = Search {
            seed,
            node_limit: Some(3_000),
            ..exact()
        };
        let a = run(&search, &problem);
        let b = run(&search, &problem);
        assert_eq!(a.plan, b.plan);
        assert_eq!(a.nodes, b.nodes);
        assert_eq!(a.proven_optimal, b.proven_optimal);
    }
}

#[test]
fn two_threads_reach_the_same_proven_optimum() {
    let problem = ablation_instance(3, 24);
    let one = run(&exact(), &problem);
    let two = run(
        &Search {
            threads: 2,
            ..exact()
        },
        &problem,
    );
    assert!(one.proven_optimal && two.proven_optimal);
    assert_eq!(one.arena, two.arena);
}

#[test]
fn fixed_offsets_alignment_and_conflicts_are_respected() {
    let mut f = Buffer::new("f", 4, 0, 10);
    f.fixed_offset = Some(4);
    let mut a = Buffer::new("a", 3, 0, 5);
    a.alignment = 8;
    let problem = Problem::new(
        vec![
            f,
            a,
            Buffer::new("b", 4, 2, 8),
            Buffer::new("c", 2, 12, 14),
            Buffer::new("d", 2, 20, 22),
        ],
        [(BufferId(3), BufferId(4))],
    )
    .unwrap();
    let outcome = run(&exact(), &problem);
    assert!(outcome.proven_optimal);
    assert_eq!(outcome.arena, brute_force(&problem));
    assert_eq!(outcome.plan.offsets[0], 4);
}

fn challenging(name: &str) -> Option<Problem> {
    let path = format!(
        "{}/../../../shared/benchmarks/minimalloc/challenging/{name}.1048576.csv",
        env!("CARGO_MANIFEST_DIR")
    );
    let Ok(text) = std::fs::read_to_string(&path) else {
        eprintln!("skipping: {path} not found");
        return None;
    };
    Some(memplan::io::csv::read_problem(&text, &path).unwrap())
}

/// Checks a record plan kept as a fixture (see `data/README.md` for the commands that
/// found them) against its challenging instance: valid by both checkers, with the arena
/// claimed, and the instance's max-live as expected.
fn check_record(instance: &str, file: &str, text: &str, arena: u64, max_live: u64) {
    let Some(problem) = challenging(instance) else {
        return;
    };
    let plan = memplan::io::csv::read_solution(text, file, &problem).unwrap();
    let report = memplan::checker::check(&problem, &plan);
    assert!(report.is_valid(), "{file}: {:?}", report.violations);
    assert_eq!(report.arena_bytes, Some(arena));
    assert!(check_naive(&problem, &plan).is_valid());
    assert_eq!(bound::max_live(&problem), Some(max_live));
}

/// The best plan known for J: 1,022,976 bytes (`known_results.csv` has 1,035,264).
#[test]
fn j_record_plan_is_valid() {
    let text = include_str!("data/J.1022976.solution.csv");
    check_record("J", "J.1022976.solution.csv", text, 1_022_976, 989_184);
}

/// The best plan known for D: 1,014,784 bytes (`known_results.csv` has 1,024,000).
#[test]
fn d_record_plan_is_valid() {
    let text = include_str!("data/D.1014784.solution.csv");
    check_record("D", "D.1014784.solution.csv", text, 1_014_784, 986_112);
}

/// Ablation, one rule at a time, on the minimalloc instances A (154 buffers) and C (203):
/// one thread, no restarts (so the single thread runs the prover at the lower bound, where
/// both reach their optimum), at most `LIMIT` nodes. With every rule on, the optimum is
/// found; with one rule off, it takes more nodes or is not found within the limit.
///
/// About 250,000 nodes in all: a few seconds with the workspace's test profile
/// (`opt-level = 1`).
#[test]
fn ablation_every_rule_reduces_search_nodes() {
    const LIMIT: u64 = 60_000;
    let (Some(a), Some(c)) = (challenging("A"), challenging("C")) else {
        return;
    };
    let base = Rules {
        restarts: false,
        ..Rules::DEFAULT
    };
    let nodes = |problem: &Problem, rules: Rules| {
        let search = Search {
            rules,
            node_limit: Some(LIMIT),
            ..exact()
        };
        let outcome = run(&search, problem);
        (
            outcome.nodes,
            outcome.proven_optimal.then_some(outcome.arena),
        )
    };
    let off = |f: fn(&mut Rules)| {
        let mut rules = base;
        f(&mut rules);
        rules
    };
    let cases: [(&str, &Problem, Rules); 4] = [
        ("canonical", &c, off(|r| r.canonical = false)),
        ("dominance", &a, off(|r| r.dominance = false)),
        ("sections", &c, off(|r| r.sections = false)),
        ("hatless", &c, off(|r| r.hatless = false)),
    ];
    for (rule, problem, without) in cases {
        let (with_nodes, optimum) = nodes(problem, base);
        assert!(
            optimum.is_some(),
            "{rule}: all rules on must reach the optimum"
        );
        let (without_nodes, found) = nodes(problem, without);
        eprintln!("{rule}: {with_nodes} nodes with it, {without_nodes} without");
        assert!(without_nodes > with_nodes, "{rule}");
        assert!(found.is_none() || found == optimum, "{rule}");
    }
}

#[test]
fn rules_parse_from_a_list() {
    assert_eq!(Rules::parse(""), Ok(Rules::DEFAULT));
    assert_eq!(Rules::parse("+decompose"), Ok(Rules::DEFAULT));
    let rules = Rules::parse("-dominance, -restarts").unwrap();
    assert!(!rules.dominance && !rules.restarts && rules.canonical && rules.sections);
    assert_eq!(Rules::parse("+hatless"), Ok(Rules::DEFAULT));
    assert!(Rules::parse("-magic").unwrap_err().contains("known rules"));
}

/// The smallest hard minimalloc instance, C (203 buffers), reaches its optimum (the lower
/// bound 1,039,360) well within a generous limit.
#[test]
fn challenging_c_reaches_its_lower_bound() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/benchmarks/minimalloc/challenging/C.1048576.csv"
    );
    let Ok(text) = std::fs::read_to_string(path) else {
        eprintln!("skipping: {path} not found");
        return;
    };
    let problem = memplan::io::csv::read_problem(&text, path).unwrap();
    let outcome = run(
        &Search {
            time_limit: Duration::from_secs(120),
            ..Search::default()
        },
        &problem,
    );
    assert_eq!(outcome.arena, 1_039_360);
    assert!(outcome.proven_optimal);
}

/// `decompose`: two copies of a mid-sized instance, the second later in time, share no
/// constraint. Without the rule the search interleaves them and refutes a cap for one
/// copy again under every arrangement of the other; with it, each cap is settled once.
#[test]
fn decompose_reduces_search_nodes_on_independent_parts() {
    // Optimum 43 against max-live 42: the bound is refuted by exhausting the search.
    let one = ablation_instance(220, 16);
    let mut buffers: Vec<Buffer> = one.buffers().to_vec();
    for b in one.buffers() {
        let mut copy = Buffer::new(
            format!("{}'", b.name),
            b.size,
            b.lifetime.start + 100,
            b.lifetime.end + 100,
        );
        copy.alignment = b.alignment;
        buffers.push(copy);
    }
    let problem = Problem::from_buffers(buffers).unwrap();
    let solve = |decompose: bool| {
        let search = Search {
            rules: Rules {
                restarts: false,
                decompose,
                ..Rules::DEFAULT
            },
            node_limit: Some(200_000),
            ..exact()
        };
        run(&search, &problem)
    };
    let (with, without) = (solve(true), solve(false));
    eprintln!(
        "decompose: {} nodes with it, {} without (arenas {} and {})",
        with.nodes, without.nodes, with.arena, without.arena
    );
    assert!(with.proven_optimal);
    assert_eq!(with.arena, 43);
    assert!(!without.proven_optimal || without.arena == with.arena);
    assert!(with.nodes < without.nodes);
}

/// `decompose` against the search without it on mid-sized instances (too large for brute
/// force): both prove an optimum, and it is the same.
#[test]
fn decompose_keeps_the_optimum_on_mid_sized_instances() {
    let mut above_bound = 0;
    for seed in 0..3000 {
        let problem = ablation_instance(seed, 16);
        let solve = |decompose: bool| {
            let rules = Rules {
                decompose,
                ..Rules::DEFAULT
            };
            run(&Search { rules, ..exact() }, &problem)
        };
        let (with, without) = (solve(true), solve(false));
        assert!(with.proven_optimal && without.proven_optimal, "seed {seed}");
        assert_eq!(with.arena, without.arena, "seed {seed}");
        above_bound += usize::from(with.arena > bound::max_live(&problem).unwrap());
    }
    eprintln!("{above_bound} of 3000 optima above max-live");
    assert!(above_bound > 0);
}

/// `memo` on minimalloc A, one thread, without restarts (so that no run ends on a budget):
/// it only cuts subtrees searched to the end before, so the search finds the same plans in
/// the same order and proves the same optimum in fewer nodes (measured: 48,400 against
/// 49,120).
#[test]
fn memo_changes_no_plan_and_cuts_nodes() {
    let Some(a) = challenging("A") else {
        return;
    };
    let solve = |memo: bool| {
        let rules = Rules {
            memo,
            restarts: false,
            ..Rules::DEFAULT
        };
        run(&Search { rules, ..exact() }, &a)
    };
    let (with, without) = (solve(true), solve(false));
    eprintln!(
        "memo: A proven in {} nodes with it, {} without",
        with.nodes, without.nodes
    );
    assert!(with.proven_optimal && without.proven_optimal);
    assert_eq!(with.plan.offsets, without.plan.offsets);
    assert!(with.nodes < without.nodes);
}

/// `memo`: minimalloc D decided at its best known peak (1,024,000 bytes), one thread,
/// seed 1: with the memo a plan fits within the node limit (measured: 171,525 nodes);
/// without it none is found (nor in 1,500,000 nodes).
#[test]
fn memo_decides_d_at_the_best_known_peak() {
    const LIMIT: u64 = 400_000;
    let Some(d) = challenging("D") else {
        return;
    };
    let solve = |memo: bool| {
        let search = Search {
            rules: Rules {
                memo,
                ..Rules::DEFAULT
            },
            capacity: Some(1_024_000),
            node_limit: Some(LIMIT),
            seed: 1,
            ..exact()
        };
        run(&search, &d)
    };
    let (with, without) = (solve(true), solve(false));
    eprintln!(
        "memo: capacity met {:?} in {} nodes with it, {:?} in {} without",
        with.capacity_met, with.nodes, without.capacity_met, without.nodes
    );
    assert_eq!(with.capacity_met, Some(true));
    assert!(with.arena <= 1_024_000);
    assert_eq!(without.capacity_met, None);
}

/// `reuse`: on minimalloc F (296 buffers, three time components), one thread with the
/// default rules, restarts included (kept plans pay off from the second run on): fewer
/// nodes to the proven optimum with the rule than without it.
#[test]
fn reuse_reduces_search_nodes() {
    let Some(f) = challenging("F") else {
        return;
    };
    let solve = |reuse: bool| {
        let search = Search {
            // `reorder` off: with it F is proven in 322 nodes either way.
            rules: Rules {
                reuse,
                reorder: false,
                ..Rules::DEFAULT
            },
            node_limit: Some(60_000),
            ..exact()
        };
        run(&search, &f)
    };
    let (with, without) = (solve(true), solve(false));
    eprintln!(
        "reuse: {} nodes with it, {} without",
        with.nodes, without.nodes
    );
    assert!(with.proven_optimal && without.proven_optimal);
    assert_eq!(with.arena, without.arena);
    assert!(with.nodes < without.nodes);
}

/// `restarts`: on minimalloc F, one thread, every other rule on: the restarts over the
/// preorders reach the proven optimum in a few thousand nodes; a single depth-first run
/// (the prover at the lower bound with the first preorder) does not within the limit.
#[test]
fn restarts_reduce_search_nodes() {
    const LIMIT: u64 = 20_000;
    let Some(f) = challenging("F") else {
        return;
    };
    let solve = |restarts: bool| {
        let search = Search {
            // `reorder` off: with it a single run proves F in 322 nodes.
            rules: Rules {
                restarts,
                reorder: false,
                ..Rules::DEFAULT
            },
            node_limit: Some(LIMIT),
            ..exact()
        };
        run(&search, &f)
    };
    let (with, without) = (solve(true), solve(false));
    eprintln!(
        "restarts: {} nodes with them, {} without (proven: {}, {})",
        with.nodes, without.nodes, with.proven_optimal, without.proven_optimal
    );
    assert!(with.proven_optimal);
    assert!(with.nodes < without.nodes);
    assert!(!without.proven_optimal || without.arena == with.arena);
}

/// `lns` (off by default): on minimalloc C, one thread, 3,000 nodes (an LNS round counts as
/// one): the LNS rounds from the incumbent lower the arena where the depth-first runs alone
/// have not left the `best-of` plan yet.
#[test]
fn lns_lowers_the_arena_under_a_small_node_limit() {
    let Some(c) = challenging("C") else {
        return;
    };
    let solve = |lns: bool| {
        let search = Search {
            rules: Rules {
                lns,
                ..Rules::DEFAULT
            },
            node_limit: Some(3_000),
            ..exact()
        };
        run(&search, &c)
    };
    let (with, without) = (solve(true), solve(false));
    eprintln!(
        "lns: arena {} with it, {} without ({} and {} nodes)",
        with.arena, without.arena, with.nodes, without.nodes
    );
    assert!(with.nodes <= 3_000 + 256 && without.nodes <= 3_000 + 256);
    assert!(with.arena < without.arena);
}

/// `reorder`: on minimalloc I (a perfect packing: its optimum is max-live), one thread,
/// default rules: with the parts reordered at each split (every second run of the prover)
/// the search finds a plan at the bound within the limit; with the static preorders alone
/// it does not (measured: proven in 133,087 nodes; 1,102,848 without). Since the improver
/// takes 4/5 of one thread's nodes once it probes, the prover's proof takes more nodes in
/// all than the 60,000 this limit was before.
#[test]
fn reorder_reduces_search_nodes() {
    const LIMIT: u64 = 150_000;
    let Some(i) = challenging("I") else {
        return;
    };
    let solve = |reorder: bool| {
        let search = Search {
            rules: Rules {
                reorder,
                ..Rules::DEFAULT
            },
            node_limit: Some(LIMIT),
            ..exact()
        };
        run(&search, &i)
    };
    let (with, without) = (solve(true), solve(false));
    eprintln!(
        "reorder: {} nodes with it (arena {}), {} without (arena {})",
        with.nodes, with.arena, without.nodes, without.arena
    );
    assert!(with.proven_optimal);
    assert!(with.nodes < without.nodes);
    assert!(without.arena > with.arena);
}

/// `dive`: on minimalloc J (409 buffers), one thread, 20,000 nodes: restarting the
/// improver's preorder from the root at each new cap reaches a lower arena than going on
/// depth-first under the tightened cap (measured: 1,054,720 against 1,063,936).
#[test]
fn dive_lowers_the_arena_under_a_node_limit() {
    let Some(j) = challenging("J") else {
        return;
    };
    let solve = |dive: bool| {
        let search = Search {
            rules: Rules {
                dive,
                ..Rules::DEFAULT
            },
            node_limit: Some(20_000),
            ..exact()
        };
        run(&search, &j)
    };
    let (with, without) = (solve(true), solve(false));
    eprintln!(
        "dive: arena {} with it, {} without ({} and {} nodes)",
        with.arena, without.arena, with.nodes, without.nodes
    );
    assert!(with.arena < without.arena);
}

/// A run cancelled through `run_cancellable` ends with the best plan found so far, valid,
/// and says it was interrupted; a flag that stays false changes nothing.
#[test]
fn cancelled_search_returns_its_best_plan() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let Some(problem) = challenging("J") else {
        return;
    };
    let options = Search {
        time_limit: Duration::from_secs(600),
        threads: 2,
        ..Search::DEFAULT
    };
    let cancel = AtomicBool::new(false);
    let outcome = std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            cancel.store(true, Ordering::Relaxed);
        });
        options
            .run_cancellable(&problem, None, Some(&cancel))
            .unwrap()
    });
    // J is not proven optimal in 300 ms: the run can only have ended by the flag, long
    // before its 600 s limit (a broken flag makes this test run for ten minutes).
    assert!(!outcome.proven_optimal);
    assert_eq!(outcome.stop, Stop::Interrupted);
    assert!(check_naive(&problem, &outcome.plan).is_valid());
    assert!(outcome.arena <= outcome.start_arena);
}

#[test]
fn capacity_mode_finds_a_plan_at_the_capacity_or_proves_none() {
    let Some(problem) = challenging("C") else {
        return;
    };
    // C's optimum is 1,039,360 (its max-live): decided both ways without optimising.
    let fits = run(
        &Search {
            capacity: Some(1_048_576),
            ..exact()
        },
        &problem,
    );
    assert_eq!(fits.capacity_met, Some(true));
    assert_eq!(fits.stop, Stop::Capacity);
    assert!(fits.arena <= 1_048_576);
    let none = run(
        &Search {
            capacity: Some(1_039_359),
            ..exact()
        },
        &problem,
    );
    assert_eq!(none.capacity_met, Some(false));
    assert_eq!(none.stop, Stop::Infeasible);
    // Without a capacity there is no decision.
    assert_eq!(run(&exact(), &problem).capacity_met, None);
}

#[test]
fn a_passed_deadline_cuts_the_greedy_start_short_with_a_valid_plan() {
    // More buffers than the exact search takes: `run_until` (a deadline-bound best-of).
    let problem = ablation_instance(3, 5_000);
    let attempts = memplan::planner::best_of::run_until(&problem, std::time::Instant::now());
    // Only the first candidate runs; it stops after its first block of buffers and
    // stacks the rest on top: valid, and no lower than the complete greedy plan.
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].planner, "greedy-size-firstfit");
    let cut = attempts[0].result.as_ref().unwrap();
    assert!(check_naive(&problem, cut).is_valid());
    let full = memplan::planner::SizeFirstFit.plan(&problem).unwrap();
    assert!(cut.arena_bytes >= full.arena_bytes);
    // `search` with no time at all still starts from best-of in full (issue #46): not
    // the exact search (5,000 buffers), stopped by the limit.
    let outcome = run(
        &Search {
            time_limit: Duration::ZERO,
            ..Search::default()
        },
        &problem,
    );
    assert!(!outcome.exact);
    let best_of = BestOf.plan(&problem).unwrap().arena_bytes.unwrap();
    assert!(outcome.arena <= best_of, "{} > {best_of}", outcome.arena);
    assert!(
        matches!(outcome.stop, Stop::TimeLimit | Stop::LowerBound),
        "{:?}",
        outcome.stop
    );
}

/// `probe`: on minimalloc D and J, one thread, 100,000 nodes, seeds 0-4: once the
/// improver's aim has reached the incumbent, random caps in the top third of the gap,
/// each searched like a decision from a small budget, reach lower arenas in all than caps
/// just below the incumbent. Seed by seed it is a lottery (measured with `g` = 1,024,
/// with the time shared on one thread: D 1,032,192 1,053,696 1,033,216 1,037,312
/// 1,037,312 with it, 1,065,984 1,048,576 1,038,336 1,037,312 1,050,624 without; J
/// 1,054,720 1,039,360 1,041,408 1,049,600 1,036,288 and 1,050,624 1,041,408 1,053,696
/// 1,032,192 1,049,600), so the test compares the totals.
#[test]
fn probe_lowers_the_arena_under_a_node_limit() {
    let (Some(d), Some(j)) = (challenging("D"), challenging("J")) else {
        return;
    };
    let total = |probe: bool| -> u64 {
        let mut arenas = Vec::new();
        for problem in [&d, &j] {
            for seed in 0..5 {
                let search = Search {
                    rules: Rules {
                        probe,
                        ..Rules::DEFAULT
                    },
                    node_limit: Some(100_000),
                    seed,
                    ..exact()
                };
                arenas.push(run(&search, problem).arena);
            }
        }
        eprintln!("probe {probe}: D and J, seeds 0-4: {arenas:?}");
        arenas.iter().sum()
    };
    let (with, without) = (total(true), total(false));
    eprintln!("probe: total {with} with it, {without} without");
    assert!(with < without);
}

/// Issue #46: search is never worse than best-of, at any size and time limit. On 110,000
/// buffers (above best-of's `SCALE_FROM`, past `EXACT_LIMIT`: the LNS path) with no time
/// at all, a few milliseconds and half a second, its plan is checked and its arena is at
/// most best-of's. (Issue #18 had a spent limit cut the greedy start short: a valid plan,
/// soon, but larger than best-of's.)
#[test]
fn search_is_never_worse_than_best_of_at_scale() {
    let n = 110_000u64;
    let buffers: Vec<Buffer> = (0..n)
        .map(|i| {
            Buffer::new(
                format!("b{i}"),
                1 + i * 7919 % 4093,
                i / 7,
                i / 7 + 1 + i % 97,
            )
        })
        .collect();
    let problem = Problem::from_buffers(buffers).unwrap();
    let full = BestOf.plan(&problem).unwrap().arena_bytes.unwrap();
    for limit in [
        Duration::ZERO,
        Duration::from_millis(5),
        Duration::from_millis(500),
    ] {
        for threads in [1, 2] {
            let search = Search {
                time_limit: limit,
                threads,
                ..Search::default()
            };
            let outcome = search.run(&problem, None).unwrap();
            let report = memplan::checker::check(&problem, &outcome.plan);
            assert!(report.is_valid(), "{:?}", report.violations.first());
            assert_eq!(report.arena_bytes, Some(outcome.arena));
            assert!(
                outcome.arena <= full,
                "{limit:?}, {threads} threads: search {} > best-of {full}",
                outcome.arena
            );
        }
    }
}

/// Sizes in KiB with alignment 1 (as in the MiniMalloc suite): every compacted arena is a
/// multiple of 1,024, so an exhausted search at the bound raises it by 1,024 bytes, not by
/// one (which would need 1,024 refutations of the same plans for one real step).
#[test]
fn the_bound_moves_in_steps_of_the_sizes_gcd_when_alignments_divide_it() {
    // Optimum 43 against max-live 42 (see `decompose_reduces_search_nodes_on_independent_parts`).
    let unit = ablation_instance(220, 16);
    let buffers: Vec<Buffer> = unit
        .buffers()
        .iter()
        .map(|b| {
            Buffer::new(
                b.name.clone(),
                b.size * 1024,
                b.lifetime.start,
                b.lifetime.end,
            )
        })
        .collect();
    let problem = Problem::from_buffers(buffers).unwrap();
    assert_eq!(bound::max_live(&problem), Some(42 * 1024));
    // Without restarts one thread searches at the bound only (the prover), so the bound
    // rises by refutations; stopped at any node count, it is a multiple of 1,024.
    let mut raised = 0;
    for limit in (1..=400).step_by(3) {
        let search = Search {
            rules: Rules {
                restarts: false,
                ..Rules::DEFAULT
            },
            node_limit: Some(limit),
            ..exact()
        };
        let outcome = run(&search, &problem);
        assert_eq!(outcome.lower_bound % 1024, 0, "node limit {limit}");
        raised += usize::from(outcome.lower_bound > 42 * 1024);
        if outcome.proven_optimal {
            assert_eq!(outcome.arena, 43 * 1024);
        }
    }
    assert!(raised > 0, "no run refuted max-live");
}
