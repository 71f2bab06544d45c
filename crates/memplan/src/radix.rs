//! A stable sort by a `u64` key in linear time, for the sweeps over millions of lifetime
//! events (issue #18: at 10^7 buffers, comparison sorts of the events were most of the
//! time of the bound, the checker and the chronological greedy).
//!
//! Least-significant-digit radix sort, one byte per pass, skipping the bytes in which all
//! keys agree: times below 2^24 take three passes whatever the number of items. Each pass
//! reads the items once and writes them once, in order within each of 256 buckets, so the
//! memory traffic is sequential but for the 256 write cursors. Memory: one scratch copy
//! of the items.
//!
//! Also a radix heap ([`MonotoneQueue`]) for the sweeps' "what ends by now?" queues.

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

/// A min-queue of `(key, value)` whose keys never go below the last key taken (a *radix
/// heap*): the sweeps' queue of live lifetimes by end, where every end pushed lies above
/// the current step and every end taken at or below it. Entries sit in 65 buckets by the
/// highest bit in which their key differs from the last key taken (bucket 0: equal to
/// it); taking refills bucket 0 from the lowest non-empty bucket, whose entries all move
/// to lower buckets. An entry moves at most 64 times and is compared with no other, so a
/// queue of `k` entries costs `O(1)` amortized per operation for keys below 2^64, against
/// a binary heap's `O(log k)` cache-unfriendly sifts (issue #18: at 10^7 buffers with
/// ~20,000 live, the binary heaps were a fifth of `search --time-limit 5`'s planning and
/// checking).
pub(crate) struct MonotoneQueue<T> {
    /// The last key taken (0 before any).
    last: u64,
    buckets: Vec<Vec<(u64, T)>>,
    /// The least key in each bucket (`u64::MAX` when empty): a bucket is not scanned to
    /// learn that nothing in it is due yet.
    mins: [u64; 65],
}

impl<T> MonotoneQueue<T> {
    /// An empty queue.
    pub(crate) fn new() -> MonotoneQueue<T> {
        MonotoneQueue {
            last: 0,
            buckets: (0..65).map(|_| Vec::new()).collect(),
            mins: [u64::MAX; 65],
        }
    }

    fn bucket(&self, key: u64) -> usize {
        64 - (key ^ self.last).leading_zeros() as usize
    }

    /// Adds `value` under `key`, which must not be below the last key taken (panics
    /// otherwise: the queue would hand entries out of order).
    pub(crate) fn push(&mut self, key: u64, value: T) {
        assert!(
            key >= self.last,
            "a monotone queue's key went below the last taken"
        );
        self.put(key, value);
    }

    fn put(&mut self, key: u64, value: T) {
        let b = self.bucket(key);
        self.buckets[b].push((key, value));
        self.mins[b] = self.mins[b].min(key);
    }

    /// Takes every entry whose key is at most `limit`, in order of key (equal keys in
    /// any order), handing each value to `f`.
    pub(crate) fn pop_until(&mut self, limit: u64, mut f: impl FnMut(T)) {
        loop {
            if self.buckets[0].is_empty() {
                let Some(i) = (1..65).find(|&i| !self.buckets[i].is_empty()) else {
                    return;
                };
                let min = self.mins[i];
                if min > limit {
                    // Not taken: `last` stays, so that keys below `min` may still come.
                    return;
                }
                self.last = min;
                self.mins[i] = u64::MAX;
                let mut moved = std::mem::take(&mut self.buckets[i]);
                for (key, value) in moved.drain(..) {
                    self.put(key, value);
                }
                self.buckets[i] = moved;
            }
            if self.last > limit {
                return;
            }
            self.mins[0] = u64::MAX;
            for (_, value) in self.buckets[0].drain(..) {
                f(value);
            }
        }
    }

    /// How many entries it holds.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.buckets.iter().map(Vec::len).sum()
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

    proptest! {
        #[test]
        fn monotone_queue_takes_like_a_binary_heap(
            steps in prop::collection::vec(
                (prop_oneof![0u64..4, 0u64..1_000, 0u64..(1 << 40)], 0u64..1_000, 0usize..4),
                0..400,
            ),
        ) {
            // A sweep: at each step, take every entry due by `now`, then push entries due
            // later (`now + 1 + delay`); `now` grows.
            let mut queue = MonotoneQueue::new();
            let mut heap = std::collections::BinaryHeap::new();
            let mut now = 0u64;
            let mut id = 0u32;
            for (advance, delay, pushes) in steps {
                now = now.saturating_add(advance);
                let mut taken = Vec::new();
                queue.pop_until(now, |v| taken.push(v));
                let mut expected = Vec::new();
                while let Some(&std::cmp::Reverse((key, v))) = heap.peek() {
                    if key > now {
                        break;
                    }
                    heap.pop();
                    expected.push((key, v));
                }
                // In order of key; equal keys in any order.
                let keys: Vec<u64> = expected.iter().map(|e| e.0).collect();
                let mut got: Vec<(u64, u32)> = taken
                    .iter()
                    .map(|&v| *expected.iter().find(|e| e.1 == v).expect("taken only what is due"))
                    .collect();
                prop_assert_eq!(got.iter().map(|e| e.0).collect::<Vec<_>>(), keys);
                got.sort_unstable();
                expected.sort_unstable();
                prop_assert_eq!(got, expected);
                for k in 0..pushes {
                    let key = now.saturating_add(1 + delay * k as u64);
                    queue.push(key, id);
                    heap.push(std::cmp::Reverse((key, id)));
                    id += 1;
                }
                prop_assert_eq!(queue.len(), heap.len());
            }
        }
    }

    #[test]
    #[should_panic(expected = "below the last taken")]
    fn monotone_queue_refuses_a_key_below_the_last_taken() {
        let mut queue = MonotoneQueue::new();
        queue.push(10, ());
        queue.pop_until(10, |()| {});
        queue.push(9, ());
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
