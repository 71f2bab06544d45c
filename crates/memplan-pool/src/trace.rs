//! Allocation traces: the recorded `alloc`/`free` requests of training, split into
//! iterations.
//!
//! Two formats are read (both described in `doc/traces.md`):
//!
//! * **CSV** with a header line. Required columns `op` (`alloc` or `free`), `size` and
//!   `id`; optional `iter` (iteration number, non-decreasing; a change starts a new
//!   iteration), `seq` (must increase strictly) and `align` (empty means the default
//!   alignment). Other columns (`addr`, `time_ns`, `api`, `tid`, ...) are ignored.
//! * **Replay `.bin`**: little-endian 16-byte records `{u64 size (0 = free), u32 id,
//!   u32 pad}`, every allocation aligned to [`BIN_ALIGN`]. The file carries no iteration
//!   numbers: [`Trace::from_bin`] finds the smallest period `P` such that the sequence of
//!   record sizes repeats every `P` records to the end of the file, and cuts an iteration
//!   every `P` records (one iteration when there is no such period shorter than the file).
//!
//! Every trace is validated when read: an allocation's id must not be live, a free must
//! name a live id (and, in CSV, carry its size), sizes of allocations are at least 1 and
//! alignments are powers of two. A free of an id the trace never allocated is an error
//! too, unless the reader is told ([`ForeignFrees::Skip`]) that the trace was cut from a
//! running process, where such a free releases an allocation made before the recording
//! began: then it is counted in [`Trace::foreign_frees`] and left out. Errors name the
//! file, the line (CSV) or record (bin) and the field.

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// Alignment of every allocation in a replay `.bin` (the trace records `posix_memalign(64)`).
pub const BIN_ALIGN: u64 = 64;
/// Alignment of a CSV allocation whose `align` field is empty or absent (glibc's malloc).
pub const DEFAULT_ALIGN: u64 = 16;

/// What a trace event requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Allocate `size` bytes aligned to `align`, known by `id` until freed.
    Alloc,
    /// Free the live allocation `id` (`size` is the size it was allocated with).
    Free,
}

/// One request of the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// Allocation or free.
    pub op: Op,
    /// Bytes requested, or released by a free.
    pub size: u64,
    /// Alignment requested (a power of two; frees carry their allocation's).
    pub align: u64,
    /// The allocation's id, unique among live allocations.
    pub id: u64,
}

/// A run of consecutive events forming one training iteration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Iteration {
    /// The iteration's number (the `iter` column, or counted for bin files).
    pub number: u64,
    /// Its events, as indices into [`Trace::events`].
    pub events: Range<usize>,
}

/// A validated trace: events in order, cut into consecutive iterations covering them all.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    /// Every event, in order.
    pub events: Vec<Event>,
    /// Consecutive, non-empty iterations covering `events` exactly (none if no events).
    pub iterations: Vec<Iteration>,
    /// Frees of ids never allocated in the trace (allocated before it began), left out
    /// of `events`.
    pub foreign_frees: u64,
}

/// What a free of an id the trace never allocated means.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ForeignFrees {
    /// An error naming the line or record (the default): the trace is incomplete.
    #[default]
    Error,
    /// The free releases an allocation made before the recording began (a trace cut from
    /// a running process): it is counted in [`Trace::foreign_frees`] and left out.
    Skip,
}

/// How a trace file is read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// Number of the first iteration of a `.bin` trace (bin files carry no numbers).
    pub first_iteration: u64,
    /// What a free of an id the trace never allocated means.
    pub foreign_frees: ForeignFrees,
}

/// Where in a trace file something is wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Location {
    /// The whole file.
    File,
    /// A 1-based line of a CSV file.
    Line(usize),
    /// A 0-based record of a bin file.
    Record(usize),
}

/// A trace file that cannot be read: what, where, and which field.
#[derive(Debug, thiserror::Error)]
pub struct TraceError {
    /// The file.
    pub file: PathBuf,
    /// Where in the file.
    pub location: Location,
    /// The field at fault, if one is.
    pub field: Option<&'static str>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        match self.location {
            Location::File => {}
            Location::Line(line) => write!(f, ":{line}")?,
            Location::Record(record) => write!(f, ": record {record}")?,
        }
        if let Some(field) = self.field {
            write!(f, ": field `{field}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

fn error(
    file: &Path,
    location: Location,
    field: Option<&'static str>,
    message: impl Into<String>,
) -> TraceError {
    TraceError {
        file: file.to_path_buf(),
        location,
        field,
        message: message.into(),
    }
}

/// Escapes control characters so that a message quoting the file stays on one line.
fn quoted(text: &str) -> String {
    let shown: String = text.chars().take(40).collect();
    format!("{:?}", shown)
}

/// Tracks the live ids while events are appended, rejecting inconsistent ones.
#[derive(Default)]
struct Builder {
    trace: Trace,
    live: HashMap<u64, (u64, u64)>,
    seen: std::collections::HashSet<u64>,
    current: Option<u64>,
    start: usize,
    foreign: ForeignFrees,
}

impl Builder {
    /// Appends `event`; `iteration` is its iteration number. On error returns the field
    /// and message.
    fn push(&mut self, event: Event, iteration: u64) -> Result<(), (&'static str, String)> {
        match self.current {
            Some(current) if iteration < current => {
                return Err((
                    "iter",
                    format!("iteration {iteration} follows iteration {current}: must not decrease"),
                ))
            }
            Some(current) if iteration > current => {
                self.close(current);
                self.current = Some(iteration);
            }
            Some(_) => {}
            None => self.current = Some(iteration),
        }
        let mut event = event;
        match event.op {
            Op::Alloc => {
                if event.size == 0 {
                    return Err((
                        "size",
                        "an allocation must have a size of at least 1".into(),
                    ));
                }
                if !event.align.is_power_of_two() {
                    return Err(("align", format!("{} is not a power of two", event.align)));
                }
                self.seen.insert(event.id);
                if self
                    .live
                    .insert(event.id, (event.size, event.align))
                    .is_some()
                {
                    return Err(("id", format!("id {} is allocated while live", event.id)));
                }
            }
            Op::Free => {
                let Some((size, align)) = self.live.remove(&event.id) else {
                    if !self.seen.contains(&event.id) {
                        if self.foreign == ForeignFrees::Error {
                            return Err((
                                "id",
                                format!(
                                    "free of id {}, which the trace never allocated; if the trace was cut from a running process, read it with foreign frees skipped (`--foreign-frees skip`)",
                                    event.id
                                ),
                            ));
                        }
                        self.trace.foreign_frees += 1;
                        return Ok(());
                    }
                    return Err(("id", format!("free of id {}, which is not live", event.id)));
                };
                if event.size != 0 && event.size != size {
                    return Err((
                        "size",
                        format!(
                            "free of id {} carries size {}, but it was allocated with {size}",
                            event.id, event.size
                        ),
                    ));
                }
                event.size = size;
                event.align = align;
            }
        }
        self.trace.events.push(event);
        Ok(())
    }

    fn close(&mut self, number: u64) {
        let end = self.trace.events.len();
        if end > self.start {
            self.trace.iterations.push(Iteration {
                number,
                events: self.start..end,
            });
        }
        self.start = end;
    }

    fn finish(mut self) -> Trace {
        if let Some(current) = self.current {
            self.close(current);
        }
        self.trace
    }
}

/// One 16-byte replay record: its size (0 for a free) and its id.
fn bin_record(r: &[u8]) -> (u64, u64) {
    let mut size = [0u8; 8];
    size.copy_from_slice(&r[0..8]);
    let mut id = [0u8; 4];
    id.copy_from_slice(&r[8..12]);
    (u64::from_le_bytes(size), u64::from(u32::from_le_bytes(id)))
}

/// Follows a replay stream as it is read and stops it at the first free of an id not
/// live (the check [`Trace::from_bin`] makes, done early so that a stream that is not a
/// trace is refused before it is read whole).
#[derive(Default)]
struct FreeCheck {
    live: std::collections::HashSet<u64>,
    partial: Vec<u8>,
    records: u64,
}

impl FreeCheck {
    fn feed(&mut self, mut chunk: &[u8]) -> Result<(), String> {
        const RECORD: usize = 16;
        let one = |r: &[u8], this: &mut FreeCheck| {
            let (size, id) = bin_record(r);
            if size == 0 && !this.live.remove(&id) {
                return Err(format!(
                    "record {}: a free of id {id}, which no earlier record allocates; this is not a replay trace (or it was cut from a running process: read it with foreign frees skipped)",
                    this.records
                ));
            }
            if size != 0 {
                this.live.insert(id);
            }
            this.records += 1;
            Ok(())
        };
        if !self.partial.is_empty() {
            let need = RECORD - self.partial.len();
            let take = need.min(chunk.len());
            self.partial.extend_from_slice(&chunk[..take]);
            chunk = &chunk[take..];
            if self.partial.len() < RECORD {
                return Ok(());
            }
            let record = std::mem::take(&mut self.partial);
            one(&record, self)?;
        }
        let mut records = chunk.chunks_exact(RECORD);
        for r in records.by_ref() {
            one(r, self)?;
        }
        self.partial.extend_from_slice(records.remainder());
        Ok(())
    }
}

/// The largest trace file read: 4 GiB (about 250 million replay records).
pub const MAX_TRACE_BYTES: u64 = 4 << 30;

impl Trace {
    /// Reads a trace file, choosing the format by extension (`.bin` is a replay stream,
    /// anything else CSV).
    pub fn read(path: &Path, options: ReadOptions) -> Result<Trace, TraceError> {
        use memplan::io::file;
        // The error names the file once (a refusal's own text does not repeat the path).
        let failed = |e: file::FileError| {
            let message = match e {
                file::FileError::Refused { message, .. } => message,
                other => other.to_string(),
            };
            error(path, Location::File, None, message)
        };
        if path.extension().is_some_and(|ext| ext == "bin") {
            // Frees of ids never allocated end the reading at once when they are errors:
            // `/dev/zero` (or a sparse file) is a free of id 0 in its first record, and was
            // read to 4 GiB before.
            let mut stream = FreeCheck::default();
            let check = |chunk: &[u8], _offset: u64| match options.foreign_frees {
                ForeignFrees::Error => stream.feed(chunk),
                ForeignFrees::Skip => Ok(()),
            };
            let bytes = file::read_bytes_checked(path, MAX_TRACE_BYTES, check).map_err(failed)?;
            Trace::from_bin_with(path, &bytes, options)
        } else {
            let text = file::read_text_capped(path, MAX_TRACE_BYTES).map_err(failed)?;
            Trace::from_csv_with(path, &text, options.foreign_frees)
        }
    }

    /// Parses CSV `text` (see the module documentation); `path` names it in errors. A
    /// free of an id the trace never allocated is an error.
    pub fn from_csv(path: &Path, text: &str) -> Result<Trace, TraceError> {
        Trace::from_csv_with(path, text, ForeignFrees::Error)
    }

    /// [`Trace::from_csv`], with frees of ids the trace never allocated handled as
    /// `foreign` says.
    pub fn from_csv_with(
        path: &Path,
        text: &str,
        foreign: ForeignFrees,
    ) -> Result<Trace, TraceError> {
        let mut lines = memplan::io::strip_bom(text).lines().enumerate();
        let Some((_, header)) = lines.next() else {
            return Err(error(
                path,
                Location::File,
                None,
                "empty file: expected a header line",
            ));
        };
        let names: Vec<&str> = header.split(',').map(str::trim).collect();
        let column = |name: &str| names.iter().position(|n| *n == name);
        let missing = |name: &'static str| {
            error(
                path,
                Location::Line(1),
                Some(name),
                format!("missing column `{name}` (the header needs op, size and id)"),
            )
        };
        let op_col = column("op").ok_or_else(|| missing("op"))?;
        let size_col = column("size").ok_or_else(|| missing("size"))?;
        let id_col = column("id").ok_or_else(|| missing("id"))?;
        let iter_col = column("iter");
        let seq_col = column("seq");
        let align_col = column("align");

        let mut builder = Builder {
            foreign,
            ..Builder::default()
        };
        let mut last_seq: Option<u64> = None;
        for (index, line) in lines {
            let line_no = index + 1;
            if line.trim().is_empty() {
                continue;
            }
            let at = Location::Line(line_no);
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            if fields.len() != names.len() {
                return Err(error(
                    path,
                    at,
                    None,
                    format!(
                        "{} fields, but the header has {}",
                        fields.len(),
                        names.len()
                    ),
                ));
            }
            let number = |col: usize, name: &'static str| -> Result<u64, TraceError> {
                fields[col].parse::<u64>().map_err(|_| {
                    error(
                        path,
                        at,
                        Some(name),
                        format!("{} is not a non-negative integer", quoted(fields[col])),
                    )
                })
            };
            let op = match fields[op_col] {
                "alloc" => Op::Alloc,
                "free" => Op::Free,
                other => {
                    return Err(error(
                        path,
                        at,
                        Some("op"),
                        format!("{} is neither `alloc` nor `free`", quoted(other)),
                    ))
                }
            };
            let size = number(size_col, "size")?;
            let id = number(id_col, "id")?;
            let iteration = match iter_col {
                Some(col) => number(col, "iter")?,
                None => 0,
            };
            if let Some(col) = seq_col {
                let seq = number(col, "seq")?;
                if last_seq.is_some_and(|last| seq <= last) {
                    return Err(error(
                        path,
                        at,
                        Some("seq"),
                        format!("{seq} does not increase"),
                    ));
                }
                last_seq = Some(seq);
            }
            let align = match align_col {
                Some(col) if !fields[col].is_empty() => number(col, "align")?,
                _ => DEFAULT_ALIGN,
            };
            builder
                .push(
                    Event {
                        op,
                        size,
                        align,
                        id,
                    },
                    iteration,
                )
                .map_err(|(field, message)| error(path, at, Some(field), message))?;
        }
        Ok(builder.finish())
    }

    /// Parses a replay stream (see the module documentation); `path` names it in errors.
    /// Iterations are numbered from `first_iteration`; a free of an id the stream never
    /// allocated is an error.
    pub fn from_bin(path: &Path, bytes: &[u8], first_iteration: u64) -> Result<Trace, TraceError> {
        Trace::from_bin_with(
            path,
            bytes,
            ReadOptions {
                first_iteration,
                foreign_frees: ForeignFrees::Error,
            },
        )
    }

    /// [`Trace::from_bin`] with the options of [`Trace::read`].
    pub fn from_bin_with(
        path: &Path,
        bytes: &[u8],
        options: ReadOptions,
    ) -> Result<Trace, TraceError> {
        let first_iteration = options.first_iteration;
        const RECORD: usize = 16;
        if !bytes.len().is_multiple_of(RECORD) {
            return Err(error(
                path,
                Location::File,
                None,
                format!(
                    "{} bytes is not a whole number of {RECORD}-byte records",
                    bytes.len()
                ),
            ));
        }
        // Records are decoded where they are used: a list of them beside the bytes doubled
        // the memory of a large trace.
        let records = || bytes.chunks_exact(RECORD).map(bin_record);
        let sizes: Vec<u64> = records().map(|r| r.0).collect();
        let period = period(&sizes);
        drop(sizes);
        let mut builder = Builder {
            foreign: options.foreign_frees,
            ..Builder::default()
        };
        for (index, (size, id)) in records().enumerate() {
            let op = if size == 0 { Op::Free } else { Op::Alloc };
            let iteration = (index / period) as u64;
            let iteration = first_iteration.checked_add(iteration).ok_or_else(|| {
                error(
                    path,
                    Location::Record(index),
                    None,
                    "iteration number overflows",
                )
            })?;
            builder
                .push(
                    Event {
                        op,
                        size,
                        align: BIN_ALIGN,
                        id,
                    },
                    iteration,
                )
                .map_err(|(field, message)| {
                    error(path, Location::Record(index), Some(field), message)
                })?;
        }
        Ok(builder.finish())
    }

    /// The iteration numbered `number`, if the trace has it.
    pub fn iteration(&self, number: u64) -> Option<&Iteration> {
        self.iterations.iter().find(|it| it.number == number)
    }

    /// The events of `iteration`.
    pub fn events_of(&self, iteration: &Iteration) -> &[Event] {
        &self.events[iteration.events.clone()]
    }
}

/// The smallest `p >= 1` such that `values[i] == values[i + p]` for every valid `i`
/// (`values.len()` when none is shorter; 1 for an empty slice). Linear time (Z-function).
pub fn period(values: &[u64]) -> usize {
    let n = values.len();
    if n == 0 {
        return 1;
    }
    // z[i] = length of the longest common prefix of values and values[i..].
    let mut z = vec![0usize; n];
    let (mut left, mut right) = (0usize, 0usize);
    for i in 1..n {
        let mut k = if i < right {
            z[i - left].min(right - i)
        } else {
            0
        };
        while i + k < n && values[k] == values[i + k] {
            k += 1;
        }
        z[i] = k;
        if i + k > right {
            left = i;
            right = i + k;
        }
        if i + k == n {
            return i;
        }
    }
    n
}
