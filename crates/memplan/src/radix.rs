//! A stable sort by a `u64` key in linear time, for the sweeps over millions of lifetime
//! events (issue #18: at 10^7 buffers, comparison sorts of the events were most of the
//! time of the bound, the checker and the chronological greedy).
//!
//! Least-significant-digit radix sort, one byte per pass, skipping the bytes in which all
//! keys agree: times below 2^24 take three passes whatever the number of items. Each pass
//! reads the items once and writes them once, in order within each of 256 buckets, so the
//! memory traffic is sequential but for the 256 write cursors. Memory: one scratch copy
//! of the items.

/// Below this many items a comparison sort is faster than building eight histograms.
const SMALL: usize = 512;

/// Sorts `items` by `key`, ascending and stably (items with equal keys keep their order).
///
/// `O(n · d)` for `d` the number of bytes in which the keys differ (at most 8), plus
/// `O(n)` extra memory; `O(n log n)` comparisons below [`SMALL`] items.
pub fn sort_by_u64_key<T: Copy>(items: &mut Vec<T>, key: impl Fn(&T) -> u64) {
    let n = items.len();
    if n < SMALL {
        items.sort_by_key(|x| key(x));
        return;
    }
    let mut counts = vec![[0usize; 256]; 8];
    let (mut all_ones, mut any_ones) = (u64::MAX, 0u64);
    for item in items.iter() {
        let k = key(item);
        all_ones &= k;
        any_ones |= k;
        for (byte, count) in counts.iter_mut().enumerate() {
            count[(k >> (8 * byte)) as usize & 0xff] += 1;
        }
    }
    let varying = all_ones ^ any_ones;
    let mut scratch: Vec<T> = items.clone();
    let (mut from, mut to) = (items, &mut scratch);
    let mut in_scratch = false;
    for (byte, count) in counts.iter().enumerate() {
        let shift = 8 * byte;
        if (varying >> shift) & 0xff == 0 {
            continue;
        }
        let mut next = [0usize; 256];
        let mut total = 0;
        for (slot, &c) in next.iter_mut().zip(count.iter()) {
            *slot = total;
            total += c;
        }
        for item in from.iter() {
            let digit = (key(item) >> shift) as usize & 0xff;
            to[next[digit]] = *item;
            next[digit] += 1;
        }
        std::mem::swap(&mut from, &mut to);
        in_scratch = !in_scratch;
    }
    if in_scratch {
        // The sorted items are in `scratch` (now `from`); `to` is the caller's vector.
        to.copy_from_slice(from);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn sorts_like_the_stable_comparison_sort(
            keys in prop::collection::vec(
                prop_oneof![0u64..4, 0u64..70_000, any::<u64>()],
                0..2_000,
            ),
        ) {
            let items: Vec<(u64, usize)> = keys.into_iter().enumerate().map(|(i, k)| (k, i)).collect();
            let mut expected = items.clone();
            expected.sort_by_key(|&(k, _)| k);
            let mut sorted = items;
            sort_by_u64_key(&mut sorted, |&(k, _)| k);
            prop_assert_eq!(sorted, expected);
        }
    }

    #[test]
    fn equal_keys_keep_their_order_across_many_passes() {
        let items: Vec<(u64, u32)> = (0..5_000u32)
            .map(|i| (u64::from(i % 7) << 40 | u64::from(i % 3), i))
            .collect();
        let mut expected = items.clone();
        expected.sort_by_key(|&(k, _)| k);
        let mut sorted = items;
        sort_by_u64_key(&mut sorted, |&(k, _)| k);
        assert_eq!(sorted, expected);
    }
}
