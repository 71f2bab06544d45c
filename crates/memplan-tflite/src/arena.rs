//! The planning problem of a model's arena, built exactly as TFLite Micro builds its own
//! (`micro_allocation_info.cc`, `micro_allocator.cc`), so that any memplan planner's plan
//! is a plan TFLM can load, and `tflm-greedy` on it gives TFLM's own arena.
//!
//! - **Which tensors.** A tensor gets arena memory when its buffer holds no data, it is
//!   not a variable, and its size is not zero. Variables live in TFLM's persistent tail
//!   unless an offline plan places them.
//! - **Sizes.** Elements × element size, rounded up to 16 bytes (TFLM's arena alignment).
//! - **Steps.** TFLM counts *allocation scopes*: subgraph 0's inputs at scope 0; each
//!   operator opens a new scope (its outputs are created there), then the subgraphs an
//!   `IF`, `WHILE` or `CALL_ONCE` runs are walked, each opening scopes of its own; the
//!   operator's inputs and outputs are last used at the scope reached after them. The
//!   subgraph's outputs are used at the last scope. Lifetimes are inclusive in TFLM; here
//!   scope `s` is step `s + 1` and a lifetime `[first, last]` is `[first + 1, last + 2)`,
//!   so that a tensor TFLM never reaches (scopes `-1`) still has a lifetime.
//! - **Order.** Buffers are listed in the order TFLM adds them to its planner: tensors of
//!   subgraph 0, 1, … in index order, then kernel scratch buffers in request order. The
//!   order decides `tflm-greedy`'s ties.
//! - **Scratch buffers** that reference kernels request at prepare time are modelled by
//!   [`crate::scratch`]; each lives during its operator's scopes.

use memplan::{Buffer, Problem};

use crate::error::TfliteError;
use crate::model::Model;
use crate::scratch::{self, ScratchRequest};
use crate::sharing::{self, Sharing};

/// TFLM's arena alignment (`MicroArenaBufferAlignment`): every planned size is a multiple.
pub const ARENA_ALIGNMENT: u64 = 16;

/// How the problem is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArenaOptions {
    /// Model the scratch buffers of reference kernels (on by default): TFLM places them
    /// in the same planned area.
    pub scratch: bool,
    /// Storage sharing beyond TFLM's own (off by default: TFLM shares nothing).
    pub sharing: Sharing,
    /// Read the model's embedded `OfflineMemoryAllocation` into [`Arena::offline`], and
    /// plan the variables it places in the arena, as TFLM does when it loads the model;
    /// off, the embedded plan is ignored.
    pub keep_offline_plan: bool,
}

impl Default for ArenaOptions {
    fn default() -> Self {
        ArenaOptions {
            scratch: true,
            sharing: Sharing::NONE,
            keep_offline_plan: false,
        }
    }
}

/// What a buffer of the problem is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// Tensors of the model sharing one buffer (one tensor unless [`Sharing`] merged
    /// several); each is `(subgraph, tensor)`, the first the buffer's owner.
    Tensors(Vec<(usize, usize)>),
    /// A kernel scratch buffer, which TFLM places at run time (not in the file).
    Scratch(ScratchRequest),
}

/// Something TFLM does with a model that its file does not show, found while building
/// the [`Arena`]; the model is still planned as TFLM would plan it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TflmCaveat {
    /// Tensors whose data is stored after the flatbuffer (`Buffer.offset`, as converters
    /// write models over 2 GiB). TFLM reads inline data only: it gives these tensors arena
    /// memory (counted in every head memplan reports) and runs the model with them
    /// unfilled. `(subgraph, tensor, name)` of each.
    DataAfterFlatbuffer(Vec<(usize, usize, String)>),
    /// An operator output whose shape has a dimension of 0 or less: TFLM stops at
    /// `AllocateTensors` ("Dynamic tensors are not supported") unless the kernel sets the
    /// shape in its Prepare. memplan plans the tensor at the bytes of its stored shape.
    DynamicOutput {
        subgraph: usize,
        operator: usize,
        kind: String,
        tensor: usize,
        name: String,
        shape: Vec<i32>,
    },
}

impl std::fmt::Display for TflmCaveat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TflmCaveat::DataAfterFlatbuffer(tensors) => {
                let shown: Vec<String> = tensors
                    .iter()
                    .take(3)
                    .map(|(s, t, name)| {
                        format!("subgraph {s} tensor {t} '{}'", crate::display_name(name))
                    })
                    .collect();
                let more = tensors.len().saturating_sub(shown.len());
                write!(
                    f,
                    "{} tensor{} keep{} data after the flatbuffer ({}{}); TFLM reads only data inside it, so it gives them arena memory (counted in the heads) and runs the model with them unfilled: convert the model with its weights inside the flatbuffer",
                    tensors.len(),
                    if tensors.len() == 1 { "" } else { "s" },
                    if tensors.len() == 1 { "s its" } else { " their" },
                    shown.join(", "),
                    if more > 0 { format!(" and {more} more") } else { String::new() },
                )
            }
            TflmCaveat::DynamicOutput {
                subgraph,
                operator,
                kind,
                tensor,
                name,
                shape,
            } => write!(
                f,
                "subgraph {subgraph} operator {operator} ({kind}) writes tensor {tensor} '{}' of shape {shape:?}, with a dimension of 0 or less: TFLM refuses such dynamic tensors at AllocateTensors unless the kernel sets the shape; give the tensor a static shape",
                crate::display_name(name)
            ),
        }
    }
}

/// What TFLM does with `model` that its file does not show (see [`TflmCaveat`]).
pub fn caveats(model: &Model) -> Vec<TflmCaveat> {
    let mut out = Vec::new();
    let mut after = Vec::new();
    for (s, sg) in model.subgraphs.iter().enumerate() {
        for (t, tensor) in sg.tensors.iter().enumerate() {
            if model.buffers.get(tensor.buffer).is_some_and(|b| b.external) {
                after.push((s, t, tensor.name.clone()));
            }
        }
    }
    if !after.is_empty() {
        out.push(TflmCaveat::DataAfterFlatbuffer(after));
    }
    for (s, sg) in model.subgraphs.iter().enumerate() {
        for (o, op) in sg.operators.iter().enumerate() {
            for &t in &op.outputs {
                let shape = &sg.tensors[t].shape;
                // `[0]` is TFLM's legacy scalar, which it accepts.
                if shape.as_slice() != [0] && shape.iter().any(|&d| d <= 0) {
                    out.push(TflmCaveat::DynamicOutput {
                        subgraph: s,
                        operator: o,
                        kind: op.kind(),
                        tensor: t,
                        name: sg.tensors[t].name.clone(),
                        shape: shape.clone(),
                    });
                }
            }
        }
    }
    out
}

/// A model's arena as a planning problem.
#[derive(Clone, Debug)]
pub struct Arena {
    /// Buffers in TFLM's order ([`Arena::entries`] says what each is).
    pub problem: Problem,
    pub entries: Vec<Entry>,
    /// Tensor count over all subgraphs: the length of an offline plan.
    pub tensor_count: usize,
    /// Index of `(subgraph, tensor)` in the offline plan's offsets: `subgraph_offsets[s] + t`.
    pub subgraph_offsets: Vec<usize>,
    /// Operators whose scratch requests memplan does not model (kind and where), so that
    /// reports can say the head may differ from TFLM's by their scratch buffers.
    pub unmodelled: Vec<String>,
    /// What TFLM does with this model that its file does not show: tensors it gives
    /// arena memory but never fills, outputs it refuses as dynamic. Every report shows them.
    pub caveats: Vec<TflmCaveat>,
    /// The largest allocation scope TFLM reaches (the number of steps minus one).
    pub last_scope: i64,
    /// The model's embedded offline plan, when [`ArenaOptions::keep_offline_plan`] asked
    /// for it and there is one: one offset per tensor, `-1` for "TFLM plans it".
    pub offline: Option<Vec<i32>>,
}

impl Arena {
    /// Where every arena tensor of `model` lives (the `exclusive` method, Deployment): for each
    /// buffer that holds tensors, in buffer order, its tensors (the owner first), each at
    /// offset 0 (shared tensors start at the same byte). Scratch buffers hold no tensor.
    /// A tensor of another subgraph is named `subgraph S: NAME` for `S >= 1`.
    pub fn tensor_slots(&self, model: &Model) -> Vec<memplan::plan::tensors::TensorSlot> {
        let mut slots = Vec::new();
        for (i, entry) in self.entries.iter().enumerate() {
            let Entry::Tensors(tensors) = entry else {
                continue;
            };
            for &(s, t) in tensors {
                let tensor = &model.subgraphs[s].tensors[t];
                let name = if s == 0 {
                    tensor.name.clone()
                } else {
                    format!("subgraph {s}: {}", tensor.name)
                };
                let block = memplan::BufferId(i as u32);
                slots.push(memplan::plan::tensors::TensorSlot {
                    name,
                    block,
                    offset_in_block: 0,
                    size: tensor.bytes.min(self.problem.buffer(block).size),
                });
            }
        }
        slots
    }
}

/// An inclusive TFLM lifetime in allocation scopes; `-1` is "never reached".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scopes {
    pub first: i64,
    pub last: i64,
}

impl Scopes {
    const UNSET: Scopes = Scopes {
        first: -1,
        last: -1,
    };

    /// The half-open step interval of this lifetime: scope `s` is step `s + 1`.
    pub fn steps(self) -> (u64, u64) {
        let first = (self.first + 1).max(0) as u64;
        let last = (self.last + 1).max(0) as u64;
        (first, last.max(first) + 1)
    }
}

/// Every tensor's TFLM lifetime (indexed `[subgraph][tensor]`) and every scratch request's,
/// by walking the model as `AllocationInfoBuilder::MarkAllocationLifetimes` does.
pub struct Lifetimes {
    pub tensors: Vec<Vec<Scopes>>,
    pub scratch: Vec<Scopes>,
    pub last_scope: i64,
}

/// Computes the lifetimes TFLM computes. `scratch` lists the requests to place (in request
/// order); each lives during its operator.
pub fn lifetimes(
    model: &Model,
    scratch: &[ScratchRequest],
    file: &str,
) -> Result<Lifetimes, TfliteError> {
    let mut walk = Walk {
        model,
        tensors: model
            .subgraphs
            .iter()
            .map(|s| vec![Scopes::UNSET; s.tensors.len()])
            .collect(),
        scratch_requests: scratch,
        scratch: vec![Scopes::UNSET; scratch.len()],
        scope: 0,
        depth: 0,
        file,
    };
    walk.subgraph(0)?;
    Ok(Lifetimes {
        last_scope: walk.scope,
        tensors: walk.tensors,
        scratch: walk.scratch,
    })
}

struct Walk<'a> {
    model: &'a Model,
    tensors: Vec<Vec<Scopes>>,
    scratch_requests: &'a [ScratchRequest],
    scratch: Vec<Scopes>,
    scope: i64,
    depth: usize,
    file: &'a str,
}

/// Nested `IF`/`WHILE` calls deeper than this are refused (TFLM would recurse forever on a
/// subgraph that runs itself).
const MAX_SUBGRAPH_DEPTH: usize = 64;

/// The most allocation scopes a model may take. TFLM walks a subgraph once per operator
/// that runs it, so subgraphs that each run the next one twice take exponentially many
/// scopes: such a file (a few KB) would keep memplan, and TFLM, busy for days.
pub const MAX_SCOPES: i64 = 1 << 24;

impl Walk<'_> {
    fn create(s: &mut Scopes, scope: i64) {
        if s.first == -1 {
            s.first = scope;
        }
    }

    fn subgraph(&mut self, index: usize) -> Result<(), TfliteError> {
        if self.depth >= MAX_SUBGRAPH_DEPTH {
            return Err(TfliteError::Unsupported {
                file: self.file.to_string(),
                what: format!(
                    "subgraph {index} is reached through more than {MAX_SUBGRAPH_DEPTH} nested IF/WHILE/CALL_ONCE operators (a subgraph that runs itself?)"
                ),
            });
        }
        self.depth += 1;
        let sg = &self.model.subgraphs[index];
        for &t in &sg.inputs {
            let s = &mut self.tensors[index][t];
            Self::create(s, self.scope);
            s.last = self.scope;
        }
        for (o, op) in sg.operators.iter().enumerate() {
            self.scope += 1;
            if self.scope > MAX_SCOPES {
                return Err(TfliteError::Unsupported {
                    file: self.file.to_string(),
                    what: format!(
                        "running subgraph {index} operator {o} ({}) takes TFLM past {MAX_SCOPES} allocation scopes: its IF/WHILE/CALL_ONCE operators run nested subgraphs exponentially many times",
                        op.kind()
                    ),
                });
            }
            for &t in &op.outputs {
                Self::create(&mut self.tensors[index][t], self.scope);
            }
            let start = self.scope;
            for &callee in &op.options.subgraphs {
                self.scope += 1;
                self.subgraph(callee)?;
            }
            for &t in op.inputs.iter().flatten() {
                self.tensors[index][t].last = self.scope;
            }
            for &t in &op.outputs {
                self.tensors[index][t].last = self.scope;
            }
            for (r, request) in self.scratch_requests.iter().enumerate() {
                if request.subgraph == index && request.operator == o {
                    Self::create(&mut self.scratch[r], start);
                    self.scratch[r].last = self.scope;
                }
            }
        }
        for &t in &sg.outputs {
            let s = &mut self.tensors[index][t];
            Self::create(s, self.scope);
            s.last = self.scope;
        }
        self.depth -= 1;
        Ok(())
    }
}

/// Rounds a size up to [`ARENA_ALIGNMENT`].
pub fn aligned(bytes: u64) -> Option<u64> {
    bytes.checked_next_multiple_of(ARENA_ALIGNMENT)
}

/// Builds the problem TFLM plans for `model`.
pub fn arena(model: &Model, options: ArenaOptions, file: &str) -> Result<Arena, TfliteError> {
    let (requests, unmodelled) = if options.scratch {
        scratch::requests(model)
    } else {
        (Vec::new(), Vec::new())
    };
    // TFLM refuses intermediates that are not empty (`ValidateSubgraph`).
    for (s, sg) in model.subgraphs.iter().enumerate() {
        for (o, op) in sg.operators.iter().enumerate() {
            for &t in &op.intermediates {
                let tensor = &sg.tensors[t];
                if tensor.bytes != 0 {
                    return Err(TfliteError::Unsupported {
                        file: file.to_string(),
                        what: format!(
                            "subgraph {s} operator {o} ({}) has intermediate tensor {t} '{}' of {} bytes; TFLite Micro supports only empty intermediates and refuses this model",
                            op.kind(),
                            crate::display_name(&tensor.name),
                            tensor.bytes
                        ),
                    });
                }
            }
        }
    }
    let lifetimes = lifetimes(model, &requests, file)?;
    let mut subgraph_offsets = Vec::with_capacity(model.subgraphs.len());
    let mut tensor_count = 0usize;
    for sg in &model.subgraphs {
        subgraph_offsets.push(tensor_count);
        tensor_count += sg.tensors.len();
    }
    let offline = if options.keep_offline_plan {
        crate::offline::read(model, file)?
    } else {
        None
    };
    if let Some(offsets) = &offline {
        if offsets.len() != tensor_count {
            return Err(TfliteError::OfflinePlan {
                file: file.to_string(),
                what: format!(
                    "it has {} offsets but the model has {tensor_count} tensors (TFLM refuses it)",
                    offsets.len()
                ),
            });
        }
    }
    let offline_of =
        |s: usize, t: usize| offline.as_ref().map_or(-1, |o| o[subgraph_offsets[s] + t]);

    // Which tensors TFLM plans (`needs_allocating`), in its order.
    let mut planned: Vec<(usize, usize)> = Vec::new();
    for (s, sg) in model.subgraphs.iter().enumerate() {
        for (t, tensor) in sg.tensors.iter().enumerate() {
            let has_data = model
                .buffers
                .get(tensor.buffer)
                .is_some_and(|b| b.has_data());
            let needs =
                !has_data && tensor.bytes != 0 && (!tensor.is_variable || offline_of(s, t) != -1);
            if needs {
                planned.push((s, t));
            }
        }
    }
    let groups = sharing::groups(model, &planned, &lifetimes, options.sharing);

    let mut buffers = Vec::with_capacity(groups.len() + requests.len());
    let mut entries = Vec::with_capacity(groups.len() + requests.len());
    let mut names = std::collections::HashSet::new();
    for group in groups {
        let (s, t) = group[0];
        let mut start = u64::MAX;
        let mut end = 0;
        let mut size = 0;
        for &(gs, gt) in &group {
            let (a, b) = lifetimes.tensors[gs][gt].steps();
            start = start.min(a);
            end = end.max(b);
            size = size.max(model.subgraphs[gs].tensors[gt].bytes);
        }
        let size = aligned(size).ok_or_else(|| TfliteError::Invalid {
            file: file.to_string(),
            what: format!("subgraph {s} tensor {t}: its size overflows 64 bits when aligned"),
        })?;
        let tensor = &model.subgraphs[s].tensors[t];
        let name = unique_name(&mut names, buffer_name(model, s, t, &tensor.name));
        let mut buffer = Buffer::new(name, size, start, end);
        buffer.alignment = ARENA_ALIGNMENT;
        buffers.push(buffer);
        entries.push(Entry::Tensors(group));
    }
    for (r, request) in requests.iter().enumerate() {
        let (start, end) = lifetimes.scratch[r].steps();
        let size = aligned(request.bytes).ok_or_else(|| TfliteError::Invalid {
            file: file.to_string(),
            what: format!(
                "{}: its size overflows 64 bits when aligned",
                request.describe(model)
            ),
        })?;
        if size == 0 {
            continue;
        }
        let name = unique_name(
            &mut names,
            format!(
                "scratch:{}#{}",
                request.operator_label(model),
                request.index
            ),
        );
        let mut buffer = Buffer::new(name, size, start, end);
        buffer.alignment = ARENA_ALIGNMENT;
        buffers.push(buffer);
        entries.push(Entry::Scratch(request.clone()));
    }
    let problem = Problem::from_buffers(buffers).map_err(|e| TfliteError::Invalid {
        file: file.to_string(),
        what: format!("the arena problem is invalid: {e}"),
    })?;
    Ok(Arena {
        problem,
        entries,
        tensor_count,
        subgraph_offsets,
        unmodelled,
        caveats: caveats(model),
        last_scope: lifetimes.last_scope,
        offline,
    })
}

/// A tensor's buffer name: its own name (subgraphs after the first prefixed `sgN/`), or
/// `tensor N` when it has none.
fn buffer_name(model: &Model, s: usize, t: usize, name: &str) -> String {
    let base = if name.is_empty() {
        format!("tensor{t}")
    } else {
        name.to_string()
    };
    if model.subgraphs.len() > 1 && s > 0 {
        format!("sg{s}/{base}")
    } else {
        base
    }
}

/// `name`, or `name#2`, `name#3`… when taken (TFLite does not require unique names).
fn unique_name(taken: &mut std::collections::HashSet<String>, name: String) -> String {
    if taken.insert(name.clone()) {
        return name;
    }
    let mut k = 2;
    loop {
        let candidate = format!("{name}#{k}");
        if taken.insert(candidate.clone()) {
            return candidate;
        }
        k += 1;
    }
}
