//! A plan as a C header a device build can include: every tensor's offset (and address
//! when the pool's base address is known), the arena size and the alignment.
//!
//! ```c
//! /* memplan plan of model.onnx, planner best-of. Generated: do not edit. */
//! #ifndef MEMPLAN_MODEL_H
//! #define MEMPLAN_MODEL_H
//! #include <stdint.h>
//! #define MEMPLAN_ARENA_BYTES UINT64_C(14336)
//! #define MEMPLAN_ALIGNMENT UINT64_C(16)
//! #define MEMPLAN_BASE_ADDRESS UINT64_C(0x20000000)          (only with a base)
//! #define MEMPLAN_TENSOR_COUNT 2
//! /* "conv1/out" in block "conv1/out", 4096 bytes */
//! #define MEMPLAN_OFFSET_conv1_out UINT64_C(0)
//! #define MEMPLAN_SIZE_conv1_out UINT64_C(4096)
//! #define MEMPLAN_TOP_conv1_out UINT64_C(4096)
//! #define MEMPLAN_ADDRESS_conv1_out UINT64_C(0x20000000)     (only with a base)
//! #endif
//! ```
//!
//! `MEMPLAN_TOP_x` is one past the tensor's last byte, `OFFSET + SIZE` (from the arena's
//! start): its address range is `[OFFSET, TOP)`.
//!
//! **Fragmented plans** (`exclusive --fragmented`, [`crate::plan::Plan::extents`]): a
//! tensor's bytes may lie in several pieces. The header then also defines
//! `MEMPLAN_FRAGMENTED 1` and `MEMPLAN_MAX_PIECES` (the most pieces of any tensor), and
//! for *every* tensor its pieces, in the order its bytes fill them, as a count and
//! brace-enclosed initializers of equal length:
//!
//! ```c
//! /* "y" in block "b3", 96 bytes in 2 pieces */
//! #define MEMPLAN_SIZE_y UINT64_C(96)
//! #define MEMPLAN_PIECES_y 2
//! #define MEMPLAN_PIECE_OFFSETS_y { UINT64_C(64), UINT64_C(0) }
//! #define MEMPLAN_PIECE_LENGTHS_y { UINT64_C(32), UINT64_C(64) }
//! #define MEMPLAN_PIECE_ADDRESSES_y { UINT64_C(0x20000040), UINT64_C(0x20000000) }  (with a base)
//! ```
//!
//! so that `static const uint64_t y_offsets[MEMPLAN_PIECES_y] = MEMPLAN_PIECE_OFFSETS_y;`
//! works for any tensor. A tensor in one piece (a zero-size tensor is one piece of 0
//! bytes) keeps `MEMPLAN_OFFSET_`, `MEMPLAN_TOP_` and `MEMPLAN_ADDRESS_` as well; a tensor
//! in two or more pieces has no such single-range macros, so that code which would treat
//! it as contiguous does not compile. A contiguous plan's header has no piece macros.
//!
//! Only macros: a header of `static const` objects would warn (`-Wunused-const-variable`
//! is part of `-Wall` for C) in every file that includes it and uses few of them. The
//! output compiles with `-std=c99` and `-std=c11` under `-Wall -Wextra -Werror`.
//!
//! **Identifiers.** A tensor's identifier is its name with every character outside
//! `[A-Za-z0-9_]` (unicode included) replaced by `_` (an empty name becomes `tensor`),
//! after the fixed `MEMPLAN_OFFSET_` / `MEMPLAN_SIZE_` / `MEMPLAN_TOP_` /
//! `MEMPLAN_ADDRESS_` (and `MEMPLAN_PIECES_` / `MEMPLAN_PIECE_…_`) prefixes, so
//! a leading digit or a C keyword in a name is harmless. Two names that sanitise alike
//! are told apart in tensor order: the first keeps the identifier, a later one gets the
//! first free `_2`, `_3`, … suffix. The original name is in the comment above, escaped:
//! `\` and `"` as `\\` and `\"`, `*` and `?` (which could close the comment or form a
//! trigraph) and every character outside printable ASCII as `\xNN` or `\u{XXXX}`.
//! The include guard comes from the header's name the same way, upper-cased.

use std::collections::HashSet;
use std::fmt::Write as _;

use crate::plan::tensors::TensorAddress;
use crate::problem::Problem;

/// What a header says besides the tensors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeaderInfo<'a> {
    /// Names the header's origin in its first comment (escaped like tensor names).
    pub title: &'a str,
    /// The include guard is derived from it (e.g. the model's file stem).
    pub guard: &'a str,
    pub arena_bytes: u64,
    pub alignment: u64,
    /// The pool's base address, when given: the header then has addresses too.
    pub base: Option<u64>,
    /// A fragmented plan's header: every tensor's pieces too (see the module
    /// documentation). Set it for a plan with [`crate::plan::Plan::extents`].
    pub fragmented: bool,
}

/// The C header of `tensors` (the output of [`crate::plan::tensors::addresses`]) for
/// `problem`'s blocks; see the module documentation.
pub fn write_c_header(problem: &Problem, tensors: &[TensorAddress], info: &HeaderInfo) -> String {
    let mut out = String::new();
    let guard = format!("MEMPLAN_{}_H", identifier(info.guard).to_ascii_uppercase());
    // `write!` to a String cannot fail.
    let _ = writeln!(
        out,
        "/* memplan plan of {}. Generated: do not edit. */",
        comment_text(info.title)
    );
    let _ = writeln!(
        out,
        "#ifndef {guard}\n#define {guard}\n\n#include <stdint.h>\n"
    );
    let _ = writeln!(
        out,
        "#define MEMPLAN_ARENA_BYTES UINT64_C({})",
        info.arena_bytes
    );
    let _ = writeln!(
        out,
        "#define MEMPLAN_ALIGNMENT UINT64_C({})",
        info.alignment
    );
    if let Some(base) = info.base {
        let _ = writeln!(out, "#define MEMPLAN_BASE_ADDRESS UINT64_C({base:#x})");
    }
    let _ = writeln!(out, "#define MEMPLAN_TENSOR_COUNT {}", tensors.len());
    if info.fragmented {
        let most = tensors
            .iter()
            .map(|t| t.pieces.as_ref().map_or(1, Vec::len))
            .max()
            .unwrap_or(1);
        let _ = writeln!(out, "#define MEMPLAN_FRAGMENTED 1");
        let _ = writeln!(out, "#define MEMPLAN_MAX_PIECES {most}");
    }
    for (tensor, id) in tensors.iter().zip(identifiers(tensors)) {
        let block = problem
            .buffers()
            .get(tensor.block.index())
            .map_or("?", |b| b.name.as_str());
        let split = tensor.pieces.as_ref().map_or(0, Vec::len);
        let _ = writeln!(
            out,
            "\n/* \"{}\" in block \"{}\", {} bytes{} */",
            comment_text(&tensor.name),
            comment_text(block),
            tensor.size,
            if split > 1 {
                format!(" in {split} pieces")
            } else {
                String::new()
            }
        );
        // `tensors::addresses` checked that every end fits in 64 bits.
        let top = tensor.top();
        if let Some(top) = top {
            let _ = writeln!(
                out,
                "#define MEMPLAN_OFFSET_{id} UINT64_C({})",
                tensor.offset
            );
            let _ = writeln!(out, "#define MEMPLAN_SIZE_{id} UINT64_C({})", tensor.size);
            let _ = writeln!(out, "#define MEMPLAN_TOP_{id} UINT64_C({top})");
            if info.base.is_some() {
                let _ = writeln!(
                    out,
                    "#define MEMPLAN_ADDRESS_{id} UINT64_C({:#x})",
                    tensor.address
                );
            }
        } else {
            let _ = writeln!(out, "#define MEMPLAN_SIZE_{id} UINT64_C({})", tensor.size);
        }
        if info.fragmented {
            let pieces = tensor.extents();
            let list = |value: &dyn Fn(&crate::plan::Extent) -> String| {
                let items: Vec<String> = pieces.iter().map(value).collect();
                format!("{{ {} }}", items.join(", "))
            };
            let _ = writeln!(out, "#define MEMPLAN_PIECES_{id} {}", pieces.len());
            let _ = writeln!(
                out,
                "#define MEMPLAN_PIECE_OFFSETS_{id} {}",
                list(&|p| format!("UINT64_C({})", p.offset))
            );
            let _ = writeln!(
                out,
                "#define MEMPLAN_PIECE_LENGTHS_{id} {}",
                list(&|p| format!("UINT64_C({})", p.len))
            );
            if info.base.is_some() {
                let base = tensor.base();
                let _ = writeln!(
                    out,
                    "#define MEMPLAN_PIECE_ADDRESSES_{id} {}",
                    list(&|p| format!("UINT64_C({:#x})", base.wrapping_add(p.offset)))
                );
            }
        }
    }
    let _ = writeln!(out, "\n#endif /* {guard} */");
    out
}

/// The identifier of every tensor, in order, distinct (see the module documentation).
pub fn identifiers(tensors: &[TensorAddress]) -> Vec<String> {
    let mut used: HashSet<String> = HashSet::with_capacity(tensors.len());
    tensors
        .iter()
        .map(|t| {
            let base = identifier(&t.name);
            let mut id = base.clone();
            let mut k = 2u64;
            while used.contains(&id) {
                id = format!("{base}_{k}");
                k += 1;
            }
            used.insert(id.clone());
            id
        })
        .collect()
}

/// `name` with every character outside `[A-Za-z0-9_]` replaced by `_`; `tensor` for "".
fn identifier(name: &str) -> String {
    if name.is_empty() {
        return "tensor".into();
    }
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// `text` safe inside a `/* */` comment and readable; see the module documentation.
fn comment_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '*' | '?' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            ' '..='~' => out.push(c),
            c if (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\u{{{:04x}}}", c as u32);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::BufferId;

    fn tensor(name: &str) -> TensorAddress {
        TensorAddress {
            name: name.into(),
            block: BufferId(0),
            offset: 0,
            address: 0,
            size: 1,
            pieces: None,
        }
    }

    #[test]
    fn identifiers_are_c_and_distinct_in_order() {
        let names = ["a-b", "a_b", "a b", "", "9x", "int", "é", "a_b_2"];
        let tensors: Vec<TensorAddress> = names.iter().map(|n| tensor(n)).collect();
        assert_eq!(
            identifiers(&tensors),
            vec!["a_b", "a_b_2", "a_b_3", "tensor", "9x", "int", "_", "a_b_2_2"]
        );
    }

    #[test]
    fn fragmented_headers_list_every_tensors_pieces() {
        use crate::plan::tensors::{addresses, TensorSlot};
        use crate::plan::{Extent, Plan};
        use crate::problem::Buffer;
        let e = |offset, len| Extent { offset, len };
        let problem =
            Problem::from_buffers(vec![Buffer::new("a", 8, 0, 2), Buffer::new("z", 0, 0, 1)])
                .unwrap();
        let plan =
            Plan::fragmented(&problem, vec![vec![e(4, 2), e(10, 6)], vec![e(0, 0)]]).unwrap();
        let mut slots = TensorSlot::one_per_buffer(&problem);
        slots.push(TensorSlot {
            name: "a.tail".into(),
            block: BufferId(0),
            offset_in_block: 3,
            size: 5,
        });
        let tensors = addresses(&problem, &plan, &slots, 0x100).unwrap();
        let info = HeaderInfo {
            title: "t",
            guard: "g",
            arena_bytes: 16,
            alignment: 1,
            base: Some(0x100),
            fragmented: true,
        };
        let text = write_c_header(&problem, &tensors, &info);
        let expected = "#define MEMPLAN_TENSOR_COUNT 3
#define MEMPLAN_FRAGMENTED 1
#define MEMPLAN_MAX_PIECES 2

/* \"a\" in block \"a\", 8 bytes in 2 pieces */
#define MEMPLAN_SIZE_a UINT64_C(8)
#define MEMPLAN_PIECES_a 2
#define MEMPLAN_PIECE_OFFSETS_a { UINT64_C(4), UINT64_C(10) }
#define MEMPLAN_PIECE_LENGTHS_a { UINT64_C(2), UINT64_C(6) }
#define MEMPLAN_PIECE_ADDRESSES_a { UINT64_C(0x104), UINT64_C(0x10a) }

/* \"z\" in block \"z\", 0 bytes */
#define MEMPLAN_OFFSET_z UINT64_C(0)
#define MEMPLAN_SIZE_z UINT64_C(0)
#define MEMPLAN_TOP_z UINT64_C(0)
#define MEMPLAN_ADDRESS_z UINT64_C(0x100)
#define MEMPLAN_PIECES_z 1
#define MEMPLAN_PIECE_OFFSETS_z { UINT64_C(0) }
#define MEMPLAN_PIECE_LENGTHS_z { UINT64_C(0) }
#define MEMPLAN_PIECE_ADDRESSES_z { UINT64_C(0x100) }

/* \"a.tail\" in block \"a\", 5 bytes */
#define MEMPLAN_OFFSET_a_tail UINT64_C(11)
#define MEMPLAN_SIZE_a_tail UINT64_C(5)
#define MEMPLAN_TOP_a_tail UINT64_C(16)
#define MEMPLAN_ADDRESS_a_tail UINT64_C(0x10b)
#define MEMPLAN_PIECES_a_tail 1
#define MEMPLAN_PIECE_OFFSETS_a_tail { UINT64_C(11) }
#define MEMPLAN_PIECE_LENGTHS_a_tail { UINT64_C(5) }
#define MEMPLAN_PIECE_ADDRESSES_a_tail { UINT64_C(0x10b) }
";
        assert!(text.contains(expected), "{text}");
        // Without the flag (a contiguous plan's header): no piece macros.
        let info = HeaderInfo {
            fragmented: false,
            ..info
        };
        let text = write_c_header(&problem, &tensors[1..], &info);
        assert!(!text.contains("PIECE") && text.contains("#define MEMPLAN_TOP_z UINT64_C(0)"));
    }

    #[test]
    fn comments_cannot_be_closed_or_spliced() {
        let text = comment_text("x*/y/*z\"q\\??/\n\u{e9}");
        assert!(!text.contains("*/") && !text.contains("/*") && !text.contains('\n'));
        assert_eq!(text, "x\\x2a/y/\\x2az\\\"q\\\\\\x3f\\x3f/\\x0a\\u{00e9}");
    }
}
