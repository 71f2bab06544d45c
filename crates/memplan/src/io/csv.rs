//! minimalloc CSV: problems (buffers to place) and solutions (the same rows plus offsets).
//!
//! This is the format of google/minimalloc (`src/converter.cc`) and of the benchmark sets
//! built on it (`../shared/benchmarks/minimalloc`, `../shared/benchmarks/idealloc`):
//!
//! ```text
//! id,lower,upper,size
//! b1,0,3,4
//! b2,3,9,4
//! ```
//!
//! # Columns
//!
//! A header names the columns, in any order. Names are matched ignoring ASCII case.
//!
//! | column | required | meaning |
//! | --- | --- | --- |
//! | `id` (legacy `buffer`, `buffer_id`) | yes | the buffer's name, unique |
//! | `lower` (legacy `begin`, `start`) | yes | first step the buffer is live |
//! | `upper` | yes, or `end` | end of the lifetime, exclusive: live on `[lower, upper)` |
//! | `end` (legacy) | instead of `upper` | end of the lifetime, *inclusive*: live on `[lower, end + 1)` |
//! | `size` | yes | bytes; 0 for a zero-size buffer, which occupies nothing |
//! | `alignment` | no | the offset must be a multiple of it; empty = 1 |
//! | `offset` | no (yes in a solution) | in a problem: a fixed offset; in a solution: the placement |
//! | `hint` | no | a suggested offset; empty or `-1` = none (MiniMalloc writes `-1`) |
//! | `gaps` | no | steps where the buffer is inactive, see below; empty = none |
//!
//! `gaps` holds space-separated `lo-hi` intervals, as MiniMalloc reads them: `lo` inclusive,
//! `hi` exclusive (`2-4` is steps 2 and 3), so `7-9 12-14` are the steps `[7, 9)` and
//! `[12, 14)`. With the legacy `end` header, MiniMalloc shifts gap ends like the lifetime
//! end, so there both bounds are inclusive (`7-8` is `[7, 9)`); this reader does the same.
//! Gaps must lie inside the lifetime, must not overlap and must not cover all of it; they
//! may be listed in any order. MiniMalloc also has a windowed form `lo-hi@a:b` (during the
//! gap the buffer still occupies its bytes `[a, b)`); memplan's model has no such partial
//! gap, so it is rejected with an error that says so.
//!
//! # Accepted dialect
//!
//! - UTF-8; a leading byte-order mark is skipped.
//! - A record ends at `\n`; a `\r` before it is dropped (CRLF files read like LF files).
//!   A lone `\r` is not a line break.
//! - Cells are separated by `,`. Spaces, tabs and `\r` around a cell are ignored.
//! - A cell may be quoted as in RFC 4180: `"..."`, with `""` standing for one `"`. Inside
//!   quotes, commas, line breaks and leading or trailing spaces are kept. Only spaces may
//!   stand between the quotes and the surrounding commas. A `"` inside an unquoted cell is an
//!   error (quote the whole cell and double the `"`).
//! - Blank lines (empty or only spaces) are skipped wherever they are.
//! - The first non-blank record is the header; every column name must be known, and no
//!   column may appear twice (counting legacy names: `lower` and `begin` are the same).
//! - One trailing comma per line is accepted: a header whose last cell is empty, and a row
//!   with one more cell than the header when that cell is empty.
//! - Every row has exactly as many cells as the header has columns.
//! - Numbers are unsigned decimal integers that fit in 64 bits: digits only, no sign,
//!   fraction, exponent or separators. `end + 1`, `offset + size` and gap ends are checked
//!   for overflow too.
//! - An empty cell in an optional column means "absent". An empty `id` is an error, but a
//!   quoted empty id (`""`) is the empty name (the writer produces it for such a buffer).
//!
//! Every problem in the input is reported as a [`CsvError`] naming the line and column.
//!
//! Compared with MiniMalloc's own reader, this one is stricter (unknown columns, quotes,
//! negative numbers, empty lifetimes, bad gaps and duplicate ids are errors, where
//! MiniMalloc ignores or accepts them) and more lenient (blank lines are skipped rather than
//! ending the file; whitespace, CRLF, a BOM, header case and a trailing comma are accepted).
//!
//! # Writing
//!
//! [`write_problem`] writes `id,lower,upper,size`, then `alignment`, `hint` and `gaps` only
//! when some buffer needs them, then `offset` when some buffer has a fixed offset.
//! [`write_solution`] writes the same columns and always an `offset` column holding the plan.
//! Output uses `\n`, quotes ids only when they need it, and writes a missing hint as `-1`
//! (as MiniMalloc does). Whatever these functions write, [`read_problem`] reads back to an
//! equal problem, except that CSV cannot carry [`Problem::conflicts`], which are dropped.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::{self, Write as _};

use crate::fxhash::hash_str;
use crate::plan::Plan;
use crate::problem::{validate_buffer, Buffer, Lifetime, NameIndex, Problem, ProblemError};
use crate::render::printable;

/// What is wrong with a CSV input, where, and what would fix it.
///
/// Displays as `{source}:{line}: column '{column}': {message}` (without the column part
/// when the error is not about one column).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CsvError {
    /// The name of the input, as given to the reader (usually a path).
    pub source: String,
    /// 1-based line of the record (or of the cell, for a quoted cell spanning lines).
    pub line: usize,
    /// The column as the header spells it, when the error is about one column.
    pub column: Option<String>,
    /// What was wrong and what would fix it.
    pub message: String,
}

impl fmt::Display for CsvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: ", self.source, self.line)?;
        if let Some(column) = &self.column {
            write!(f, "column '{column}': ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for CsvError {}

/// Reads a problem. An `offset` column gives fixed offsets.
pub fn read_problem(text: &str, source: &str) -> Result<Problem, CsvError> {
    let mut records = Records::new(text, source);
    let header = Header::read(&mut records, false)?;
    let (buffers, lines) = match rows_on_two_threads(&records, &header) {
        Some(read) => read,
        None => rows_in_order(records, &header)?,
    };
    // (The row checks catch these first.)
    for (i, buffer) in buffers.iter().enumerate() {
        if let Err(error) = validate_buffer(buffer) {
            let line_of = HashMap::from([(buffer.name.clone(), lines[i])]);
            return Err(problem_error(error, &line_of, &lines, &header));
        }
    }
    // The names were found unique.
    Problem::with_unique_names(buffers, [])
        .map_err(|error| problem_error(error, &HashMap::new(), &lines, &header))
}

/// The buffers of the rows left in `records`, with their lines; the first error in the
/// order of the lines, a repeated id included.
fn rows_in_order(
    mut records: Records<'_>,
    header: &Header,
) -> Result<(Vec<Buffer>, Vec<usize>), CsvError> {
    let mut buffers: Vec<Buffer> = Vec::new();
    let mut lines = Vec::new();
    let mut seen = NameIndex::with_capacity(records.text.len() / 16);
    while let Some(record) = records.next_record()? {
        let (buffer, line) = buffer_of(header, &record)?;
        let index = buffers.len() as u32;
        if let Some(j) = seen.insert(&buffer.name, index, |j| &buffers[j as usize].name) {
            let first = lines[j as usize];
            return Err(header.row(&record)?.error(
                header,
                Field::Id,
                format!(
                    "id '{}' is already used on line {first}; ids must be unique, rename one of them",
                    printable(&buffer.name)
                ),
            ));
        }
        lines.push(line);
        buffers.push(buffer);
    }
    Ok((buffers, lines))
}

/// At least this many bytes of rows for [`rows_on_two_threads`] (about 40,000 rows).
const TWO_THREADS_FROM: usize = 1 << 20;

/// [`rows_in_order`] on two threads, each reading half of the rows (issue #18: 0.36 s
/// of a 10^6-buffer run on one). `None` when the text is small, has quoted cells (a
/// quoted cell may hold a line break, so the middle line break may not end a row), or
/// anything is wrong with it: [`rows_in_order`] then reads it again and reports the
/// first error by line, as it always did.
fn rows_on_two_threads(
    records: &Records<'_>,
    header: &Header,
) -> Option<(Vec<Buffer>, Vec<usize>)> {
    let text = records.text;
    let rows = &text.as_bytes()[records.pos..];
    if rows.len() < TWO_THREADS_FROM || rows.contains(&b'"') {
        return None;
    }
    let middle = records.pos + rows.len() / 2;
    let cut = middle + text.as_bytes()[middle..].iter().position(|&b| b == b'\n')? + 1;
    let first = Records {
        text: &text[..cut],
        ..*records
    };
    let line = records.line
        + text.as_bytes()[records.pos..cut]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
    let second = Records {
        text,
        pos: cut,
        line,
        source: records.source,
    };
    // Each half's buffers, lines and name hashes.
    type Read = (Vec<Buffer>, Vec<usize>, Vec<u64>);
    let read = |mut records: Records<'_>| -> Option<Read> {
        let (mut buffers, mut lines, mut hashes) = (Vec::new(), Vec::new(), Vec::new());
        while let Some(record) = records.next_record().ok()? {
            let (buffer, line) = buffer_of(header, &record).ok()?;
            hashes.push(hash_str(&buffer.name));
            buffers.push(buffer);
            lines.push(line);
        }
        Some((buffers, lines, hashes))
    };
    let (first, second) = std::thread::scope(|scope| {
        let later = scope.spawn(|| read(second));
        (read(first), later.join().ok().flatten())
    });
    let ((mut buffers, mut lines, mut hashes), (more, more_lines, more_hashes)) = (first?, second?);
    buffers.extend(more);
    lines.extend(more_lines);
    // Unique names have unique hashes but for a collision (about 3·10^-8 at 10^6
    // names), which reads the text again too: sorting the hashes beats a hash map's
    // cache miss per name.
    hashes.extend(more_hashes);
    crate::radix::sort_by_u64_key(&mut hashes, |&h| h);
    if hashes.windows(2).any(|w| w[0] == w[1]) {
        return None;
    }
    Some((buffers, lines))
}

/// The buffer of a row, and its line.
fn buffer_of(header: &Header, record: &Record<'_>) -> Result<(Buffer, usize), CsvError> {
    let row = header.row(record)?;
    if let Some(offset) = row.offset {
        let alignment = row.alignment.unwrap_or(1);
        if offset % alignment != 0 {
            return Err(row.error(
                header,
                Field::Offset,
                format!(
                    "fixed offset {offset} is not a multiple of the alignment {alignment}; \
                     use a multiple of {alignment} (or leave the cell empty to let the planner choose)"
                ),
            ));
        }
        if offset.checked_add(row.size).is_none() {
            return Err(row.error(
                header,
                Field::Offset,
                format!(
                    "fixed offset {offset} + size {} overflows 64 bits; use a smaller offset",
                    row.size
                ),
            ));
        }
    }
    let line = row.line;
    Ok((
        Buffer {
            name: row.name,
            size: row.size,
            lifetime: row.lifetime,
            gaps: row.gaps.unwrap_or_default(),
            alignment: row.alignment.unwrap_or(1),
            fixed_offset: row.offset,
            hint: row.hint,
        },
        line,
    ))
}

/// Reads a solution of `problem`: the problem's CSV with an `offset` cell on every row.
///
/// Rows are matched to buffers by id; every buffer of the problem must have exactly one row,
/// and the row's `size`, `lower` and `upper` (and `alignment` and `gaps`, when given) must
/// be the problem's. Offsets are not judged here (that is [`crate::checker`]'s job) beyond
/// `offset + size` fitting in 64 bits. The plan makes no arena claim (`arena_bytes: None`).
/// A row's `alignment` may also be a multiple of the problem's (a plan made with
/// `--alignment N` records the alignment it honoured): [`read_solution_aligned`] returns
/// the problem with those alignments, which is what such a solution is checked against.
pub fn read_solution(text: &str, source: &str, problem: &Problem) -> Result<Plan, CsvError> {
    read_solution_aligned(text, source, problem).map(|(plan, _)| plan)
}

/// [`read_solution`], and `problem` with each buffer's alignment raised to the one its
/// row records, so that the checker holds the plan to the alignment it claims.
pub fn read_solution_aligned(
    text: &str,
    source: &str,
    problem: &Problem,
) -> Result<(Plan, Problem), CsvError> {
    read_solution_realigned(text, source, problem)
        .map(|(plan, aligned)| (plan, aligned.unwrap_or_else(|| problem.clone())))
}

/// [`read_solution_aligned`] without a copy of `problem` when no row raises an alignment
/// (`None`: check against `problem` itself).
pub fn read_solution_realigned(
    text: &str,
    source: &str,
    problem: &Problem,
) -> Result<(Plan, Option<Problem>), CsvError> {
    let mut alignments: Vec<u64> = problem.buffers().iter().map(|b| b.alignment).collect();
    let mut records = Records::new(text, source);
    let header = Header::read(&mut records, true)?;
    // Rows in the problem's order (as memplan writes them) are matched by position; the
    // name index (a quarter of a GB at 10^7 buffers) is built at the first row that is not.
    let mut index = None;
    let mut rows = 0usize;
    let mut offsets: Vec<Option<u64>> = vec![None; problem.len()];
    let mut row_lines = vec![0usize; problem.len()];
    let mut last_line = header.line;
    while let Some(record) = records.next_record()? {
        last_line = record.line;
        let row = header.row(&record)?;
        let in_order = index.is_none()
            && problem
                .buffers()
                .get(rows)
                .is_some_and(|b| b.name == row.name);
        rows += 1;
        let found = if in_order {
            Some(rows - 1)
        } else {
            index
                .get_or_insert_with(|| problem.ids_by_name())
                .get(row.name.as_str())
                .map(|id| id.index())
        };
        let Some(i) = found else {
            return Err(row.error(
                &header,
                Field::Id,
                format!(
                    "id '{}' is not a buffer of the problem; a solution has one row per buffer \
                     of its problem and no others (is this the solution of another problem?)",
                    printable(&row.name)
                ),
            ));
        };
        if offsets[i].is_some() {
            return Err(row.error(
                &header,
                Field::Id,
                format!(
                    "id '{}' already has a row on line {}; give each buffer exactly one row",
                    printable(&row.name),
                    row_lines[i]
                ),
            ));
        }
        let buffer = &problem.buffers()[i];
        let mismatch = |field: Field, what: &str, here: String, there: String| {
            row.error(
                &header,
                field,
                format!(
                    "buffer '{}' has {what} {here} here but {there} in the problem; \
                     a solution must repeat its problem's buffers unchanged",
                    printable(&row.name)
                ),
            )
        };
        if row.size != buffer.size {
            return Err(mismatch(
                Field::Size,
                "size",
                row.size.to_string(),
                buffer.size.to_string(),
            ));
        }
        if row.lifetime.start != buffer.lifetime.start {
            return Err(mismatch(
                Field::Lower,
                "lifetime start",
                row.lifetime.start.to_string(),
                buffer.lifetime.start.to_string(),
            ));
        }
        if row.lifetime.end != buffer.lifetime.end {
            return Err(mismatch(
                Field::Upper,
                "exclusive lifetime end",
                row.lifetime.end.to_string(),
                buffer.lifetime.end.to_string(),
            ));
        }
        if let Some(alignment) = row.alignment {
            if alignment % buffer.alignment.max(1) != 0 {
                return Err(row.error(
                    &header,
                    Field::Alignment,
                    format!(
                        "buffer '{}' has alignment {alignment} here but {} in the problem; \
                         a solution's alignment must be the problem's or a multiple of it",
                        printable(&row.name),
                        buffer.alignment
                    ),
                ));
            }
            alignments[i] = alignment;
        }
        if let Some(gaps) = &row.gaps {
            if *gaps != buffer.gaps {
                return Err(mismatch(
                    Field::Gaps,
                    "gaps",
                    format_lifetimes(gaps),
                    format_lifetimes(&buffer.gaps),
                ));
            }
        }
        let Some(offset) = row.offset else {
            return Err(row.error(
                &header,
                Field::Offset,
                format!(
                    "buffer '{}' has no offset; a solution needs an offset on every row",
                    printable(&row.name)
                ),
            ));
        };
        if offset.checked_add(row.size).is_none() {
            return Err(row.error(
                &header,
                Field::Offset,
                format!(
                    "offset {offset} + size {} overflows 64 bits; no arena can hold it",
                    row.size
                ),
            ));
        }
        offsets[i] = Some(offset);
        row_lines[i] = row.line;
    }
    let missing: Vec<&str> = problem
        .buffers()
        .iter()
        .zip(&offsets)
        .filter(|(_, offset)| offset.is_none())
        .map(|(b, _)| b.name.as_str())
        .collect();
    if !missing.is_empty() {
        const SHOWN: usize = 5;
        let mut names = missing
            .iter()
            .take(SHOWN)
            .map(|name| format!("'{}'", printable(name)))
            .collect::<Vec<_>>()
            .join(", ");
        if missing.len() > SHOWN {
            let _ = write!(names, " and {} more", missing.len() - SHOWN);
        }
        return Err(CsvError {
            source: source.to_string(),
            line: last_line,
            column: None,
            message: format!(
                "{} buffer(s) of the problem have no row: {names}; a solution needs one row per buffer",
                missing.len()
            ),
        });
    }
    let unchanged = problem
        .buffers()
        .iter()
        .zip(&alignments)
        .all(|(b, &a)| a != 0 && b.alignment % a == 0);
    let plan = Plan {
        offsets: offsets.into_iter().flatten().collect(),
        arena_bytes: None,
        extents: None,
    };
    if unchanged {
        return Ok((plan, None));
    }
    let aligned = problem
        .with_alignments(&alignments)
        .map_err(|error| CsvError {
            source: source.to_string(),
            line: last_line,
            column: Some("alignment".into()),
            message: format!("the alignments of the solution do not fit its problem: {error}"),
        })?;
    Ok((plan, Some(aligned)))
}

/// Writes a problem as minimalloc CSV (see the module documentation for the columns).
/// Conflict pairs cannot be written and are dropped.
pub fn write_problem(problem: &Problem) -> String {
    write_csv(problem, None)
}

/// Writes a solution: the columns of [`write_problem`] plus `offset`, holding the plan's
/// offsets. A buffer the plan has no offset for (a plan of the wrong length) gets an empty
/// cell.
pub fn write_solution(problem: &Problem, plan: &Plan) -> String {
    write_csv(problem, Some(&plan.offsets))
}

fn write_csv(problem: &Problem, offsets: Option<&[u64]>) -> String {
    let buffers = problem.buffers();
    let with_alignment = buffers.iter().any(|b| b.alignment != 1);
    let with_hint = buffers.iter().any(|b| b.hint.is_some());
    let with_gaps = buffers.iter().any(|b| !b.gaps.is_empty());
    let with_offset = offsets.is_some() || buffers.iter().any(|b| b.fixed_offset.is_some());
    let mut out = String::with_capacity(32 * (buffers.len() + 1));
    out.push_str("id,lower,upper,size");
    for (wanted, name) in [
        (with_alignment, "alignment"),
        (with_hint, "hint"),
        (with_gaps, "gaps"),
        (with_offset, "offset"),
    ] {
        if wanted {
            out.push(',');
            out.push_str(name);
        }
    }
    out.push('\n');
    for (i, buffer) in buffers.iter().enumerate() {
        push_id(&mut out, &buffer.name);
        for value in [buffer.lifetime.start, buffer.lifetime.end, buffer.size] {
            push_number(&mut out, value);
        }
        if with_alignment {
            push_number(&mut out, buffer.alignment);
        }
        if with_hint {
            match buffer.hint {
                Some(hint) => {
                    let _ = write!(out, ",{hint}");
                }
                None => out.push_str(",-1"),
            }
        }
        if with_gaps {
            out.push(',');
            for (k, gap) in buffer.gaps.iter().enumerate() {
                if k > 0 {
                    out.push(' ');
                }
                let _ = write!(out, "{}-{}", gap.start, gap.end);
            }
        }
        if with_offset {
            let offset = match offsets {
                Some(offsets) => offsets.get(i).copied(),
                None => buffer.fixed_offset,
            };
            match offset {
                Some(offset) => push_number(&mut out, offset),
                // An empty cell.
                None => out.push(','),
            }
        }
        out.push('\n');
    }
    out
}

/// Appends `,` and `value` in decimal (`itoa`: at 10^7 rows, `write!` was most of the
/// time of writing a solution).
fn push_number(out: &mut String, value: u64) {
    out.push(',');
    out.push_str(itoa::Buffer::new().format(value));
}

/// Appends an id, quoted when reading it back unquoted would change it.
fn push_id(out: &mut String, id: &str) {
    let needs_quotes = id.is_empty()
        || id.bytes().any(|b| matches!(b, b',' | b'"' | b'\n' | b'\r'))
        || id.bytes().next().is_some_and(is_space)
        || id.bytes().next_back().is_some_and(is_space);
    if needs_quotes {
        out.push('"');
        out.push_str(&id.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(id);
    }
}

fn format_lifetimes(lifetimes: &[Lifetime]) -> String {
    if lifetimes.is_empty() {
        return "none".to_string();
    }
    lifetimes
        .iter()
        .map(|l| l.to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

// ---------------------------------------------------------------------------------------
// Records: the lexical layer (quotes, line breaks, blank lines).

/// Whitespace ignored around cells.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r')
}

struct Cell<'a> {
    /// Unquoted: trimmed. Quoted: the unescaped content, verbatim.
    text: Cow<'a, str>,
    quoted: bool,
    /// The line the cell starts on.
    line: usize,
}

impl Cell<'_> {
    fn is_empty_unquoted(&self) -> bool {
        !self.quoted && self.text.is_empty()
    }
}

struct Record<'a> {
    /// The line the record starts on.
    line: usize,
    cells: Vec<Cell<'a>>,
}

enum Terminator {
    Comma,
    Newline,
    End,
}

/// Splits the text into records of cells.
struct Records<'a> {
    text: &'a str,
    source: &'a str,
    pos: usize,
    line: usize,
}

impl<'a> Records<'a> {
    fn new(text: &'a str, source: &'a str) -> Records<'a> {
        Records {
            text: text.strip_prefix('\u{feff}').unwrap_or(text),
            source,
            pos: 0,
            line: 1,
        }
    }

    fn error(&self, line: usize, message: impl Into<String>) -> CsvError {
        CsvError {
            source: self.source.to_string(),
            line,
            column: None,
            message: message.into(),
        }
    }

    /// The next record that is not blank, or `None` at the end of the text.
    fn next_record(&mut self) -> Result<Option<Record<'a>>, CsvError> {
        while self.pos < self.text.len() {
            let record = self.record()?;
            let blank = record.cells.len() == 1 && record.cells[0].is_empty_unquoted();
            if !blank {
                return Ok(Some(record));
            }
        }
        Ok(None)
    }

    fn record(&mut self) -> Result<Record<'a>, CsvError> {
        let line = self.line;
        let mut cells = Vec::new();
        loop {
            let (cell, terminator) = self.cell()?;
            cells.push(cell);
            match terminator {
                Terminator::Comma => self.pos += 1,
                Terminator::Newline => {
                    self.pos += 1;
                    self.line += 1;
                    return Ok(Record { line, cells });
                }
                Terminator::End => return Ok(Record { line, cells }),
            }
        }
    }

    /// Reads one cell; leaves `pos` on its terminator (not consumed).
    fn cell(&mut self) -> Result<(Cell<'a>, Terminator), CsvError> {
        let text = self.text;
        let bytes = text.as_bytes();
        let mut i = self.pos;
        while i < bytes.len() && is_space(bytes[i]) {
            i += 1;
        }
        let cell_line = self.line;
        if bytes.get(i) == Some(&b'"') {
            i += 1;
            let mut value = String::new();
            loop {
                let Some(k) = bytes[i..].iter().position(|&b| b == b'"') else {
                    return Err(self.error(
                        cell_line,
                        "a quoted cell is never closed; add the closing '\"' \
                         (a '\"' inside quotes is written '\"\"')",
                    ));
                };
                let quote = i + k;
                self.line += bytes[i..quote].iter().filter(|&&b| b == b'\n').count();
                value.push_str(&text[i..quote]);
                if bytes.get(quote + 1) == Some(&b'"') {
                    value.push('"');
                    i = quote + 2;
                } else {
                    i = quote + 1;
                    break;
                }
            }
            while i < bytes.len() && is_space(bytes[i]) {
                i += 1;
            }
            let terminator = match bytes.get(i) {
                Some(b',') => Terminator::Comma,
                Some(b'\n') => Terminator::Newline,
                None => Terminator::End,
                Some(_) => {
                    return Err(self.error(
                        self.line,
                        format!(
                            "unexpected text after the closing quote of \"{}\"; a quoted cell \
                             ends at its closing '\"' (write '\"\"' for a quote inside it)",
                            shorten(&value)
                        ),
                    ))
                }
            };
            self.pos = i;
            let cell = Cell {
                text: Cow::Owned(value),
                quoted: true,
                line: cell_line,
            };
            return Ok((cell, terminator));
        }
        let start = i;
        let end = bytes[start..]
            .iter()
            .position(|&b| b == b',' || b == b'\n')
            .map_or(bytes.len(), |k| start + k);
        if bytes[start..end].contains(&b'"') {
            return Err(self.error(
                cell_line,
                format!(
                    "a '\"' inside the unquoted cell '{}'; quote the whole cell and double \
                     the quote inside (\"a\"\"b\")",
                    shorten(&text[start..end])
                ),
            ));
        }
        let mut trimmed_end = end;
        while trimmed_end > start && is_space(bytes[trimmed_end - 1]) {
            trimmed_end -= 1;
        }
        let terminator = match bytes.get(end) {
            Some(b',') => Terminator::Comma,
            Some(_) => Terminator::Newline,
            None => Terminator::End,
        };
        self.pos = end;
        let cell = Cell {
            text: Cow::Borrowed(&text[start..trimmed_end]),
            quoted: false,
            line: cell_line,
        };
        Ok((cell, terminator))
    }
}

/// The records of `text` (after the dialect of this module: quotes, blank lines skipped,
/// a BOM, CRLF) as `(line, cells)`, for other CSV readers of the crate.
pub(crate) fn cells<'a>(
    text: &'a str,
    source: &'a str,
) -> impl Iterator<Item = Result<(usize, Vec<String>), CsvError>> + 'a {
    let mut records = Records::new(text, source);
    let mut failed = false;
    std::iter::from_fn(move || {
        if failed {
            return None;
        }
        match records.next_record() {
            Ok(Some(record)) => {
                let cells = record.cells.into_iter().map(|c| c.text.into_owned());
                Some(Ok((record.line, cells.collect())))
            }
            Ok(None) => None,
            Err(e) => {
                failed = true;
                Some(Err(e))
            }
        }
    })
}

/// A decimal `u64` cell, or what is wrong with it (for a message).
pub(crate) fn parse_number(text: &str) -> Result<u64, String> {
    parse_u64(text).map_err(|e| e.message(text))
}

/// A cell's text for a message: [`printable`], and cut after 40 characters.
fn shorten(text: &str) -> Cow<'_, str> {
    const MAX: usize = 40;
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => Cow::Owned(format!("{}...", printable(&text[..cut]))),
        None => printable(text),
    }
}

// ---------------------------------------------------------------------------------------
// Header and rows: the meaning of the cells.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Id,
    Lower,
    Upper,
    Size,
    Alignment,
    Offset,
    Hint,
    Gaps,
}

const FIELD_COUNT: usize = 8;

impl Field {
    fn canonical(self) -> &'static str {
        match self {
            Field::Id => "id",
            Field::Lower => "lower",
            Field::Upper => "upper",
            Field::Size => "size",
            Field::Alignment => "alignment",
            Field::Offset => "offset",
            Field::Hint => "hint",
            Field::Gaps => "gaps",
        }
    }

    /// The column names meaning this field.
    fn accepted(self) -> &'static str {
        match self {
            Field::Id => "id, buffer or buffer_id",
            Field::Lower => "lower, begin or start",
            Field::Upper => "upper (exclusive) or end (inclusive)",
            other => other.canonical(),
        }
    }
}

const KNOWN_COLUMNS: &str = "id (or buffer, buffer_id), lower (or begin, start), \
    upper (exclusive; or end, inclusive), size, alignment, offset, hint, gaps";

/// The field a column name means, and whether it is the inclusive legacy `end`.
fn parse_column_name(name: &str) -> Option<(Field, bool)> {
    let field = match name.to_ascii_lowercase().as_str() {
        "id" | "buffer" | "buffer_id" => Field::Id,
        "lower" | "begin" | "start" => Field::Lower,
        "upper" => Field::Upper,
        "end" => return Some((Field::Upper, true)),
        "size" => Field::Size,
        "alignment" => Field::Alignment,
        "offset" => Field::Offset,
        "hint" => Field::Hint,
        "gaps" => Field::Gaps,
        _ => return None,
    };
    Some((field, false))
}

struct Header {
    source: String,
    line: usize,
    /// Column names as written (trimmed), in file order.
    names: Vec<String>,
    /// For each field, the index of its column.
    columns: [Option<usize>; FIELD_COUNT],
    /// The lifetime end comes from the legacy, inclusive `end` column.
    inclusive_end: bool,
}

/// One data row, checked on its own (not against other rows).
struct Row {
    line: usize,
    name: String,
    lifetime: Lifetime,
    size: u64,
    alignment: Option<u64>,
    offset: Option<u64>,
    hint: Option<u64>,
    /// `None` without a `gaps` column; otherwise sorted and checked against the lifetime.
    gaps: Option<Vec<Lifetime>>,
}

impl Row {
    fn error(&self, header: &Header, field: Field, message: String) -> CsvError {
        CsvError {
            source: header.source.clone(),
            line: self.line,
            column: Some(header.name(field).to_string()),
            message,
        }
    }
}

impl Header {
    /// Reads the first non-blank record as the header; `solution` also requires `offset`.
    fn read(records: &mut Records<'_>, solution: bool) -> Result<Header, CsvError> {
        let source = records.source;
        let error = |line: usize, column: Option<&str>, message: String| CsvError {
            source: source.to_string(),
            line,
            column: column.map(str::to_string),
            message,
        };
        let Some(record) = records.next_record()? else {
            return Err(error(
                records.line,
                None,
                "no header: the input is empty or blank; a minimalloc CSV starts with a header \
                 line such as 'id,lower,upper,size'"
                    .to_string(),
            ));
        };
        let mut cells = record.cells;
        if cells.len() > 1 && cells.last().is_some_and(Cell::is_empty_unquoted) {
            cells.pop();
        }
        let mut header = Header {
            source: source.to_string(),
            line: record.line,
            names: Vec::with_capacity(cells.len()),
            columns: [None; FIELD_COUNT],
            inclusive_end: false,
        };
        for (i, cell) in cells.iter().enumerate() {
            let name = cell
                .text
                .trim_matches(|c: char| c.is_ascii() && is_space(c as u8));
            if name.is_empty() {
                return Err(error(
                    record.line,
                    None,
                    format!(
                        "header cell {} is empty; every column needs a name, one of: {KNOWN_COLUMNS}",
                        i + 1
                    ),
                ));
            }
            let Some((field, inclusive)) = parse_column_name(name) else {
                return Err(error(
                    record.line,
                    Some(name),
                    format!(
                        "unknown column; the known columns are: {KNOWN_COLUMNS} \
                         (remove the column or rename it to one of these)"
                    ),
                ));
            };
            if let Some(other) = header.columns[field as usize] {
                let other_name = &header.names[other];
                let message = if other_name.eq_ignore_ascii_case(name) {
                    format!("duplicate column: '{name}' appears twice; keep one")
                } else {
                    format!(
                        "duplicate column: '{name}' and '{other_name}' both give the {} ({}); keep one",
                        field.canonical(),
                        field.accepted()
                    )
                };
                return Err(error(record.line, Some(name), message));
            }
            header.columns[field as usize] = Some(i);
            header.inclusive_end |= inclusive;
            header.names.push(name.to_string());
        }
        let mut required = vec![Field::Id, Field::Lower, Field::Upper, Field::Size];
        if solution {
            required.push(Field::Offset);
        }
        for field in required {
            if header.columns[field as usize].is_none() {
                let why = if field == Field::Offset {
                    "; a solution is its problem's CSV plus an offset column"
                } else {
                    ""
                };
                return Err(error(
                    record.line,
                    Some(field.canonical()),
                    format!(
                        "required column is missing (accepted names: {}){why}; the header has: {}",
                        field.accepted(),
                        header.names.join(", ")
                    ),
                ));
            }
        }
        Ok(header)
    }

    /// The column name of a field as the header spells it (canonical when absent).
    fn name(&self, field: Field) -> &str {
        match self.columns[field as usize] {
            Some(i) => &self.names[i],
            None => field.canonical(),
        }
    }

    /// Parses and checks one data row.
    fn row(&self, record: &Record<'_>) -> Result<Row, CsvError> {
        let source = self.source.as_str();
        let mut cells = &record.cells[..];
        if cells.len() == self.names.len() + 1 && cells[cells.len() - 1].is_empty_unquoted() {
            cells = &cells[..self.names.len()];
        }
        if cells.len() != self.names.len() {
            return Err(CsvError {
                source: source.to_string(),
                line: record.line,
                column: None,
                message: format!(
                    "the row has {} cells but the header (line {}) has {} columns ({}); \
                     give every row one cell per column (quote a cell that contains a comma)",
                    cells.len(),
                    self.line,
                    self.names.len(),
                    self.names.join(", ")
                ),
            });
        }
        let cell = |field: Field| self.columns[field as usize].map(|i| &cells[i]);
        let error = |field: Field, message: String| CsvError {
            source: source.to_string(),
            line: cell(field).map_or(record.line, |c| c.line),
            column: Some(self.name(field).to_string()),
            message,
        };
        let number = |field: Field| -> Result<Option<u64>, CsvError> {
            let Some(cell) = cell(field) else {
                return Ok(None);
            };
            if cell.text.is_empty() {
                return Ok(None);
            }
            parse_u64(&cell.text)
                .map(Some)
                .map_err(|e| error(field, e.message(&cell.text)))
        };
        let required = |field: Field, what: &str| -> Result<u64, CsvError> {
            number(field)?
                .ok_or_else(|| error(field, format!("the cell is empty; every row needs {what}")))
        };

        let id = cell(Field::Id).map(|c| (c.text.to_string(), c.quoted));
        let name = match id {
            Some((name, quoted)) if quoted || !name.is_empty() => name,
            _ => {
                return Err(error(
                    Field::Id,
                    "the id is empty; every buffer needs an id (write \"\" for an empty name)"
                        .to_string(),
                ))
            }
        };
        let lower = required(Field::Lower, "the first step of the lifetime")?;
        let upper_cell = required(Field::Upper, "the end of the lifetime")?;
        let upper = if self.inclusive_end {
            upper_cell.checked_add(1).ok_or_else(|| {
                error(
                    Field::Upper,
                    format!(
                        "end {upper_cell} is inclusive, and {upper_cell} + 1 overflows 64 bits; \
                         use a smaller end"
                    ),
                )
            })?
        } else {
            upper_cell
        };
        let Some(lifetime) = Lifetime::new(lower, upper) else {
            let message = if self.inclusive_end {
                format!(
                    "end {upper_cell} is before {} {lower}; the lifetime [{lower}, {upper_cell}] \
                     (end inclusive) must contain at least one step",
                    self.name(Field::Lower)
                )
            } else {
                format!(
                    "upper {upper} is not greater than {} {lower}; the lifetime [{lower}, {upper}) \
                     is half-open (upper exclusive) and must contain at least one step",
                    self.name(Field::Lower)
                )
            };
            return Err(error(Field::Upper, message));
        };
        let size = required(Field::Size, "a size in bytes")?;
        let alignment = number(Field::Alignment)?;
        if alignment == Some(0) {
            return Err(error(
                Field::Alignment,
                "alignment is 0; use 1 (or leave the cell empty) for no alignment".to_string(),
            ));
        }
        let offset = number(Field::Offset)?;
        let hint = match cell(Field::Hint) {
            Some(c) if c.text.trim() == "-1" => None,
            _ => number(Field::Hint)?,
        };
        let gaps = match cell(Field::Gaps) {
            None => None,
            Some(c) => Some(
                parse_gaps(&c.text, lifetime, self.inclusive_end)
                    .map_err(|message| error(Field::Gaps, message))?,
            ),
        };
        Ok(Row {
            line: record.line,
            name,
            lifetime,
            size,
            alignment,
            offset,
            hint,
            gaps,
        })
    }
}

enum NumberError {
    NotANumber,
    Negative,
    Overflow,
}

impl NumberError {
    fn message(&self, text: &str) -> String {
        let text = shorten(text);
        match self {
            NumberError::NotANumber => format!(
                "'{text}' is not a number; expected a non-negative integer in decimal digits, such as 42"
            ),
            NumberError::Negative => format!(
                "'{text}' is negative; steps, sizes, alignments and offsets are non-negative integers"
            ),
            NumberError::Overflow => format!(
                "'{text}' does not fit in 64 bits; the largest accepted value is {}",
                u64::MAX
            ),
        }
    }
}

/// Parses decimal digits (nothing else) as a `u64`.
fn parse_u64(text: &str) -> Result<u64, NumberError> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(text) {
        return Err(match text.strip_prefix('-') {
            Some(rest) if digits(rest) => NumberError::Negative,
            _ => NumberError::NotANumber,
        });
    }
    text.bytes().try_fold(0u64, |value, digit| {
        value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(digit - b'0')))
            .ok_or(NumberError::Overflow)
    })
}

/// Parses a `gaps` cell and checks it against the lifetime: returns the gaps half-open,
/// sorted, disjoint, inside the lifetime and not covering all of it.
fn parse_gaps(text: &str, lifetime: Lifetime, inclusive: bool) -> Result<Vec<Lifetime>, String> {
    let form = if inclusive {
        "space-separated 'lo-hi' intervals with both bounds inclusive (the header uses the \
         legacy 'end'), such as '2-3 7-8'"
    } else {
        "space-separated 'lo-hi' intervals, lo inclusive and hi exclusive, such as '2-4 7-9'"
    };
    let mut gaps: Vec<(Lifetime, &str)> = Vec::new();
    for token in text.split_ascii_whitespace() {
        if let Some((_, window)) = token.split_once('@') {
            return Err(format!(
                "gap '{}' has a window ('@{}': bytes the buffer still occupies during the gap), \
                 which memplan cannot represent; remove the gap to keep the buffer fully live \
                 then (always safe), or drop '@{}' if it uses none of its bytes then",
                shorten(token),
                shorten(window),
                shorten(window)
            ));
        }
        let bad =
            |detail: String| format!("bad gap '{}': {detail}; expected {form}", shorten(token));
        let Some((lo_text, hi_text)) = token.split_once('-') else {
            return Err(bad("no '-' between its bounds".to_string()));
        };
        if hi_text.contains('-') {
            return Err(bad(
                "more than one '-' (bounds are non-negative)".to_string()
            ));
        }
        let lo = parse_u64(lo_text).map_err(|e| bad(e.message(lo_text)))?;
        let hi_given = parse_u64(hi_text).map_err(|e| bad(e.message(hi_text)))?;
        let hi = if inclusive {
            hi_given.checked_add(1).ok_or_else(|| {
                bad(format!(
                    "the inclusive end {hi_given} + 1 overflows 64 bits"
                ))
            })?
        } else {
            hi_given
        };
        let Some(gap) = Lifetime::new(lo, hi) else {
            return Err(bad(if inclusive {
                format!("it ends ({hi_given}) before it starts ({lo})")
            } else {
                format!("it is empty: hi ({hi}) must be greater than lo ({lo})")
            }));
        };
        if gap.start < lifetime.start || gap.end > lifetime.end {
            return Err(format!(
                "gap '{}' (steps {gap}) is not inside the buffer's lifetime {lifetime}; a gap \
                 is a part of the lifetime during which the buffer is inactive",
                shorten(token)
            ));
        }
        gaps.push((gap, token));
    }
    gaps.sort_unstable();
    let mut covered = 0u64;
    for pair in gaps.windows(2) {
        let ((a, a_text), (b, b_text)) = (pair[0], pair[1]);
        if b.start < a.end {
            return Err(format!(
                "gaps '{}' ({a}) and '{}' ({b}) overlap; merge them into one",
                shorten(a_text),
                shorten(b_text)
            ));
        }
    }
    for (gap, _) in &gaps {
        covered = covered.saturating_add(gap.len());
    }
    if !gaps.is_empty() && covered >= lifetime.len() {
        return Err(format!(
            "the gaps cover the whole lifetime {lifetime}, so the buffer is never live; \
             shrink a gap (or remove the row)"
        ));
    }
    Ok(gaps.into_iter().map(|(gap, _)| gap).collect())
}

/// A [`ProblemError`] from [`Problem::new`], pointed at the offending row. The row checks
/// above catch these first; this keeps the reader honest if the contract grows.
fn problem_error(
    error: ProblemError,
    line_of: &HashMap<String, usize>,
    lines: &[usize],
    header: &Header,
) -> CsvError {
    let named = |name: &str| line_of.get(name).copied();
    let (line, field) = match &error {
        ProblemError::EmptyLifetime { name, .. } => (named(name), Some(Field::Upper)),
        ProblemError::ZeroAlignment { name } => (named(name), Some(Field::Alignment)),
        ProblemError::MisalignedFixedOffset { name, .. }
        | ProblemError::FixedOffsetOverflow { name, .. } => (named(name), Some(Field::Offset)),
        ProblemError::BadGap { name, .. } => (named(name), Some(Field::Gaps)),
        ProblemError::DuplicateName { second, .. } => {
            (lines.get(*second).copied(), Some(Field::Id))
        }
        ProblemError::SelfConflict { name } => (named(name), None),
        ProblemError::ConflictOutOfRange { .. } | ProblemError::TooManyBuffers { .. } => {
            (lines.last().copied(), None)
        }
    };
    CsvError {
        source: header.source.clone(),
        line: line.unwrap_or(header.line),
        column: field.map(|f| header.name(f).to_string()),
        message: error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CSV past [`TWO_THREADS_FROM`], every row with `row(i)`.
    fn big_csv(row: impl Fn(usize) -> String) -> String {
        let mut text = String::from("id,lower,upper,size,alignment\n");
        let mut i = 0;
        while text.len() < 2 * TWO_THREADS_FROM {
            text.push_str(&row(i));
            i += 1;
        }
        text
    }

    /// What [`rows_in_order`] alone makes of `text`.
    fn in_order(text: &str) -> Result<(Vec<Buffer>, Vec<usize>), CsvError> {
        let mut records = Records::new(text, "big.csv");
        let header = Header::read(&mut records, false)?;
        rows_in_order(records, &header)
    }

    #[test]
    fn two_threads_read_what_one_reads() {
        let text = big_csv(|i| {
            format!(
                "t{i},{},{},{},{}\n",
                i % 97,
                i % 97 + 1 + i % 5,
                64 + i,
                1 << (i % 4)
            )
        });
        // With a blank line, spaces and CRLF in the second half.
        let text =
            text.replacen("\nt60000,", "\n\n t60000 ,", 1)
                .replacen("\nt60001,", "\r\nt60001,", 1);
        let mut records = Records::new(&text, "big.csv");
        let header = Header::read(&mut records, false).unwrap();
        let (buffers, lines) = rows_on_two_threads(&records, &header).expect("read on two threads");
        assert_eq!((buffers.clone(), lines.clone()), in_order(&text).unwrap());
        assert_eq!(
            read_problem(&text, "big.csv").unwrap().buffers(),
            &buffers[..]
        );
        assert_eq!(lines[60000], 60003, "a blank line counts");
    }

    #[test]
    fn two_threads_report_the_error_one_reports() {
        let good = |i: usize| format!("t{i},0,2,64,1\n");
        let bad_row = big_csv(|i| {
            if i == 70000 {
                "t70000,0,2,-64,1\n".into()
            } else {
                good(i)
            }
        });
        let repeated = big_csv(|i| {
            if i == 70000 {
                "t12,0,2,64,1\n".into()
            } else {
                good(i)
            }
        });
        let quoted = big_csv(|i| {
            if i == 70000 {
                "\"t,70000\",0,2,64,1\n".into()
            } else {
                good(i)
            }
        });
        for text in [&bad_row, &repeated] {
            let mut records = Records::new(text, "big.csv");
            let header = Header::read(&mut records, false).unwrap();
            assert!(rows_on_two_threads(&records, &header).is_none());
            let error = read_problem(text, "big.csv").unwrap_err();
            assert_eq!(Err(error.clone()), in_order(text));
            assert_eq!(error.line, 70002, "{error}");
        }
        assert!(read_problem(&repeated, "big.csv")
            .unwrap_err()
            .to_string()
            .contains("already used on line 14"));
        // A quoted cell may hold a line break: one thread reads it.
        let mut records = Records::new(&quoted, "big.csv");
        let header = Header::read(&mut records, false).unwrap();
        assert!(rows_on_two_threads(&records, &header).is_none());
        assert_eq!(
            read_problem(&quoted, "big.csv").unwrap().buffers()[70000].name,
            "t,70000"
        );
    }

    /// The row checks catch every `ProblemError` first, so the mapping is tested directly.
    #[test]
    fn problem_errors_point_at_the_buffer_line_and_column() {
        let mut records = Records::new("id,begin,end,size,gaps\n", "p.csv");
        let header = Header::read(&mut records, false).unwrap();
        let line_of: HashMap<String, usize> = [("a".to_string(), 2), ("b".to_string(), 7)].into();
        let lines = [2, 7];
        let gap = Lifetime { start: 1, end: 2 };
        for (error, line, column) in [
            (ProblemError::SelfConflict { name: "b".into() }, 7, None),
            (
                ProblemError::EmptyLifetime {
                    name: "a".into(),
                    start: 1,
                    end: 1,
                },
                2,
                Some("end"),
            ),
            (
                ProblemError::BadGap {
                    name: "b".into(),
                    gap,
                    lifetime: gap,
                },
                7,
                Some("gaps"),
            ),
            (
                ProblemError::DuplicateName {
                    name: "a".into(),
                    first: 0,
                    second: 1,
                },
                7,
                Some("id"),
            ),
            (
                ProblemError::MisalignedFixedOffset {
                    name: "a".into(),
                    offset: 3,
                    alignment: 2,
                },
                2,
                Some("offset"),
            ),
            (ProblemError::TooManyBuffers { len: 2 }, 7, None),
        ] {
            let message = error.to_string();
            let mapped = problem_error(error, &line_of, &lines, &header);
            assert_eq!(mapped.source, "p.csv");
            assert_eq!((mapped.line, mapped.column.as_deref()), (line, column));
            assert_eq!(mapped.message, message);
        }
    }

    #[test]
    fn numbers_are_plain_decimal_digits() {
        assert!(matches!(parse_u64("0042"), Ok(42)));
        assert!(matches!(parse_u64("18446744073709551615"), Ok(u64::MAX)));
        assert!(matches!(
            parse_u64("18446744073709551616"),
            Err(NumberError::Overflow)
        ));
        assert!(matches!(parse_u64("-0"), Err(NumberError::Negative)));
        for text in ["", "-", "+1", "1_000", "0x10", "1.0", "١"] {
            assert!(
                matches!(parse_u64(text), Err(NumberError::NotANumber)),
                "{text}"
            );
        }
    }
}
