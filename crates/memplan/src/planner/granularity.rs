//! The granularity of a problem's addresses ([`granularity_and_unfixed`]), shared by the
//! exact search and the placement engine.

use crate::problem::Problem;

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// `(g, fixed_top, unfixed)`: the problem's *granularity* `g`, the highest top of a fixed
/// buffer (0 when none) and the number of buffers without a fixed offset.
///
/// Every offset a greedy placement or a compacted plan gives is a multiple of `g`: `g`
/// divides every size and fixed offset, and every alignment of an unfixed buffer either
/// divides `g` or is a multiple of it. So `search` moves its caps and bounds in steps of
/// `g`, and the placement engine counts addresses in units of `g`.
///
/// `g` starts as the gcd of the sizes and the fixed offsets. An alignment that divides it
/// changes nothing (rounding a multiple of `g` up to a multiple of a divisor of `g` leaves
/// it as it is), so only the others are folded in, until every alignment of an unfixed
/// buffer divides `g` or is a multiple of it: on the MiniMalloc suite (sizes in KiB,
/// alignment 1) `g` is 1,024, not 1. One pass over the buffers while no alignment changes
/// `g` (at 10^7 buffers each pass, with a division per buffer, took about 0.1 s of
/// `search --time-limit 5`).
pub(crate) fn granularity_and_unfixed(problem: &Problem) -> (u64, u64, usize) {
    // gcd(g, x), without a division in the common cases.
    let fold = |g: u64, x: u64| {
        if x == 0 || g == 1 {
            g
        } else if g == 0 {
            x
        } else if g.is_power_of_two() {
            g.min(1 << x.trailing_zeros())
        } else if x.is_multiple_of(g) {
            g
        } else {
            gcd(g, x)
        }
    };
    let divides =
        |a: u64, g: u64| a <= 1 || (a.is_power_of_two() && g & (a - 1) == 0) || g.is_multiple_of(a);
    let mut g = 0;
    let mut fixed_top = 0u64;
    let mut unfixed = 0;
    // Whether some unfixed buffer's alignment may not divide the final `g`.
    let mut aligned = false;
    for b in problem.buffers() {
        g = fold(g, b.size);
        match b.fixed_offset {
            Some(offset) => {
                g = fold(g, offset);
                fixed_top = fixed_top.max(offset.saturating_add(b.size));
            }
            None => {
                unfixed += 1;
                aligned |= b.alignment > 1;
            }
        }
    }
    // Each pass either leaves `g` as it is (done) or at most halves it: at most 64 passes.
    while aligned {
        let before = g;
        for b in problem.buffers() {
            if b.fixed_offset.is_none() && !divides(b.alignment, g) {
                g = gcd(g, b.alignment);
            }
        }
        aligned = g != before;
    }
    (g.max(1), fixed_top, unfixed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::Buffer;
    use proptest::prelude::*;

    /// `granularity` by its definition: gcd by division throughout.
    fn granularity_by_definition(problem: &Problem) -> (u64, u64, usize) {
        let mut g = 0;
        let mut fixed_top = 0u64;
        for b in problem.buffers() {
            g = gcd(g, b.size);
            if let Some(offset) = b.fixed_offset {
                g = gcd(g, offset);
                fixed_top = fixed_top.max(offset.saturating_add(b.size));
            }
        }
        loop {
            let before = g;
            for b in problem.buffers() {
                if b.fixed_offset.is_none() && g % b.alignment.max(1) != 0 {
                    g = gcd(g, b.alignment);
                }
            }
            if g == before {
                break;
            }
        }
        let unfixed = problem
            .buffers()
            .iter()
            .filter(|b| b.fixed_offset.is_none())
            .count();
        (g.max(1), fixed_top, unfixed)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn granularity_matches_its_definition(
            raw in prop::collection::vec(
                (
                    prop_oneof![Just(0u64), 1u64..5_000, (0u32..12).prop_map(|k| 1024u64 << k), (1u64..40).prop_map(|k| 768 * k)],
                    prop_oneof![Just(1u64), Just(2), Just(3), Just(8), Just(48), Just(4096)],
                    prop::option::of(0u64..64),
                ),
                1..30,
            ),
        ) {
            let buffers: Vec<Buffer> = raw
                .into_iter()
                .enumerate()
                .map(|(i, (size, alignment, fixed))| {
                    let mut b = Buffer::new(format!("b{i}"), size, i as u64, i as u64 + 1);
                    b.alignment = alignment;
                    b.fixed_offset = fixed.map(|k| k * alignment * 256);
                    b
                })
                .collect();
            let problem = Problem::from_buffers(buffers).unwrap();
            prop_assert_eq!(
                granularity_and_unfixed(&problem),
                granularity_by_definition(&problem)
            );
        }
    }
}
