//! `greedy-breadth`: Pisarchyk & Lee's greedy by breadth.

use std::cmp::Reverse;

use super::placement::{for_each_segment, plan_in_order, Fit};
use super::{PlanError, Planner};
use crate::plan::Plan;
use crate::problem::Problem;

/// `greedy-breadth`: the busiest steps first, their largest buffers first, best-fit.
///
/// Y. Pisarchyk and J. Lee, "Efficient Memory Management for Deep Neural Net Inference"
/// (2020), *greedy by breadth* (the offset-calculation variant, used by TFLite's GPU
/// delegate): the *breadth* of a step is the total size of the buffers live at it. Steps
/// are visited by breadth, descending (ties: earlier step first); at each step, the buffers
/// live there that are not placed yet are placed largest first (ties: earlier lifetime
/// start, then lower id), each best-fit as in [`super::SizeBestFit`].
///
/// Steps may run to millions, so the planner works on *elementary intervals*: the pieces
/// between consecutive live-segment endpoints, over which the set of live buffers, hence
/// the breadth, is constant. A segment tree over the intervals holds each live segment at
/// its `O(log m)` canonical nodes; visiting an interval walks root → leaf and takes (and
/// empties) every list on the way: all of those buffers are live there, so each entry is
/// taken once and the whole order costs `O(n log n)`. Zero-size buffers (live at no
/// breadth) come last, in id order: they go to offset 0 and move nothing.
///
/// ```text
///  breadth   ▁▁▃▃▇▇██▅▅▂▂      visit order: the █ interval, then ▇, ▅, ▃, ▂, ▁;
///  buffers   ━━━━━━━━          at each, place its still unplaced buffers, largest
///                ━━━━━━━━      first
///              ━━━━━━━━
/// ```
pub struct Breadth;

impl Planner for Breadth {
    fn name(&self) -> &'static str {
        "greedy-breadth"
    }

    fn description(&self) -> &'static str {
        "busiest steps first, their buffers largest first; best-fit (Pisarchyk & Lee 2020, greedy by breadth)"
    }

    fn plan(&self, problem: &Problem) -> Result<Plan, PlanError> {
        plan_in_order(problem, breadth_order(problem), Fit::Best)
    }
}

/// The order in which greedy by breadth places the buffers (all of them, fixed ones too).
fn breadth_order(problem: &Problem) -> Vec<u32> {
    let buffers = problem.buffers();
    // Live segments as (start, end, buffer).
    let mut segments: Vec<(u64, u64, u32)> = Vec::with_capacity(buffers.len());
    for (i, buffer) in buffers.iter().enumerate() {
        if buffer.size > 0 {
            for_each_segment(buffer, |s| segments.push((s.start, s.end, i as u32)));
        }
    }
    let mut points: Vec<u64> = segments.iter().flat_map(|s| [s.0, s.1]).collect();
    points.sort_unstable();
    points.dedup();
    // Elementary interval j is [points[j], points[j + 1]).
    let intervals = points.len().saturating_sub(1);
    let index = |t: u64| points.partition_point(|&p| p < t);

    // Breadth per interval by a difference array; u128 cannot overflow (n < 2^32).
    let mut delta = vec![0i128; intervals + 1];
    let mut tree: Vec<Vec<u32>> = vec![Vec::new(); 2 * intervals];
    for &(start, end, id) in &segments {
        let (a, b) = (index(start), index(end));
        let size = buffers[id as usize].size as i128;
        delta[a] += size;
        delta[b] -= size;
        let (mut l, mut r) = (a + intervals, b + intervals);
        while l < r {
            if l & 1 == 1 {
                tree[l].push(id);
                l += 1;
            }
            if r & 1 == 1 {
                r -= 1;
                tree[r].push(id);
            }
            l >>= 1;
            r >>= 1;
        }
    }
    let mut breadth = Vec::with_capacity(intervals);
    let mut live = 0i128;
    for d in &delta[..intervals] {
        live += d;
        breadth.push(live);
    }
    let mut visit: Vec<(Reverse<i128>, usize)> = breadth
        .iter()
        .enumerate()
        .filter(|(_, &b)| b > 0)
        .map(|(j, &b)| (Reverse(b), j))
        .collect();
    visit.sort_unstable();

    let mut taken = vec![false; buffers.len()];
    let mut order = Vec::with_capacity(buffers.len());
    let mut here: Vec<(Reverse<u64>, u64, u32)> = Vec::new();
    for (_, j) in visit {
        here.clear();
        let mut p = j + intervals;
        while p >= 1 {
            for id in std::mem::take(&mut tree[p]) {
                if !taken[id as usize] {
                    taken[id as usize] = true;
                    let b = &buffers[id as usize];
                    here.push((Reverse(b.size), b.lifetime.start, id));
                }
            }
            p >>= 1;
        }
        here.sort_unstable();
        order.extend(here.iter().map(|&(_, _, id)| id));
    }
    order.extend((0..buffers.len() as u32).filter(|&i| buffers[i as usize].size == 0));
    debug_assert_eq!(order.len(), buffers.len());
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::Buffer;

    #[test]
    fn order_visits_the_widest_interval_first() {
        // Breadth: [0,3) 12, [3,9) 12, [9,21) 8. Ties go to the earlier interval.
        let problem = Problem::from_buffers(vec![
            Buffer::new("b1", 4, 0, 3),
            Buffer::new("b2", 4, 3, 9),
            Buffer::new("b3", 4, 0, 9),
            Buffer::new("b4", 4, 9, 21),
            Buffer::new("b5", 4, 0, 21),
        ])
        .unwrap();
        assert_eq!(breadth_order(&problem), vec![0, 2, 4, 1, 3]);
        let problem = Problem::from_buffers(vec![
            Buffer::new("small", 1, 0, 10),
            Buffer::new("big", 10, 5, 6),
            Buffer::new("mid", 5, 8, 12),
        ])
        .unwrap();
        // [5,6) has breadth 11, [8,10) 6, [10,12) 5, [0,5) 1, [6,8) 1.
        assert_eq!(breadth_order(&problem), vec![1, 0, 2]);
    }
}
