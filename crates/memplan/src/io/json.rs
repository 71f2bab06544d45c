//! Plan JSON: the stable, machine-readable result of planning.
//!
//! ```json
//! {
//!   "planner": "naive",
//!   "arena_bytes": 12,
//!   "lower_bound_bytes": 12,
//!   "alignment": 1,
//!   "buffers": [
//!     { "id": "b1", "size": 4, "start": 0, "end": 3, "offset": 8, "top": 12 }
//!   ],
//!   "elapsed_ms": 0.2
//! }
//! ```
//!
//! The fixed keys come first, in this order, and keep their names and meaning:
//! - `planner`: the planner's name;
//! - `arena_bytes`: the arena, `max(offset + size)`;
//! - `lower_bound_bytes`: a lower bound on any valid arena (max-live);
//! - `alignment`: the alignment the problem was planned with;
//! - `buffers`: one object per buffer, in problem order: `id` (name), `size`, `start` and
//!   `end` (the half-open *lifetime* `[start, end)`, in steps), `offset` and `top` (the
//!   half-open *address range* `[offset, top)`, bytes from the arena's start:
//!   `top = offset + size`); in a fragmented plan (one with [`Plan::extents`]) also
//!   `extents`, the buffer's pieces in order as `{ "offset": 0, "len": 4, "top": 4 }`
//!   objects (`offset` is then the first piece's; a buffer in two or more pieces has no
//!   single `top`, only its pieces do).
//!
//! Further top-level keys ([`PlanSummary::extra`]) follow them, in the order of their names;
//! among them `tensors` when the writer is given tensor addresses: one object per tensor,
//! `address`, `block` (the buffer holding it), `name`, `offset` (from the arena's start),
//! `size` and `top` (`offset + size`); a tensor whose bytes lie in two or more pieces of a
//! fragmented plan has `pieces` instead of `top`, each `{ "address", "len", "offset",
//! "top" }`, in the order its bytes fill them (`offset` and `address` are the first
//! piece's). Readers ignore keys they do not know, at the top level and inside buffers,
//! so fields can be added; a `top` (of a buffer or an extent) is optional, and when given
//! must be `offset + size` (`offset + len`).
//!
//! The writer serializes buffers and tensors straight from the problem and the plan,
//! without an intermediate JSON tree: at 10^6 buffers a tree of the tensors alone took
//! about a gigabyte.

use std::fmt;

use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::plan::tensors::TensorAddress;
use crate::plan::{Extent, Plan};
use crate::problem::Problem;

/// The top-level keys every plan JSON has, in the order they are written.
pub const FIXED_KEYS: [&str; 5] = [
    "planner",
    "arena_bytes",
    "lower_bound_bytes",
    "alignment",
    "buffers",
];

/// What a plan JSON says besides the problem and the plan.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PlanSummary {
    /// The planner's name (`planner`).
    pub planner: String,
    /// A lower bound on the arena of any valid plan (`lower_bound_bytes`).
    pub lower_bound_bytes: u64,
    /// The alignment the problem was planned with (`alignment`).
    pub alignment: u64,
    /// More top-level keys, written after the fixed ones in the map's order. A key named like
    /// one of [`FIXED_KEYS`] is not written: the fixed key keeps its meaning.
    pub extra: Map<String, Value>,
}

/// Why a plan JSON could not be read.
///
/// Displays as `{source}:{line}:{column}: {message}`, or `{source}: {message}` when the
/// error has no position (a buffer that does not match the problem).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonError {
    /// The name of the input, as given to the reader.
    pub source: String,
    /// 1-based line, for syntax and type errors.
    pub line: Option<usize>,
    /// 1-based column, for syntax and type errors.
    pub column: Option<usize>,
    /// What was wrong and what would fix it.
    pub message: String,
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:", self.source)?;
        if let Some(line) = self.line {
            write!(f, "{line}:")?;
            if let Some(column) = self.column {
                write!(f, "{column}:")?;
            }
        }
        write!(f, " {}", self.message)
    }
}

impl std::error::Error for JsonError {}

#[derive(Serialize)]
struct PlanOut<'a> {
    planner: &'a str,
    arena_bytes: Option<u64>,
    lower_bound_bytes: u64,
    alignment: u64,
    buffers: Buffers<'a>,
    #[serde(flatten)]
    extra: Extra<'a>,
}

/// The `buffers` array, serialized from the problem and the plan as it is written.
struct Buffers<'a> {
    problem: &'a Problem,
    plan: &'a Plan,
}

impl Serialize for Buffers<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let plan = self.plan;
        serializer.collect_seq(self.problem.buffers().iter().enumerate().map(|(i, b)| {
            let offset = plan.offsets.get(i).copied();
            let list = plan.extents.as_ref().map(|lists| lists.get(i));
            // A buffer in several pieces has no single top; an overflowing end
            // (an invalid plan, for the checker to report) is not written.
            let top = match list {
                Some(Some(l)) if l.len() > 1 => None,
                _ => offset.and_then(|o| o.checked_add(b.size)),
            };
            BufferOut {
                id: &b.name,
                size: b.size,
                start: b.lifetime.start,
                end: b.lifetime.end,
                offset,
                top,
                extents: list.map(|l| {
                    l.map_or_else(Vec::new, |l| {
                        l.iter()
                            .map(|e| ExtentJson {
                                offset: e.offset,
                                len: e.len,
                                top: e.end(),
                            })
                            .collect()
                    })
                }),
            }
        }))
    }
}

#[derive(Serialize)]
struct BufferOut<'a> {
    id: &'a str,
    size: u64,
    start: u64,
    end: u64,
    offset: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    extents: Option<Vec<ExtentJson>>,
}

/// One object of the `tensors` array (keys in name order, as the other extra keys).
#[derive(Serialize)]
struct TensorOut<'a> {
    address: u64,
    block: &'a str,
    name: &'a str,
    offset: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pieces: Option<Vec<PieceOut>>,
    size: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    top: Option<u64>,
}

/// One piece of a tensor split over a fragmented block (keys in name order).
#[derive(Serialize)]
struct PieceOut {
    address: u64,
    len: u64,
    offset: u64,
    top: u64,
}

/// The `tensors` array, serialized from the addresses as it is written.
struct Tensors<'a> {
    problem: &'a Problem,
    tensors: &'a [TensorAddress],
}

impl Serialize for Tensors<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.tensors.iter().map(|t| {
            let base = t.base();
            TensorOut {
                address: t.address,
                block: &self.problem.buffer(t.block).name,
                name: &t.name,
                offset: t.offset,
                // `tensors::addresses` checked every piece's end and address.
                pieces: t.pieces.as_ref().map(|pieces| {
                    pieces
                        .iter()
                        .map(|p| PieceOut {
                            address: base.wrapping_add(p.offset),
                            len: p.len,
                            offset: p.offset,
                            top: p.offset.wrapping_add(p.len),
                        })
                        .collect()
                }),
                size: t.size,
                top: t.top(),
            }
        }))
    }
}

/// One extent in a plan JSON: `{ "offset": 0, "len": 4, "top": 4 }` (`top` optional when
/// read, not written when `offset + len` overflows).
#[derive(Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an extent object with \"offset\" and \"len\" (and \"top\")"
)]
struct ExtentJson {
    offset: u64,
    len: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    top: Option<u64>,
}

/// The extra keys minus those that would repeat a fixed key, with `tensors` (when given)
/// at its place in name order.
struct Extra<'a> {
    map: &'a Map<String, Value>,
    tensors: Option<Tensors<'a>>,
}

impl Serialize for Extra<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut out = serializer.serialize_map(None)?;
        let mut tensors = self.tensors.as_ref();
        for (key, value) in self.map {
            if FIXED_KEYS.contains(&key.as_str()) || (self.tensors.is_some() && key == "tensors") {
                continue;
            }
            // `Map` iterates its keys in name order: `tensors` goes before the first after it.
            if key.as_str() > "tensors" {
                if let Some(list) = tensors.take() {
                    out.serialize_entry("tensors", list)?;
                }
            }
            out.serialize_entry(key, value)?;
        }
        if let Some(list) = tensors {
            out.serialize_entry("tensors", list)?;
        }
        out.end()
    }
}

/// Writes the plan as pretty-printed JSON ending with a newline; with `tensors`, their
/// addresses as the `tensors` key (which then replaces one in `summary.extra`).
///
/// `arena_bytes` is the plan's claim, or `max(offset + size)` recomputed when it claims
/// none. The plan should have one offset per buffer ([`Plan`]'s contract); where it does
/// not, a missing offset, and an arena that cannot be computed, are written as `null`.
pub fn write_plan_json(
    problem: &Problem,
    plan: &Plan,
    summary: &PlanSummary,
    tensors: Option<&[TensorAddress]>,
) -> String {
    let out = PlanOut {
        planner: &summary.planner,
        arena_bytes: plan.arena_bytes.or_else(|| plan.recomputed_arena(problem)),
        lower_bound_bytes: summary.lower_bound_bytes,
        alignment: summary.alignment,
        buffers: Buffers { problem, plan },
        extra: Extra {
            map: &summary.extra,
            tensors: tensors.map(|tensors| Tensors { problem, tensors }),
        },
    };
    // Strings, integers and `Value`s with string keys always serialize.
    let mut text = serde_json::to_string_pretty(&out).expect("plan JSON serializes");
    text.push('\n');
    text
}

#[derive(Deserialize)]
#[serde(expecting = "a plan object with \"arena_bytes\" and \"buffers\"")]
struct PlanIn {
    buffers: Vec<BufferIn>,
}

#[derive(Deserialize)]
#[serde(expecting = "a buffer object with \"id\", \"size\", \"start\", \"end\" and \"offset\"")]
struct BufferIn {
    id: String,
    size: u64,
    start: u64,
    end: u64,
    offset: u64,
    #[serde(default)]
    top: Option<u64>,
    #[serde(default)]
    extents: Option<Vec<ExtentJson>>,
}

/// The text of a plan JSON (BOM removed), or an error when its top level is not an object.
fn plan_object<'a>(text: &'a str, source: &str) -> Result<&'a str, JsonError> {
    super::json_object(text).map_err(|found| JsonError {
        source: source.to_string(),
        line: Some(1),
        column: Some(1),
        message: format!(
            "the top level is {found}; a plan JSON is one object with \"arena_bytes\" and \"buffers\", as `memplan plan -f json` writes it"
        ),
    })
}

/// Reads what a plan JSON says besides the plan: its `planner`, `lower_bound_bytes`,
/// `alignment` (0 and empty when absent) and every further top-level key in
/// [`PlanSummary::extra`] but `tensors` (skipped unread, like `buffers`). Tools use it to learn which problem a plan was made for (an
/// `exclusive` plan records its `exclusive_rules`) before reading the plan itself.
pub fn read_plan_summary(text: &str, source: &str) -> Result<PlanSummary, JsonError> {
    let text = plan_object(text, source)?;
    let value: SummaryKeys = serde_json::from_str(text).map_err(|e| JsonError {
        source: source.to_string(),
        line: (e.line() > 0).then_some(e.line()),
        column: (e.line() > 0).then_some(e.column()),
        message: format!("{e} (expected a plan JSON as written by memplan)"),
    })?;
    summary_of(value, source)
}

/// The [`PlanSummary`] of a plan JSON's top-level keys.
fn summary_of(value: SummaryKeys, source: &str) -> Result<PlanSummary, JsonError> {
    let Value::Object(mut map) = value.0 else {
        return Err(JsonError {
            source: source.to_string(),
            line: None,
            column: None,
            message: "a plan JSON is an object with \"arena_bytes\" and \"buffers\"".into(),
        });
    };
    let planner = match map.remove("planner") {
        Some(Value::String(name)) => name,
        _ => String::new(),
    };
    let number = |value: Option<Value>| value.and_then(|v| v.as_u64()).unwrap_or(0);
    let lower_bound_bytes = number(map.remove("lower_bound_bytes"));
    let alignment = number(map.remove("alignment"));
    map.remove("arena_bytes");
    map.remove("buffers");
    Ok(PlanSummary {
        planner,
        lower_bound_bytes,
        alignment,
        extra: map,
    })
}

/// Reads a plan JSON written for `problem`.
///
/// Buffers are matched by `id`: every buffer of the problem must appear exactly once, with
/// the problem's `size`, `start` and `end`. A buffer with `extents` makes the plan
/// fragmented, and then every buffer must have them (a plan without buffers reads as
/// contiguous). A `top` (of a buffer or an extent) may be absent (files written before it
/// existed); when present it must equal `offset + size` (`offset + len`), and a buffer in
/// two or more extents has none. The plan claims the file's `arena_bytes`
/// (`None` when it is absent or `null`); whether the plan is valid is for
/// [`crate::checker`] to say. Unknown keys are ignored.
pub fn read_plan_json(text: &str, source: &str, problem: &Problem) -> Result<Plan, JsonError> {
    let text = plan_object(text, source)?;
    let mut deserializer = serde_json::Deserializer::from_str(text);
    read_plan_with(&mut deserializer, source, problem)
}

/// [`read_plan_json`] of a plan JSON streamed from `reader` (a file): entries are matched
/// to the problem one at a time, so memory holds the plan, never the file's text nor a
/// list of its entries. A leading byte-order mark is skipped. Wrap the reader in a
/// [`super::file::JsonCap`] to bound what is read.
pub fn read_plan_json_from<R: std::io::Read>(
    reader: R,
    source: &str,
    problem: &Problem,
) -> Result<Plan, JsonError> {
    let reader = skip_bom(reader, source)?;
    let mut deserializer = serde_json::Deserializer::from_reader(reader);
    read_plan_with(&mut deserializer, source, problem)
}

/// [`read_plan_summary`] of a plan JSON streamed from `reader` (`buffers` and `tensors`
/// skipped as they stream by).
pub fn read_plan_summary_from<R: std::io::Read>(
    reader: R,
    source: &str,
) -> Result<PlanSummary, JsonError> {
    let reader = skip_bom(reader, source)?;
    let mut deserializer = serde_json::Deserializer::from_reader(reader);
    let value = SummaryKeys::deserialize(&mut deserializer)
        .and_then(|v| deserializer.end().map(|()| v))
        .map_err(|e| syntax_error(e, source))?;
    summary_of(value, source)
}

/// `reader` past a UTF-8 byte-order mark, refused as [`plan_object`] refuses a text whose
/// top level is not an object (only the first character is looked at).
fn skip_bom<R: std::io::Read>(reader: R, source: &str) -> Result<std::io::BufReader<R>, JsonError> {
    use std::io::BufRead;
    let mut reader = std::io::BufReader::with_capacity(1 << 16, reader);
    let io_error = |e: std::io::Error| JsonError {
        source: source.to_string(),
        line: None,
        column: None,
        message: e.to_string(),
    };
    let head = reader.fill_buf().map_err(io_error)?;
    if head.starts_with(b"\xef\xbb\xbf") {
        reader.consume(3);
    }
    // The first non-blank character tells an object from the other top levels.
    let head = reader.fill_buf().map_err(io_error)?;
    let shown = &head[..head.len().min(64)];
    let first = String::from_utf8_lossy(shown);
    plan_object(&first, source)?;
    Ok(reader)
}

/// A serde_json error as a [`JsonError`] with its position.
fn syntax_error(e: serde_json::Error, source: &str) -> JsonError {
    let (line, column) = (e.line(), e.column());
    let full = e.to_string();
    let suffix = format!(" at line {line} column {column}");
    let message = full.strip_suffix(&suffix).unwrap_or(&full).to_string();
    JsonError {
        source: source.to_string(),
        line: (line > 0).then_some(line),
        column: (line > 0).then_some(column),
        message: format!("{message} (expected a plan JSON as written by memplan)"),
    }
}

/// The plan of one deserializer's document, built as the entries arrive.
fn read_plan_with<'de, R: serde_json::de::Read<'de>>(
    deserializer: &mut serde_json::Deserializer<R>,
    source: &str,
    problem: &Problem,
) -> Result<Plan, JsonError> {
    let builder = PlanBuilder {
        problem,
        index: None,
        offsets: vec![u64::MAX; problem.len()],
        seen: vec![false; problem.len()],
        extents: Vec::new(),
        fragmented: None,
        position: 0,
        failure: None,
    };
    let cell = std::cell::RefCell::new(builder);
    let outcome = serde::de::DeserializeSeed::deserialize(PlanSeed(&cell), &mut *deserializer)
        .and_then(|arena_bytes| deserializer.end().map(|()| arena_bytes));
    let builder = cell.into_inner();
    let error = |message: String| JsonError {
        source: source.to_string(),
        line: None,
        column: None,
        message,
    };
    // A mismatch with the problem is said in its own words, not as a syntax error.
    if let Some(message) = builder.failure {
        return Err(error(message));
    }
    let arena_bytes = outcome.map_err(|e| syntax_error(e, source))?;
    let missing = builder.seen.iter().filter(|&&s| !s).count();
    if let Some(first) = builder.seen.iter().position(|&s| !s) {
        return Err(error(format!(
            "{missing} buffer(s) of the problem are not in the plan, the first is '{}'; a plan \
             lists every buffer",
            problem.buffers()[first].name
        )));
    }
    let fragmented = builder.fragmented == Some(true);
    Ok(Plan {
        offsets: builder.offsets,
        arena_bytes,
        extents: fragmented.then_some(builder.extents),
    })
}

/// The plan being read: each entry of `buffers` is checked against the problem and
/// stored at its buffer's index as it arrives.
struct PlanBuilder<'p> {
    problem: &'p Problem,
    /// Built at the first entry out of problem order.
    index: Option<crate::problem::NameIndex<'p>>,
    offsets: Vec<u64>,
    seen: Vec<bool>,
    /// One list per buffer once the plan is known to be fragmented.
    extents: Vec<Vec<Extent>>,
    /// Whether the entries carry `extents`, decided by the first entry.
    fragmented: Option<bool>,
    /// The index in `buffers` of the next entry.
    position: usize,
    /// Why the plan does not fit the problem, when it does not (reading stops there).
    failure: Option<String>,
}

impl PlanBuilder<'_> {
    fn add(&mut self, entry: BufferIn) -> Result<(), String> {
        let position = self.position;
        self.position += 1;
        // memplan writes buffers in problem order: the entry at `position` is usually the
        // problem's buffer `position`, found without the name index (building and probing
        // it was a quarter of `check`'s time at 10^6 buffers).
        let in_order = self
            .problem
            .buffers()
            .get(position)
            .is_some_and(|b| b.name == entry.id);
        let found = if in_order {
            Some(position)
        } else {
            let problem = self.problem;
            self.index
                .get_or_insert_with(|| problem.ids_by_name())
                .get(entry.id.as_str())
                .map(|id| id.index())
        };
        let Some(i) = found else {
            return Err(format!(
                "buffers[{position}]: id '{}' is not a buffer of the problem; is this the plan \
                 of another problem?",
                entry.id
            ));
        };
        if self.seen[i] {
            return Err(format!(
                "buffers[{position}]: buffer '{}' appears twice; a plan lists each buffer once",
                entry.id
            ));
        }
        let buffer = &self.problem.buffers()[i];
        for (key, here, there) in [
            ("size", entry.size, buffer.size),
            ("start", entry.start, buffer.lifetime.start),
            ("end", entry.end, buffer.lifetime.end),
        ] {
            if here != there {
                return Err(format!(
                    "buffers[{position}]: buffer '{}' has {key} {here} but {there} in the \
                     problem; is this the plan of another problem?",
                    entry.id
                ));
            }
        }
        check_tops(&entry, position)?;
        self.seen[i] = true;
        self.offsets[i] = entry.offset;
        let fragmented = *self.fragmented.get_or_insert(entry.extents.is_some());
        match (entry.extents, fragmented) {
            (Some(list), true) => {
                if self.extents.is_empty() {
                    self.extents = vec![Vec::new(); self.problem.len()];
                }
                self.extents[i] = list
                    .iter()
                    .map(|e| Extent {
                        offset: e.offset,
                        len: e.len,
                    })
                    .collect();
            }
            (None, true) => {
                return Err(format!(
                    "buffers[{position}]: buffer '{}' has no \"extents\" while other buffers \
                     have them; in a fragmented plan every buffer lists its extents",
                    entry.id
                ))
            }
            (Some(_), false) => {
                return Err(format!(
                    "buffers[{position}]: buffer '{}' has \"extents\" while the buffers before \
                     it have none; in a fragmented plan every buffer lists its extents",
                    entry.id
                ))
            }
            (None, false) => {}
        }
        Ok(())
    }
}

/// The top-level object: `arena_bytes` read, `buffers` streamed into the builder, every
/// other key skipped unbuilt.
struct PlanSeed<'a, 'p>(&'a std::cell::RefCell<PlanBuilder<'p>>);

impl<'de> serde::de::DeserializeSeed<'de> for PlanSeed<'_, '_> {
    type Value = Option<u64>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Option<u64>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for PlanSeed<'_, '_> {
    type Value = Option<u64>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a plan object with \"arena_bytes\" and \"buffers\"")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Option<u64>, A::Error> {
        let mut arena_bytes = None;
        let mut buffers = false;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match key.as_ref() {
                "arena_bytes" => arena_bytes = map.next_value::<Option<u64>>()?,
                "buffers" => {
                    map.next_value_seed(EntriesSeed(self.0))?;
                    buffers = true;
                }
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        if !buffers {
            return Err(serde::de::Error::missing_field("buffers"));
        }
        Ok(arena_bytes)
    }
}

/// The `buffers` array, one entry at a time.
struct EntriesSeed<'a, 'p>(&'a std::cell::RefCell<PlanBuilder<'p>>);

impl<'de> serde::de::DeserializeSeed<'de> for EntriesSeed<'_, '_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> serde::de::Visitor<'de> for EntriesSeed<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of buffer objects")
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(entry) = seq.next_element::<BufferIn>()? {
            let mut builder = self.0.borrow_mut();
            if let Err(message) = builder.add(entry) {
                builder.failure = Some(message);
                return Err(serde::de::Error::custom(
                    "the plan does not fit the problem",
                ));
            }
        }
        Ok(())
    }
}

/// The top-level keys of a plan JSON with `buffers` and `tensors` skipped, not built:
/// at 10^7 buffers they are about 3 GB of text, and a `Value` tree of them took about
/// 15 GB where the summary needs a few small keys.
struct SummaryKeys(Value);

impl<'de> Deserialize<'de> for SummaryKeys {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Keys;
        impl<'de> serde::de::Visitor<'de> for Keys {
            type Value = SummaryKeys;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a plan object with \"arena_bytes\" and \"buffers\"")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<SummaryKeys, A::Error> {
                let mut out = Map::new();
                while let Some(key) = map.next_key::<String>()? {
                    if key == "buffers" || key == "tensors" {
                        map.next_value::<serde::de::IgnoredAny>()?;
                    } else {
                        let value = map.next_value::<Value>()?;
                        out.insert(key, value);
                    }
                }
                Ok(SummaryKeys(Value::Object(out)))
            }
        }
        deserializer.deserialize_map(Keys)
    }
}

/// Whether `text` is a plan JSON rather than another JSON memplan reads (a graph JSON has
/// `values`; a plan JSON has `buffers` and no `values`). False for anything that is not
/// one JSON object.
pub fn is_plan_json(text: &str) -> bool {
    #[derive(Deserialize)]
    struct Keys {
        #[serde(default)]
        buffers: Option<serde::de::IgnoredAny>,
        #[serde(default)]
        values: Option<serde::de::IgnoredAny>,
    }
    match plan_object(text, "").ok().map(serde_json::from_str::<Keys>) {
        Some(Ok(keys)) => keys.buffers.is_some() && keys.values.is_none(),
        _ => false,
    }
}

/// The problem a plan JSON lists: one buffer per entry of `buffers`, with its `id`,
/// `size` and lifetime `[start, end)`, and the file's `alignment` (at least 1). A plan
/// JSON records no gaps, per-buffer alignments or fixed offsets: the problem is the
/// plan's as far as the file tells (a plan of a problem with gaps can show overlaps that
/// the gaps made legal; check it against its problem file then).
pub fn read_problem_of_plan(text: &str, source: &str) -> Result<Problem, JsonError> {
    let text = plan_object(text, source)?;
    let parsed: PlanIn = serde_json::from_str(text).map_err(|e| JsonError {
        source: source.to_string(),
        line: (e.line() > 0).then_some(e.line()),
        column: (e.line() > 0).then_some(e.column()),
        message: format!("{e} (expected a plan JSON as written by memplan)"),
    })?;
    let alignment = read_plan_summary(text, source)?.alignment.max(1);
    let buffers = parsed
        .buffers
        .into_iter()
        .map(|b| {
            let mut buffer = crate::problem::Buffer::new(b.id, b.size, b.start, b.end);
            buffer.alignment = alignment;
            buffer
        })
        .collect();
    Problem::from_buffers(buffers).map_err(|e| JsonError {
        source: source.to_string(),
        line: None,
        column: None,
        message: format!("its buffers do not form a problem: {e}"),
    })
}

/// That a buffer's `top`, and its extents' `top`s, are the ends of their bytes, when given.
fn check_tops(entry: &BufferIn, position: usize) -> Result<(), String> {
    let id = &entry.id;
    let pieces = entry.extents.as_ref().map_or(1, Vec::len);
    if let Some(top) = entry.top {
        if pieces > 1 {
            return Err(format!(
                "buffers[{position}]: buffer '{id}' lies in {pieces} extents and has no single \
                 \"top\", but the file gives {top}; give each extent its own \"top\" \
                 (offset + len) or leave it out"
            ));
        }
        match entry.offset.checked_add(entry.size) {
            Some(end) if end == top => {}
            Some(end) => {
                return Err(format!(
                    "buffers[{position}]: buffer '{id}' has \"top\" {top} but offset {} + \
                     size {} = {end}; \"top\" is the end of its bytes (exclusive), offset + \
                     size",
                    entry.offset, entry.size
                ))
            }
            None => {
                return Err(format!(
                    "buffers[{position}]: buffer '{id}' has \"top\" {top} but offset {} + \
                     size {} exceeds 2^64",
                    entry.offset, entry.size
                ))
            }
        }
    }
    for (k, extent) in entry.extents.iter().flatten().enumerate() {
        let Some(top) = extent.top else { continue };
        if extent.offset.checked_add(extent.len) != Some(top) {
            return Err(format!(
                "buffers[{position}]: buffer '{id}', extents[{k}]: \"top\" {top} is not \
                 offset {} + len {}; \"top\" is the end of the extent (exclusive), offset \
                 + len",
                extent.offset, extent.len
            ));
        }
    }
    Ok(())
}
