//! Memory-operation sequences (the `strip` method, step 0, corrected): the allocations and
//! frees of a model's tensors in execution order, from which the lifetimes follow.
//!
//! ```text
//! op,tensor,size,alignment
//! alloc,input,602112,64
//! alloc,conv1,802816,64
//! free,input,,
//! alloc,relu1,802816,64
//! free,conv1,802816,
//! ```
//!
//! # Columns
//!
//! A header names the columns, in any order (names ignore ASCII case):
//!
//! | column | required | meaning |
//! | --- | --- | --- |
//! | `op` | yes | `alloc` or `free` |
//! | `tensor` | yes | the tensor's name |
//! | `size` | on `alloc` | bytes, at least 1; on `free` empty, or the allocated size |
//! | `alignment` | no | the offset must be a multiple of it (at least 1); empty = 1; on `free` empty or the allocated one |
//!
//! Cells follow the minimalloc CSV dialect of [`crate::io::csv`] (quotes, blank lines,
//! CRLF, a BOM, spaces around cells, one trailing comma).
//!
//! # Lifetimes
//!
//! Operation `k` (0-based, in file order, blank lines not counted) happens at step `k`. A
//! tensor allocated at step `a` and freed at step `f` is live on `[a, f)`: a tensor freed
//! before another is allocated can give it its bytes, as an allocator would. A tensor
//! still allocated after the last operation (a model output, say) is live to the end,
//! `[a, n)` for `n` operations. A name may be allocated again after its free; its `k`-th
//! allocation (`k >= 2`) is the buffer `name#k`.
//!
//! # Errors
//!
//! Each names the source and line (1-based, the header is a line) and says how to fix it:
//! an unknown or missing column; an `op` other than `alloc` or `free`; an allocation
//! without a size, of size 0, or whose size or alignment is not a decimal integer of 64
//! bits; an allocation of a name that is allocated (a double alloc); a free of a name that
//! is not allocated (never, or already freed); a free whose size or alignment differs
//! from its allocation's; more than [`MAX_OPERATIONS`] operations or a text longer than
//! [`MAX_TEXT_BYTES`].

use std::collections::HashMap;

use crate::io::csv::{self, CsvError};
use crate::problem::{Buffer, Lifetime, Problem};

/// The longest text read (1 GiB, the cap of every text input: [`crate::io::file`]).
pub const MAX_TEXT_BYTES: usize = crate::io::file::MAX_TEXT_BYTES as usize;
/// The most operations read.
pub const MAX_OPERATIONS: usize = 1 << 28;

/// Allocate or free.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    Alloc,
    Free,
}

/// One memory operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemOp {
    pub kind: OpKind,
    /// The tensor's name.
    pub tensor: String,
    /// Bytes: required (at least 1) on an alloc; `None` or the allocated size on a free.
    pub size: Option<u64>,
    /// The alignment: `None` means 1 on an alloc, and "as allocated" on a free.
    pub alignment: Option<u64>,
    /// Where it was read (1-based line), for messages.
    pub line: usize,
}

/// True when `text` starts (after blank lines) with a header that has an `op` column: a
/// memory-operation sequence or an allocation trace rather than a minimalloc CSV.
pub fn looks_like_operations(text: &str) -> bool {
    let Some(header) = text
        .trim_start_matches('\u{feff}')
        .lines()
        .find(|l| !l.trim().is_empty())
    else {
        return false;
    };
    header_names(header).iter().any(|c| c == "op")
}

/// True when the header has a `tensor` column: memplan's memory-operation CSV (else, with
/// an `op` column, an allocation trace with `id`s, as `memplan_pool` reads).
pub fn has_tensor_column(text: &str) -> bool {
    text.trim_start_matches('\u{feff}')
        .lines()
        .find(|l| !l.trim().is_empty())
        .is_some_and(|h| header_names(h).iter().any(|c| c == "tensor"))
}

fn header_names(header: &str) -> Vec<String> {
    header
        .split(',')
        .map(|c| c.trim().trim_matches('"').to_ascii_lowercase())
        .collect()
}

/// Reads a memory-operation CSV (see the module documentation) into a problem.
pub fn read_problem(text: &str, source: &str) -> Result<Problem, CsvError> {
    problem_from_ops(&read_ops(text, source)?, source)
}

/// Reads the operations of a memory-operation CSV without judging their sequence.
pub fn read_ops(text: &str, source: &str) -> Result<Vec<MemOp>, CsvError> {
    let error = |line: usize, column: Option<&str>, message: String| CsvError {
        source: source.to_string(),
        line,
        column: column.map(str::to_string),
        message,
    };
    if text.len() > MAX_TEXT_BYTES {
        return Err(error(
            1,
            None,
            format!(
                "the text is {} bytes, more than the {MAX_TEXT_BYTES} a memory-operation sequence may have; split the model or plan it as a minimalloc CSV",
                text.len()
            ),
        ));
    }
    let mut records = csv::cells(text, source);
    let Some((header_line, header)) = records.next().transpose()? else {
        return Err(error(
            1,
            None,
            "empty file: expected a header such as `op,tensor,size,alignment`".into(),
        ));
    };
    // One trailing comma is accepted, on the header and on the rows.
    let mut header = header;
    if header.len() > 1 && header.last().is_some_and(|c| c.is_empty()) {
        header.pop();
    }
    let mut columns: [Option<usize>; 4] = [None; 4];
    const NAMES: [&str; 4] = ["op", "tensor", "size", "alignment"];
    for (k, name) in header.iter().enumerate() {
        let lower = name.to_ascii_lowercase();
        let Some(c) = NAMES.iter().position(|n| *n == lower) else {
            return Err(error(
                header_line,
                Some(name),
                format!(
                    "unknown column; a memory-operation sequence has the columns {}",
                    NAMES.join(", ")
                ),
            ));
        };
        if columns[c].replace(k).is_some() {
            return Err(error(
                header_line,
                Some(name),
                "the column appears twice; keep one".into(),
            ));
        }
    }
    if let Some(name) = NAMES[..3].iter().zip(&columns).find(|(_, c)| c.is_none()) {
        return Err(error(
            header_line,
            None,
            format!(
                "missing column '{}'; the header needs op, tensor and size (alignment is optional)",
                name.0
            ),
        ));
    }
    let mut ops = Vec::new();
    for record in records {
        let (line, mut cells) = record?;
        if cells.len() == header.len() + 1 && cells.last().is_some_and(|c| c.is_empty()) {
            cells.pop();
        }
        if cells.len() != header.len() {
            return Err(error(
                line,
                None,
                format!(
                    "{} cells, but the header has {} columns; give every operation one cell per column (empty for none)",
                    cells.len(),
                    header.len()
                ),
            ));
        }
        if ops.len() >= MAX_OPERATIONS {
            return Err(error(
                line,
                None,
                format!("more than {MAX_OPERATIONS} operations; split the sequence"),
            ));
        }
        let cell = |c: usize| {
            columns[c]
                .and_then(|k| cells.get(k))
                .map_or("", |s| s.as_str())
        };
        let number = |c: usize| -> Result<Option<u64>, CsvError> {
            let text = cell(c);
            if text.is_empty() {
                return Ok(None);
            }
            csv::parse_number(text)
                .map(Some)
                .map_err(|why| error(line, Some(NAMES[c]), why))
        };
        let kind = match cell(0).to_ascii_lowercase().as_str() {
            "alloc" => OpKind::Alloc,
            "free" => OpKind::Free,
            other => {
                return Err(error(
                    line,
                    Some("op"),
                    format!(
                        "'{}' is neither 'alloc' nor 'free'",
                        crate::render::printable(other)
                    ),
                ))
            }
        };
        ops.push(MemOp {
            kind,
            tensor: cell(1).to_string(),
            size: number(2)?,
            alignment: number(3)?,
            line,
        });
    }
    Ok(ops)
}

/// The problem of a sequence of operations (see the module documentation for lifetimes
/// and errors). `source` names the input in errors, which name each operation's line.
pub fn problem_from_ops(ops: &[MemOp], source: &str) -> Result<Problem, CsvError> {
    let error = |op: &MemOp, column: &str, message: String| CsvError {
        source: source.to_string(),
        line: op.line,
        column: Some(column.to_string()),
        message,
    };
    // name -> (buffer index, allocation line) while allocated.
    let mut live: HashMap<&str, (usize, usize)> = HashMap::new();
    let mut allocations: HashMap<&str, u64> = HashMap::new();
    let mut buffers: Vec<Buffer> = Vec::new();
    let steps = ops.len() as u64;
    for (step, op) in ops.iter().enumerate() {
        let step = step as u64;
        let name = crate::render::printable(&op.tensor);
        match op.kind {
            OpKind::Alloc => {
                let size = match op.size {
                    None => {
                        return Err(error(
                            op,
                            "size",
                            format!("allocation of '{name}' without a size; give its bytes"),
                        ))
                    }
                    Some(0) => {
                        return Err(error(
                            op,
                            "size",
                            format!("allocation of '{name}' of 0 bytes; such a tensor needs no memory: leave the operation out"),
                        ))
                    }
                    Some(s) => s,
                };
                let alignment = op.alignment.unwrap_or(1);
                if alignment == 0 {
                    return Err(error(
                        op,
                        "alignment",
                        "alignment 0; give at least 1 (or leave the cell empty)".into(),
                    ));
                }
                if let Some(&(_, first)) = live.get(op.tensor.as_str()) {
                    return Err(error(
                        op,
                        "tensor",
                        format!("'{name}' is allocated again while allocated (since line {first}); free it first, or give the tensor another name"),
                    ));
                }
                let count = allocations.entry(op.tensor.as_str()).or_insert(0);
                *count += 1;
                let buffer_name = if *count == 1 {
                    op.tensor.clone()
                } else {
                    format!("{}#{count}", op.tensor)
                };
                live.insert(op.tensor.as_str(), (buffers.len(), op.line));
                let mut buffer = Buffer::new(buffer_name, size, step, steps);
                buffer.alignment = alignment;
                buffers.push(buffer);
            }
            OpKind::Free => {
                let Some((index, _)) = live.remove(op.tensor.as_str()) else {
                    let why = if allocations.contains_key(op.tensor.as_str()) {
                        "was already freed"
                    } else {
                        "was never allocated"
                    };
                    return Err(error(
                        op,
                        "tensor",
                        format!("free of '{name}', which {why}; remove the free or allocate the tensor before it"),
                    ));
                };
                let buffer = &mut buffers[index];
                if op.size.is_some_and(|s| s != buffer.size) {
                    return Err(error(
                        op,
                        "size",
                        format!(
                            "free of '{name}' with size {} but it was allocated with {}; leave the cell empty or give the allocated size",
                            op.size.unwrap_or(0),
                            buffer.size
                        ),
                    ));
                }
                if op.alignment.is_some_and(|a| a != buffer.alignment) {
                    return Err(error(
                        op,
                        "alignment",
                        format!(
                            "free of '{name}' with alignment {} but it was allocated with {}; leave the cell empty or give the allocated alignment",
                            op.alignment.unwrap_or(0),
                            buffer.alignment
                        ),
                    ));
                }
                buffer.lifetime = Lifetime {
                    start: buffer.lifetime.start,
                    end: step,
                };
            }
        }
    }
    Problem::from_buffers(buffers).map_err(|e| CsvError {
        source: source.to_string(),
        line: 1,
        column: None,
        message: format!("the sequence does not make a problem: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Problem, String> {
        read_problem(text, "ops.csv").map_err(|e| e.to_string())
    }

    #[test]
    fn lifetimes_follow_the_operations() {
        let p = read(
            "op,tensor,size,alignment\nalloc,a,4,\nalloc,b,8,16\nfree,a,,\n\nalloc,c,4,\nfree,b,8,16\nalloc,a,2,\n",
        )
        .unwrap();
        let got: Vec<(String, u64, u64, u64, u64)> = p
            .buffers()
            .iter()
            .map(|b| {
                (
                    b.name.clone(),
                    b.size,
                    b.lifetime.start,
                    b.lifetime.end,
                    b.alignment,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("a".into(), 4, 0, 2, 1),
                ("b".into(), 8, 1, 4, 16),
                // Never freed: live to the end (6 operations).
                ("c".into(), 4, 3, 6, 1),
                ("a#2".into(), 2, 5, 6, 1),
            ]
        );
        assert!(looks_like_operations("\n op ,tensor,size\n"));
        assert!(!looks_like_operations("id,lower,upper,size\n"));
    }

    #[test]
    fn errors_name_the_line_and_the_fix() {
        for (text, want) in [
            (
                "op,tensor,size\nfree,x,,\n",
                "ops.csv:2: column 'tensor': free of 'x', which was never allocated",
            ),
            (
                "op,tensor,size\nalloc,x,1\nfree,x,\nfree,x,\n",
                "ops.csv:4: column 'tensor': free of 'x', which was already freed",
            ),
            (
                "op,tensor,size\nalloc,x,1\nalloc,x,1\n",
                "ops.csv:3: column 'tensor': 'x' is allocated again while allocated (since line 2)",
            ),
            (
                "op,tensor,size\nalloc,x,-1\n",
                "ops.csv:2: column 'size': '-1'",
            ),
            ("op,tensor,size\nalloc,x,\n", "without a size"),
            ("op,tensor,size\nalloc,x,0\n", "of 0 bytes"),
            (
                "op,tensor,size\nalloc,x,99999999999999999999\n",
                "ops.csv:2: column 'size'",
            ),
            (
                "op,tensor,size\nalloc,x,4\nfree,x,5\n",
                "ops.csv:3: column 'size': free of 'x' with size 5",
            ),
            ("op,tensor,size\nmalloc,x,4\n", "ops.csv:2: column 'op'"),
            ("op,tensor\nalloc,x\n", "missing column 'size'"),
            ("op,tensor,size,colour\n", "column 'colour': unknown column"),
            ("", "empty file"),
            ("op,tensor,size,alignment\nalloc,x,4,0\n", "alignment 0"),
            (
                "op,tensor,size\nalloc,x\n",
                "ops.csv:2: 2 cells, but the header has 3",
            ),
        ] {
            let got = read(text).unwrap_err();
            assert!(got.contains(want), "{text:?}: {got}");
        }
    }
}
