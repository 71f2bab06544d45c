//! A small, fast, non-cryptographic hasher for the maps keyed by buffer names and
//! integers (the multiply-rotate hash of Firefox and rustc, "FxHash"): SipHash, the
//! standard default, cost about a tenth of the time of reading a CSV of 10^6 buffers.
//! It is not resistant to crafted collisions; a map fed with untrusted names also guards
//! against them where it matters (see `io::csv::read_problem`).

use std::hash::{BuildHasherDefault, Hasher};

/// The FxHash state: one word.
#[derive(Clone, Copy, Default)]
pub struct FxHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.add(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64);
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

/// Builds [`FxHasher`]s: `HashMap<K, V, FxBuild>`.
pub type FxBuild = BuildHasherDefault<FxHasher>;

/// A `HashMap` with [`FxHasher`].
pub type FxHashMap<K, V> = std::collections::HashMap<K, V, FxBuild>;

/// The [`FxHasher`] hash of a string (as `Hash for str` feeds it: bytes, then `0xff`).
pub fn hash_str(text: &str) -> u64 {
    use std::hash::BuildHasher;
    FxBuild::default().hash_one(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_strings_hash_equal_and_prefixes_differ() {
        assert_eq!(hash_str("buffer_17"), hash_str(&String::from("buffer_17")));
        // Zero-padding makes some different strings collide: users must compare names.
        assert_eq!(hash_str("a"), hash_str("a\0"));
        assert_ne!(hash_str("abcdefgh"), hash_str("abcdefgh1"));
        let mut map: FxHashMap<&str, u32> = FxHashMap::default();
        map.insert("x", 1);
        assert_eq!(map.get("x"), Some(&1));
    }
}
