//! The problem: buffers with sizes and lifetimes, and what may never share bytes.
//!
//! This is the narrow waist of memplan. Front-ends (CSV, graphs, traces) produce a
//! [`Problem`]; planners read only a `Problem` and produce a [`crate::Plan`]; the
//! [`crate::checker`] judges a plan against the `Problem` alone.
//!
//! ```text
//!  address
//!    ▲
//!  12┤        ┌───────────────────────┐
//!    │        │          b4           │
//!   8┤┌──────────────┐──────────────────────────┐
//!    ││      b3      │        b5               │
//!   4┤└──────┬───────┴─┬──────────────┘──────────┘
//!    ││  b1  │   b2    │
//!   0┼┴──────┴─────────┴──────────────────────────▶ time
//!    0       3         9    12      21   ...
//! ```
//! Two buffers may share addresses only when their lifetimes do not overlap
//! (`b1` and `b2` above) and they are not an explicit conflict pair.
//!
//! A buffer may have size 0 (ExecuTorch passes zero-size tensor specs, e.g. 106 in
//! ResNet-50): it occupies no byte, so it shares bytes with nothing; see [`Buffer`].

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use crate::fxhash::{hash_str, FxHashMap};
use std::fmt;

/// Index of a buffer inside one [`Problem`]: `problem.buffers()[id.index()]`.
///
/// Ids are dense (`0..problem.len()`); names are for input, output and messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BufferId(pub u32);

impl BufferId {
    /// The position of this buffer in [`Problem::buffers`].
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A half-open interval of steps `[start, end)`.
///
/// Invariant (checked by [`Lifetime::new`] and [`Problem::new`]): `start < end`.
/// A buffer that ends at step `t` and one that starts at `t` are never live together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Lifetime {
    /// First step the buffer is live (inclusive).
    pub start: u64,
    /// First step the buffer is no longer live (exclusive).
    pub end: u64,
}

impl Lifetime {
    /// `[start, end)`, or `None` when `start >= end` (an empty lifetime).
    pub fn new(start: u64, end: u64) -> Option<Lifetime> {
        (start < end).then_some(Lifetime { start, end })
    }

    /// Number of steps covered.
    pub fn len(self) -> u64 {
        self.end - self.start
    }

    /// Always false for a lifetime that satisfies the invariant.
    pub fn is_empty(self) -> bool {
        self.start >= self.end
    }

    /// True when the two intervals share at least one step.
    pub fn overlaps(self, other: Lifetime) -> bool {
        self.start < other.end && other.start < self.end
    }

    /// The common steps of two intervals, if any.
    pub fn intersection(self, other: Lifetime) -> Option<Lifetime> {
        Lifetime::new(self.start.max(other.start), self.end.min(other.end))
    }
}

impl fmt::Display for Lifetime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}, {})", self.start, self.end)
    }
}

/// One buffer (a tensor, an allocation) to be given an offset in the arena.
///
/// Contract, enforced by [`Problem::new`]:
/// - `size >= 0`: a *zero-size* buffer is allowed (see below);
/// - `lifetime.start < lifetime.end`;
/// - `gaps` are sorted, pairwise disjoint, non-empty, and lie strictly inside the
///   lifetime in the sense that they never cover all of it; during a gap the buffer
///   holds nothing and its bytes may be used by others (minimalloc's `gaps` column);
/// - `alignment >= 1`: the offset must be a multiple of it;
/// - a `fixed_offset`, when present, is a multiple of `alignment` and
///   `fixed_offset + size` fits in a `u64`.
///
/// # Zero-size buffers
///
/// A buffer of size 0 occupies the empty address range `[offset, offset)`: it never
/// shares a byte with anything, so it never makes an overlap or a conflict-pair violation,
/// whatever its lifetime, gaps and conflict pairs. Everything else still applies: its
/// lifetime is non-empty, its offset is a multiple of its alignment and equals its fixed
/// offset when it has one. The arena stays `max(offset + size)` over all buffers, which
/// for a zero-size buffer is its offset: every buffer's range, empty or not, lies inside
/// `[0, arena]` (a pointer to a zero-size buffer is at most one past the arena's end).
/// Every planner puts a zero-size buffer without a fixed offset at offset 0 (a multiple of
/// every alignment) and places the other buffers as if the zero-size ones were absent, so
/// they add nothing to the arena; only a zero-size buffer *fixed* above the others' top
/// raises it, to its fixed offset. They add nothing to the max-live bound either.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Buffer {
    /// Name from the input (minimalloc `id`, tensor name); unique within a problem.
    pub name: String,
    /// Bytes occupied while live; 0 for a buffer that occupies nothing.
    pub size: u64,
    /// Steps during which the buffer holds data (minus its `gaps`).
    pub lifetime: Lifetime,
    /// Sub-intervals of `lifetime` during which the buffer is inactive.
    pub gaps: Vec<Lifetime>,
    /// The offset must be a multiple of this.
    pub alignment: u64,
    /// A pre-assigned offset that every plan must keep.
    pub fixed_offset: Option<u64>,
    /// A suggested offset (minimalloc `hint`); planners may ignore it.
    pub hint: Option<u64>,
}

impl Buffer {
    /// A buffer with alignment 1, no gaps, no fixed offset and no hint.
    pub fn new(name: impl Into<String>, size: u64, start: u64, end: u64) -> Buffer {
        Buffer {
            name: name.into(),
            size,
            lifetime: Lifetime { start, end },
            gaps: Vec::new(),
            alignment: 1,
            fixed_offset: None,
            hint: None,
        }
    }

    /// The maximal intervals during which the buffer is live: its lifetime minus its gaps,
    /// in increasing order. Never empty for a buffer that satisfies the contract.
    pub fn live_segments(&self) -> Vec<Lifetime> {
        let mut segments = Vec::with_capacity(self.gaps.len() + 1);
        let mut cursor = self.lifetime.start;
        for gap in &self.gaps {
            if let Some(segment) = Lifetime::new(cursor, gap.start) {
                segments.push(segment);
            }
            cursor = cursor.max(gap.end);
        }
        if let Some(segment) = Lifetime::new(cursor, self.lifetime.end) {
            segments.push(segment);
        }
        segments
    }

    /// Calls `f` with each of [`Buffer::live_segments`], in order, without allocating when
    /// the buffer has no gaps.
    pub fn for_each_live_segment(&self, mut f: impl FnMut(Lifetime)) {
        if self.gaps.is_empty() {
            f(self.lifetime);
        } else {
            self.live_segments().into_iter().for_each(f);
        }
    }

    /// True when the two buffers are live at a common step (gaps taken into account).
    pub fn live_together(&self, other: &Buffer) -> bool {
        if !self.lifetime.overlaps(other.lifetime) {
            return false;
        }
        if self.gaps.is_empty() && other.gaps.is_empty() {
            return true;
        }
        let mine = self.live_segments();
        let theirs = other.live_segments();
        mine.iter().any(|a| theirs.iter().any(|b| a.overlaps(*b)))
    }
}

/// What is wrong with a set of buffers, naming the buffer and what would fix it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProblemError {
    #[error("buffer '{name}': lifetime [{start}, {end}) is empty; the end must be greater than the start (the end is exclusive)")]
    EmptyLifetime { name: String, start: u64, end: u64 },
    #[error("buffer '{name}': alignment is 0; use 1 for no alignment")]
    ZeroAlignment { name: String },
    #[error(
        "buffer '{name}': fixed offset {offset} is not a multiple of its alignment {alignment}"
    )]
    MisalignedFixedOffset {
        name: String,
        offset: u64,
        alignment: u64,
    },
    #[error("buffer '{name}': fixed offset {offset} + size {size} overflows 64 bits")]
    FixedOffsetOverflow {
        name: String,
        offset: u64,
        size: u64,
    },
    #[error("buffer '{name}': gap {gap} must be non-empty, inside the lifetime {lifetime}, sorted and disjoint from the other gaps, and must not cover the whole lifetime")]
    BadGap {
        name: String,
        gap: Lifetime,
        lifetime: Lifetime,
    },
    #[error(
        "buffer name '{name}' is used twice (buffers {first} and {second}); names must be unique"
    )]
    DuplicateName {
        name: String,
        first: usize,
        second: usize,
    },
    #[error(
        "conflict pair ({a}, {b}) names buffer {missing}, but the problem has only {len} buffers"
    )]
    ConflictOutOfRange {
        a: u32,
        b: u32,
        missing: u32,
        len: usize,
    },
    #[error("conflict pair names buffer '{name}' twice; a buffer cannot conflict with itself")]
    SelfConflict { name: String },
    #[error("too many buffers ({len}); at most {} are supported", u32::MAX)]
    TooManyBuffers { len: usize },
}

/// A static memory-planning problem: buffers, plus pairs that may never share bytes.
///
/// Contract: every buffer satisfies [`Buffer`]'s contract, names are unique, there are at
/// most `u32::MAX` buffers, and every conflict pair names two different existing buffers.
/// Conflict pairs are stored normalised (`a < b`), sorted, without duplicates.
///
/// Two buffers *must not share bytes* when they are live together
/// ([`Buffer::live_together`]) or form a conflict pair. A [`crate::Plan`] is valid when
/// no two such buffers overlap in address, every offset honours its buffer's alignment and
/// fixed offset; [`crate::checker`] decides this. A zero-size buffer overlaps nothing
/// (see [`Buffer`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Problem {
    buffers: Vec<Buffer>,
    conflicts: Vec<(BufferId, BufferId)>,
}

impl Problem {
    /// Validates the buffers and the conflict pairs (given as indices into `buffers`).
    pub fn new(
        buffers: Vec<Buffer>,
        conflicts: impl IntoIterator<Item = (BufferId, BufferId)>,
    ) -> Result<Problem, ProblemError> {
        if buffers.len() > u32::MAX as usize {
            return Err(ProblemError::TooManyBuffers { len: buffers.len() });
        }
        let mut seen = NameIndex::with_capacity(buffers.len());
        for (index, buffer) in buffers.iter().enumerate() {
            validate_buffer(buffer)?;
            if let Some(first) =
                seen.insert(&buffer.name, index as u32, |j| &buffers[j as usize].name)
            {
                return Err(ProblemError::DuplicateName {
                    name: buffer.name.clone(),
                    first: first as usize,
                    second: index,
                });
            }
        }
        Problem::with_valid_buffers(buffers, conflicts)
    }

    /// [`Problem::new`] for buffers whose names the caller has already found unique
    /// (`io::csv::read_problem`): every other check is made.
    pub(crate) fn with_unique_names(
        buffers: Vec<Buffer>,
        conflicts: impl IntoIterator<Item = (BufferId, BufferId)>,
    ) -> Result<Problem, ProblemError> {
        if buffers.len() > u32::MAX as usize {
            return Err(ProblemError::TooManyBuffers { len: buffers.len() });
        }
        for buffer in &buffers {
            validate_buffer(buffer)?;
        }
        Problem::with_valid_buffers(buffers, conflicts)
    }

    /// [`Problem::new`] with the conflict pairs in a vector that becomes the problem's own
    /// (normalised in place: no copy, which matters for the millions of pairs a graph
    /// front-end may list).
    pub fn with_conflict_vec(
        buffers: Vec<Buffer>,
        conflicts: Vec<(BufferId, BufferId)>,
    ) -> Result<Problem, ProblemError> {
        let mut problem = Problem::new(buffers, [])?;
        problem.conflicts = conflicts;
        problem.normalise_conflicts()?;
        Ok(problem)
    }

    /// The conflict pairs' checks, the buffers being valid and their names unique.
    fn with_valid_buffers(
        buffers: Vec<Buffer>,
        conflicts: impl IntoIterator<Item = (BufferId, BufferId)>,
    ) -> Result<Problem, ProblemError> {
        let conflicts = conflicts.into_iter();
        let mut pairs = Vec::with_capacity(conflicts.size_hint().0);
        pairs.extend(conflicts);
        let mut problem = Problem {
            buffers,
            conflicts: pairs,
        };
        problem.normalise_conflicts()?;
        Ok(problem)
    }

    /// Checks every conflict pair against the buffers, orders each pair, then sorts them
    /// (when they are not sorted already) and drops repeats.
    fn normalise_conflicts(&mut self) -> Result<(), ProblemError> {
        let len = self.buffers.len();
        for pair in &mut self.conflicts {
            let (a, b) = *pair;
            for id in [a, b] {
                if id.index() >= len {
                    return Err(ProblemError::ConflictOutOfRange {
                        a: a.0,
                        b: b.0,
                        missing: id.0,
                        len,
                    });
                }
            }
            if a == b {
                return Err(ProblemError::SelfConflict {
                    name: self.buffers[a.index()].name.clone(),
                });
            }
            *pair = (a.min(b), a.max(b));
        }
        if self.conflicts.windows(2).any(|w| w[0] > w[1]) {
            self.conflicts.sort_unstable();
        }
        self.conflicts.dedup();
        Ok(())
    }

    /// A problem without conflict pairs.
    pub fn from_buffers(buffers: Vec<Buffer>) -> Result<Problem, ProblemError> {
        Problem::new(buffers, [])
    }

    /// The buffers, indexed by [`BufferId`].
    pub fn buffers(&self) -> &[Buffer] {
        &self.buffers
    }

    /// The buffer with this id. Panics if the id is not from this problem.
    pub fn buffer(&self, id: BufferId) -> &Buffer {
        &self.buffers[id.index()]
    }

    /// Explicit conflict pairs, normalised `(a, b)` with `a < b`, sorted, unique.
    pub fn conflicts(&self) -> &[(BufferId, BufferId)] {
        &self.conflicts
    }

    /// Number of buffers.
    pub fn len(&self) -> usize {
        self.buffers.len()
    }

    /// True when there are no buffers.
    pub fn is_empty(&self) -> bool {
        self.buffers.is_empty()
    }

    /// Ids of all buffers in order.
    pub fn ids(&self) -> impl ExactSizeIterator<Item = BufferId> + '_ {
        (0..self.buffers.len() as u32).map(BufferId)
    }

    /// A map from buffer name to id, for matching rows of other files to this problem.
    pub fn ids_by_name(&self) -> NameIndex<'_> {
        let mut index = NameIndex::with_capacity(self.buffers.len());
        for (i, b) in self.buffers.iter().enumerate() {
            // The names of a problem are unique.
            index.insert(&b.name, i as u32, |j| &self.buffers[j as usize].name);
        }
        index.names = Some(&self.buffers);
        index
    }

    /// Sum of all sizes (the arena of a plan that shares nothing), or `None` on overflow.
    pub fn total_size(&self) -> Option<u64> {
        self.buffers
            .iter()
            .try_fold(0u64, |sum, b| sum.checked_add(b.size))
    }

    /// The same problem with every alignment raised to a multiple of `alignment`
    /// (the least common multiple of the buffer's own and this one).
    ///
    /// Fails when a fixed offset does not honour the new alignment or the alignment
    /// overflows.
    pub fn with_alignment(&self, alignment: u64) -> Result<Problem, ProblemError> {
        self.with_alignments(&vec![alignment; self.buffers.len()])
    }

    /// The same problem with buffer `i`'s alignment raised to a multiple of
    /// `alignments[i]` (missing entries: unchanged); fails like [`Problem::with_alignment`].
    pub fn with_alignments(&self, alignments: &[u64]) -> Result<Problem, ProblemError> {
        let mut buffers = self.buffers.clone();
        for (buffer, &alignment) in buffers.iter_mut().zip(alignments) {
            buffer.alignment =
                lcm(buffer.alignment, alignment).ok_or_else(|| ProblemError::ZeroAlignment {
                    name: buffer.name.clone(),
                })?;
        }
        Problem::new(buffers, self.conflicts.iter().copied())
    }

    /// True when some buffer has size 0.
    pub fn has_zero_size(&self) -> bool {
        self.buffers.iter().any(|b| b.size == 0)
    }

    /// The problem without its zero-size buffers (the conflict pairs naming them dropped,
    /// the others renumbered), and for each of its buffers the id it has in `self`
    /// (increasing). The buffers keep their order; a subset of a valid problem is valid, so
    /// nothing is checked again.
    pub fn without_zero_size(&self) -> (Problem, Vec<u32>) {
        let mut new_id = vec![u32::MAX; self.buffers.len()];
        let mut kept = Vec::with_capacity(self.buffers.len());
        let mut buffers = Vec::with_capacity(self.buffers.len());
        for (i, buffer) in self.buffers.iter().enumerate() {
            if buffer.size > 0 {
                new_id[i] = kept.len() as u32;
                kept.push(i as u32);
                buffers.push(buffer.clone());
            }
        }
        // The renumbering keeps the order, so the pairs stay normalised, sorted, unique.
        let conflicts = self
            .conflicts
            .iter()
            .filter_map(|&(a, b)| {
                let (a, b) = (new_id[a.index()], new_id[b.index()]);
                (a != u32::MAX && b != u32::MAX).then_some((BufferId(a), BufferId(b)))
            })
            .collect();
        (Problem { buffers, conflicts }, kept)
    }
}

pub(crate) fn validate_buffer(buffer: &Buffer) -> Result<(), ProblemError> {
    let name = || buffer.name.clone();
    let lifetime = buffer.lifetime;
    if lifetime.is_empty() {
        return Err(ProblemError::EmptyLifetime {
            name: name(),
            start: lifetime.start,
            end: lifetime.end,
        });
    }
    if buffer.alignment == 0 {
        return Err(ProblemError::ZeroAlignment { name: name() });
    }
    if let Some(offset) = buffer.fixed_offset {
        if offset % buffer.alignment != 0 {
            return Err(ProblemError::MisalignedFixedOffset {
                name: name(),
                offset,
                alignment: buffer.alignment,
            });
        }
        if offset.checked_add(buffer.size).is_none() {
            return Err(ProblemError::FixedOffsetOverflow {
                name: name(),
                offset,
                size: buffer.size,
            });
        }
    }
    let mut cursor = lifetime.start;
    let mut covered = 0u64;
    for (i, &gap) in buffer.gaps.iter().enumerate() {
        let inside = gap.start < gap.end
            && gap.start >= lifetime.start
            && gap.end <= lifetime.end
            && (i == 0 || gap.start >= cursor);
        if !inside {
            return Err(ProblemError::BadGap {
                name: name(),
                gap,
                lifetime,
            });
        }
        cursor = gap.end;
        covered += gap.len();
    }
    if covered >= lifetime.len() {
        let gap = buffer.gaps[buffer.gaps.len() - 1];
        return Err(ProblemError::BadGap {
            name: name(),
            gap,
            lifetime,
        });
    }
    Ok(())
}

/// Least common multiple, `None` when zero is involved or it overflows.
pub(crate) fn lcm(a: u64, b: u64) -> Option<u64> {
    if a == 0 || b == 0 {
        return None;
    }
    let (mut x, mut y) = (a, b);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    (a / x).checked_mul(b)
}

/// Names to indices, without keeping a copy of each name: a fast hash of the name maps to
/// the first index with that hash, and names whose hash an earlier, different name took
/// (rare, but easy to craft) go to a second, collision-resistant map of their own.
/// Built by [`NameIndex::insert`]; [`Problem::ids_by_name`] gives one to look names up in.
pub struct NameIndex<'p> {
    by_hash: FxHashMap<u64, u32>,
    collided: HashMap<String, u32>,
    /// The buffers the indices point into, for [`NameIndex::get`].
    names: Option<&'p [Buffer]>,
}

impl<'p> NameIndex<'p> {
    pub(crate) fn with_capacity(n: usize) -> NameIndex<'p> {
        let mut by_hash = FxHashMap::default();
        by_hash.reserve(n);
        NameIndex {
            by_hash,
            collided: HashMap::new(),
            names: None,
        }
    }

    /// Records `name` as `index`, unless an equal name was recorded before: then returns
    /// that one's index (and records nothing). `name_of(j)` is the name recorded as `j`.
    pub(crate) fn insert<'n>(
        &mut self,
        name: &str,
        index: u32,
        name_of: impl Fn(u32) -> &'n str,
    ) -> Option<u32> {
        match self.by_hash.entry(hash_str(name)) {
            Entry::Vacant(slot) => {
                slot.insert(index);
                None
            }
            Entry::Occupied(slot) => {
                let j = *slot.get();
                if name_of(j) == name {
                    return Some(j);
                }
                match self.collided.entry(name.to_string()) {
                    Entry::Occupied(first) => Some(*first.get()),
                    Entry::Vacant(slot) => {
                        slot.insert(index);
                        None
                    }
                }
            }
        }
    }

    /// The id of the buffer named `name`, if any.
    pub fn get(&self, name: &str) -> Option<BufferId> {
        let names = self.names?;
        let &j = self.by_hash.get(&hash_str(name))?;
        if names[j as usize].name == name {
            Some(BufferId(j))
        } else {
            self.collided.get(name).map(|&j| BufferId(j))
        }
    }

    /// Number of names recorded.
    pub fn len(&self) -> usize {
        self.by_hash.len() + self.collided.len()
    }

    /// True when no name is recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifetimes_are_half_open() {
        let a = Lifetime::new(0, 3).unwrap();
        let b = Lifetime::new(3, 9).unwrap();
        assert!(!a.overlaps(b));
        assert!(a.overlaps(Lifetime::new(2, 4).unwrap()));
        assert_eq!(Lifetime::new(5, 5), None);
    }

    #[test]
    fn gaps_split_a_lifetime() {
        let mut b = Buffer::new("x", 4, 0, 10);
        b.gaps = vec![Lifetime { start: 2, end: 4 }, Lifetime { start: 6, end: 7 }];
        assert_eq!(
            b.live_segments(),
            vec![
                Lifetime { start: 0, end: 2 },
                Lifetime { start: 4, end: 6 },
                Lifetime { start: 7, end: 10 }
            ]
        );
        let inside_gap = Buffer::new("y", 4, 2, 4);
        assert!(!b.live_together(&inside_gap));
        assert!(b.live_together(&Buffer::new("z", 4, 3, 5)));
    }

    #[test]
    fn invalid_buffers_are_rejected_by_name() {
        let mut unaligned = Buffer::new("a", 4, 0, 1);
        unaligned.alignment = 0;
        let err = Problem::from_buffers(vec![unaligned]).unwrap_err();
        assert!(err.to_string().contains("'a'"), "{err}");
        let err = Problem::from_buffers(vec![Buffer::new("b", 1, 4, 4)]).unwrap_err();
        assert!(matches!(err, ProblemError::EmptyLifetime { .. }));
        let err = Problem::from_buffers(vec![Buffer::new("c", 1, 0, 1), Buffer::new("c", 1, 0, 1)])
            .unwrap_err();
        assert!(matches!(err, ProblemError::DuplicateName { .. }));
        let mut whole_gap = Buffer::new("d", 1, 0, 4);
        whole_gap.gaps = vec![Lifetime { start: 0, end: 4 }];
        assert!(matches!(
            Problem::from_buffers(vec![whole_gap]).unwrap_err(),
            ProblemError::BadGap { .. }
        ));
        let mut fixed = Buffer::new("e", 8, 0, 4);
        fixed.alignment = 16;
        fixed.fixed_offset = Some(8);
        assert!(matches!(
            Problem::from_buffers(vec![fixed]).unwrap_err(),
            ProblemError::MisalignedFixedOffset { .. }
        ));
    }

    #[test]
    fn zero_size_buffers_are_accepted_with_the_rest_of_the_contract() {
        let mut pinned = Buffer::new("pinned", 0, 0, 4);
        pinned.alignment = 16;
        pinned.fixed_offset = Some(u64::MAX - 15);
        let p = Problem::from_buffers(vec![Buffer::new("empty", 0, 2, 3), pinned]).unwrap();
        assert_eq!(p.total_size(), Some(0));
        let err = Problem::from_buffers(vec![Buffer::new("e", 0, 3, 3)]).unwrap_err();
        assert!(matches!(err, ProblemError::EmptyLifetime { .. }));
        let mut misaligned = Buffer::new("m", 0, 0, 1);
        misaligned.alignment = 8;
        misaligned.fixed_offset = Some(4);
        assert!(matches!(
            Problem::from_buffers(vec![misaligned]).unwrap_err(),
            ProblemError::MisalignedFixedOffset { .. }
        ));
    }

    #[test]
    fn without_zero_size_keeps_the_rest_and_renumbers_conflicts() {
        let buffers = vec![
            Buffer::new("a", 4, 0, 2),
            Buffer::new("z", 0, 0, 2),
            Buffer::new("b", 4, 5, 6),
            Buffer::new("c", 2, 5, 6),
        ];
        let p = Problem::new(
            buffers,
            [
                (BufferId(0), BufferId(2)),
                (BufferId(1), BufferId(3)),
                (BufferId(0), BufferId(3)),
            ],
        )
        .unwrap();
        let (reduced, kept) = p.without_zero_size();
        assert_eq!(kept, vec![0, 2, 3]);
        let names: Vec<&str> = reduced.buffers().iter().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(
            reduced.conflicts(),
            &[(BufferId(0), BufferId(1)), (BufferId(0), BufferId(2))]
        );
        assert_eq!(
            Problem::new(reduced.buffers().to_vec(), reduced.conflicts().to_vec()),
            Ok(reduced)
        );
    }

    #[test]
    fn conflicts_are_normalised() {
        let buffers = vec![Buffer::new("a", 1, 0, 1), Buffer::new("b", 1, 5, 6)];
        let p = Problem::new(
            buffers.clone(),
            [(BufferId(1), BufferId(0)), (BufferId(0), BufferId(1))],
        )
        .unwrap();
        assert_eq!(p.conflicts(), &[(BufferId(0), BufferId(1))]);
        assert!(Problem::new(buffers.clone(), [(BufferId(0), BufferId(2))]).is_err());
        assert!(Problem::new(buffers, [(BufferId(0), BufferId(0))]).is_err());
    }

    #[test]
    fn alignment_is_raised_to_a_common_multiple() {
        let mut b = Buffer::new("a", 3, 0, 1);
        b.alignment = 4;
        let p = Problem::from_buffers(vec![b])
            .unwrap()
            .with_alignment(6)
            .unwrap();
        assert_eq!(p.buffers()[0].alignment, 12);
    }
}
