//! NPU heterogeneous-platform allocation (the `npu` method): the platform description, every
//! operator's configuration (the tensors present while it runs, its width) and the
//! method's three groups, handed to the shared-objects allocation of
//! [`memplan::planner::npu`].
//!
//! ```text
//!  platform JSON ──► Platform (accelerated ops, in-place ops, alignment)
//!        │
//!  graph ─┴► analyse with the platform's in-place ops ──► blocks (buffers), lifetimes
//!        │
//!        └► operator configuration: per operator (step s), the blocks live at s and
//!           their bytes (its width); its group: 1 accelerated, 2 in place, 3 other
//!        │
//!        └► Groups: 1 the accelerated operators' input and output blocks (first in the
//!           pool by default, or dedicated / reusable per `accelerator_buffers`),
//!           2 the in-place operators' blocks, 3 the other operators' steps ──► assign
//! ```
//!
//! The unit of allocation is a *block*, a buffer of the [`Analysis`]: a tensor, or the
//! tensors sharing one storage (a view and its input; an in-place output and its input).
//! The method's group 2 ("the output reuses the input's memory") is therefore decided by
//! the analysis, under its rules (the input dies at the operator, same size and type, no
//! graph input or output overwritten), with the platform's in-place list in place of
//! [`crate::analysis::INPLACE_OPS`]: such an output is in its input's block. An operator
//! of the in-place list whose output could not be written in place belongs to group 3.

use memplan::planner::npu::{assign, Assignment, Groups, Layout, Match, Slack};
use memplan::planner::PlanError;
use memplan::{bound, Buffer, BufferId, Lifetime, Problem, ProblemError};
use serde::Deserialize;

use crate::analysis::{analyse_with_inplace_ops, Analysis, AnalysisError, Options, INPLACE_OPS};
use crate::ir::{Graph, NodeId, ValueId, ValueKind};
use crate::order::Order;

/// The default platform profile (`platforms/default-npu.json` in the repository;
/// `src/default-npu.json` is a link to it, so that the packaged crate carries the file).
pub const DEFAULT_PLATFORM_JSON: &str = include_str!("default-npu.json");

/// A platform description: what runs on the accelerator, what may run in place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Platform {
    /// Its name (the file's `name`, else the file name).
    pub name: String,
    /// Operator types that run on the accelerator (group 1).
    pub accelerated: Vec<String>,
    /// Operator types that may write their output over an input (group 2); each one of
    /// [`INPLACE_OPS`].
    pub in_place: Vec<String>,
    /// Every tensor's offset is a multiple of this.
    pub alignment: u64,
    /// How the accelerated operators' tensors get memory.
    pub accelerator_buffers: AcceleratorBuffers,
    /// Whether the weights and constants that accelerated operators read are planned
    /// (buffers of the problem, group 1) instead of staying out of the arena.
    pub plan_weights: bool,
    /// The usage period of a planned weight.
    pub weight_lifetime: WeightLifetime,
}

/// The usage period of a weight or constant planned with `plan_weights`; the platform
/// file's `weight_lifetime`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WeightLifetime {
    /// From the first step that reads it (or its producer's, for a `Constant` node's
    /// output) to the last step that reads it, by any operator: the usage period the
    /// method computes from the topology for every tensor (the `npu` method), i.e. the
    /// weight is loaded before its first reader and may be overwritten after its last.
    #[default]
    Uses,
    /// The whole run, steps `[0, n + 1)`: weights loaded once with the model and kept.
    Run,
}

impl WeightLifetime {
    /// The name as the platform file spells it.
    pub fn name(self) -> &'static str {
        match self {
            WeightLifetime::Uses => "uses",
            WeightLifetime::Run => "run",
        }
    }
}

/// How group 1 (the accelerated operators' tensors) gets memory; the platform file's
/// `accelerator_buffers`, overridden by the planner option `npu:group1=...`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AcceleratorBuffers {
    /// Each tensor a new buffer of its own that no other tensor ever uses (the earlier,
    /// uncorrected reading of the `npu` method: "each its own memory").
    Dedicated,
    /// Each tensor a new buffer of its own, which tensors of groups 2 and 3 may reuse
    /// once the tensors in it are dead.
    Reusable,
    /// Each tensor, first and in group order, looks in the pool like every other tensor,
    /// and the buffers it creates are the pool that groups 2 and 3 search: group 1 only
    /// comes first. The `npu` method (corrected) and the default.
    #[default]
    Pooled,
}

impl AcceleratorBuffers {
    /// The name as the platform file spells it.
    pub fn name(self) -> &'static str {
        match self {
            AcceleratorBuffers::Dedicated => "dedicated",
            AcceleratorBuffers::Reusable => "reusable",
            AcceleratorBuffers::Pooled => "pooled",
        }
    }

    /// Reads back [`AcceleratorBuffers::name`].
    pub fn parse(text: &str) -> Option<AcceleratorBuffers> {
        [
            AcceleratorBuffers::Dedicated,
            AcceleratorBuffers::Reusable,
            AcceleratorBuffers::Pooled,
        ]
        .into_iter()
        .find(|b| b.name() == text)
    }
}

/// The keys of a platform file.
pub const PLATFORM_KEYS: &[&str] = &[
    "name",
    "description",
    "accelerated",
    "in_place",
    "alignment",
    "accelerator_buffers",
    "plan_weights",
    "weight_lifetime",
];

/// What is wrong with a platform file, naming the file and the key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlatformError {
    #[error("platform file '{source_name}': {message}; the keys are name, description, accelerated, in_place, alignment, accelerator_buffers, plan_weights, weight_lifetime (see doc/npu.md)")]
    Json {
        source_name: String,
        message: String,
    },
    #[error("platform file '{source_name}': unknown key '{key}'; the keys are name, description, accelerated, in_place, alignment, accelerator_buffers, plan_weights, weight_lifetime (see doc/npu.md)")]
    UnknownKey { source_name: String, key: String },
    #[error("platform file '{source_name}': key '{key}': {message}; expected {expected}")]
    BadValue {
        source_name: String,
        key: &'static str,
        message: String,
        expected: &'static str,
    },
    #[error("platform file '{source_name}': key '{key}', entry {index}: '{op}' {why}")]
    BadOp {
        source_name: String,
        key: &'static str,
        index: usize,
        op: String,
        why: String,
    },
    #[error("platform file '{source_name}': key 'alignment' is 0; use 1 for no alignment")]
    ZeroAlignment { source_name: String },
}

/// The value of `key` in `map`, read as a `T` (`expected` says what in errors); `None`
/// when the key is absent.
fn field<T: serde::de::DeserializeOwned>(
    map: &serde_json::Map<String, serde_json::Value>,
    key: &'static str,
    expected: &'static str,
    source: &str,
) -> Result<Option<T>, PlatformError> {
    match map.get(key) {
        None => Ok(None),
        Some(value) => T::deserialize(value)
            .map(Some)
            .map_err(|e| PlatformError::BadValue {
                source_name: source.to_string(),
                key,
                message: e.to_string(),
                expected,
            }),
    }
}

impl Platform {
    /// Parses a platform JSON; `source` names the file in errors.
    pub fn parse(text: &str, source: &str) -> Result<Platform, PlatformError> {
        let json_error = |message: String| PlatformError::Json {
            source_name: source.to_string(),
            message,
        };
        let text = memplan::io::json_object(text).map_err(|found| {
            json_error(format!(
                "the top level is {found}; a platform file is one JSON object, e.g. {{\"accelerated\": [\"Conv\"]}}"
            ))
        })?;
        let map: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(text).map_err(|e| json_error(e.to_string()))?;
        if let Some(key) = map.keys().find(|k| !PLATFORM_KEYS.contains(&k.as_str())) {
            return Err(PlatformError::UnknownKey {
                source_name: source.to_string(),
                key: key.clone(),
            });
        }
        const OPS: &str = "a list of operator types, e.g. [\"Conv\", \"MatMul\"]";
        let file = PlatformFile {
            name: field(&map, "name", "a string", source)?,
            accelerated: field(&map, "accelerated", OPS, source)?.unwrap_or_default(),
            in_place: field(&map, "in_place", OPS, source)?.unwrap_or_default(),
            alignment: field(&map, "alignment", "an integer >= 1", source)?,
            accelerator_buffers: field(
                &map,
                "accelerator_buffers",
                "\"pooled\", \"reusable\" or \"dedicated\"",
                source,
            )?
            .unwrap_or_default(),
            plan_weights: field(&map, "plan_weights", "true or false", source)?.unwrap_or_default(),
            weight_lifetime: field(&map, "weight_lifetime", "\"uses\" or \"run\"", source)?
                .unwrap_or_default(),
        };
        let _: Option<String> = field(&map, "description", "a string", source)?;
        let bad = |key: &'static str, index: usize, op: &str, why: &str| PlatformError::BadOp {
            source_name: source.to_string(),
            key,
            index,
            op: op.to_string(),
            why: why.to_string(),
        };
        let is_op_type = |op: &str| {
            op.chars().next().is_some_and(|c| c.is_ascii_uppercase())
                && op.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        };
        for (key, list) in [
            ("accelerated", &file.accelerated),
            ("in_place", &file.in_place),
        ] {
            for (index, op) in list.iter().enumerate() {
                if !is_op_type(op) {
                    return Err(bad(
                        key,
                        index,
                        op,
                        "is not an operator type: operator types are ONNX names such as Conv, MatMul, Relu (a capital letter, then letters, digits or _)",
                    ));
                }
            }
        }
        for (index, op) in file.in_place.iter().enumerate() {
            if !INPLACE_OPS.contains(&op.as_str()) {
                return Err(bad(
                    "in_place",
                    index,
                    op,
                    &format!(
                        "is not an elementwise operator memplan can run in place; the ones it can: {}",
                        INPLACE_OPS.join(", ")
                    ),
                ));
            }
        }
        if file.alignment == Some(0) {
            return Err(PlatformError::ZeroAlignment {
                source_name: source.to_string(),
            });
        }
        Ok(Platform {
            name: file.name.unwrap_or_else(|| source.to_string()),
            accelerated: file.accelerated,
            in_place: file.in_place,
            alignment: file.alignment.unwrap_or(1),
            accelerator_buffers: file.accelerator_buffers,
            plan_weights: file.plan_weights,
            weight_lifetime: file.weight_lifetime,
        })
    }

    /// The shipped default profile ([`DEFAULT_PLATFORM_JSON`]).
    pub fn default_profile() -> Platform {
        Platform::parse(DEFAULT_PLATFORM_JSON, "platforms/default-npu.json")
            .expect("the shipped default platform parses (tested)")
    }

    fn is_accelerated(&self, op: &str) -> bool {
        self.accelerated.iter().any(|a| a == op)
    }

    fn is_in_place(&self, op: &str) -> bool {
        self.in_place.iter().any(|a| a == op)
    }
}

/// The file as read.
struct PlatformFile {
    name: Option<String>,
    accelerated: Vec<String>,
    in_place: Vec<String>,
    alignment: Option<u64>,
    accelerator_buffers: AcceleratorBuffers,
    plan_weights: bool,
    weight_lifetime: WeightLifetime,
}

/// The method's group of an operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpGroup {
    /// 1: runs on the accelerator (its type is in `accelerated`; this wins over
    /// `in_place`).
    Accelerated,
    /// 2: its type is in `in_place` and the analysis wrote its output over an input.
    InPlace,
    /// 3: every other operator.
    Other,
}

impl OpGroup {
    /// `accelerated`, `in-place` or `other`.
    pub fn name(self) -> &'static str {
        match self {
            OpGroup::Accelerated => "accelerated",
            OpGroup::InPlace => "in-place",
            OpGroup::Other => "other",
        }
    }
}

/// An operator's configuration information (the `npu` method).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperatorConfig {
    pub node: NodeId,
    /// The step it runs at (its position in the execution order + 1).
    pub step: u64,
    pub group: OpGroup,
    /// The blocks present in memory while it runs (live at its step), in id order; each
    /// block's usage period is its buffer's lifetime in [`Analysis::problem`].
    pub present: Vec<BufferId>,
    /// Its width: the bytes of the present blocks.
    pub width: u64,
}

/// Every operator's configuration, in execution order, for `analysis` (made from `graph`
/// with the platform's in-place list, see [`analyse_for`]).
pub fn operator_configs(
    graph: &Graph,
    analysis: &Analysis,
    platform: &Platform,
) -> Result<Vec<OperatorConfig>, AnalysisError> {
    let buffers = analysis.problem.buffers();
    let profile = bound::live_profile(&analysis.problem).ok_or(AnalysisError::Overflow)?;
    // The blocks live at each step, by one pass over every block's live segments (time:
    // the blocks plus the sum of the present lists, not blocks × operators).
    let steps = analysis.order.len() as u64;
    let mut present_at: Vec<Vec<BufferId>> = vec![Vec::new(); analysis.order.len()];
    for (i, buffer) in buffers.iter().enumerate() {
        buffer.for_each_live_segment(|s| {
            for step in s.start.max(1)..s.end.min(steps + 1) {
                present_at[step as usize - 1].push(BufferId(i as u32));
            }
        });
    }
    let mut configs = Vec::with_capacity(analysis.order.len());
    for (position, &node) in analysis.order.iter().enumerate() {
        let step = position as u64 + 1;
        let op = graph.node(node);
        let written_in_place = op
            .outputs
            .first()
            .is_some_and(|y| analysis.values[y.index()].inplace_of.is_some());
        let group = if platform.is_accelerated(&op.op_type) {
            OpGroup::Accelerated
        } else if platform.is_in_place(&op.op_type) && written_in_place {
            OpGroup::InPlace
        } else {
            OpGroup::Other
        };
        let present = std::mem::take(&mut present_at[position]);
        configs.push(OperatorConfig {
            node,
            step,
            group,
            present,
            width: memplan::planner::npu::live_at(&profile, step),
        });
    }
    Ok(configs)
}

/// The analysis the method plans: [`crate::analyse`] with the platform's in-place list.
/// With the default profile (every operator of [`INPLACE_OPS`]) it is the analysis every
/// other graph planner plans.
///
/// When the platform says `plan_weights`, every weight or constant (of at least one byte)
/// that an accelerated operator reads is a buffer of the problem too, after the arena's
/// buffers, in graph order, with the usage period `weight_lifetime` gives it (see
/// [`WeightLifetime`]); its value gets that lifetime and buffer (its role stays
/// [`crate::Role::Weight`] or [`crate::Role::Constant`]). Weights that only other operators
/// read stay out, as in [`crate::analyse`].
pub fn analyse_for(
    graph: &Graph,
    order: Order,
    options: Options,
    platform: &Platform,
) -> Result<Analysis, AnalysisError> {
    let mut analysis = analyse_with_inplace_ops(graph, order, options, &platform.in_place)?;
    if platform.plan_weights {
        add_weights(graph, &mut analysis, platform)?;
    }
    Ok(analysis)
}

/// The weights and constants that accelerated operators read, as buffers of `analysis`.
fn add_weights(
    graph: &Graph,
    analysis: &mut Analysis,
    platform: &Platform,
) -> Result<(), AnalysisError> {
    let mut step_of = vec![0u64; graph.nodes().len()];
    for (position, &node) in analysis.order.iter().enumerate() {
        step_of[node.index()] = position as u64 + 1;
    }
    let mut buffers = analysis.problem.buffers().to_vec();
    for (index, value) in graph.values().iter().enumerate() {
        if !matches!(value.kind, ValueKind::Weight | ValueKind::Constant) || value.bytes == 0 {
            continue;
        }
        let read_by_accelerator = value
            .consumers
            .iter()
            .any(|(node, _)| platform.is_accelerated(&graph.node(*node).op_type));
        if !read_by_accelerator {
            continue;
        }
        let (start, end) = match platform.weight_lifetime {
            WeightLifetime::Run => (0, analysis.last_step + 1),
            WeightLifetime::Uses => {
                let steps = value
                    .consumers
                    .iter()
                    .map(|(node, _)| step_of[node.index()])
                    .chain(value.producer.map(|(node, _)| step_of[node.index()]));
                let first = steps.clone().min().unwrap_or(0);
                let last = steps.max().unwrap_or(0);
                (first, last + 1)
            }
        };
        let id = ValueId(index as u32);
        let buffer = BufferId(buffers.len() as u32);
        let info = &mut analysis.values[index];
        info.lifetime = Lifetime::new(start, end);
        info.buffer = Some(buffer);
        buffers.push(Buffer::new(value.name.clone(), value.bytes, start, end));
        analysis.buffer_values.push(vec![id]);
    }
    if buffers.len() > analysis.problem.len() {
        analysis.problem = Problem::from_buffers(buffers)?;
        analysis.stats.max_live_bytes =
            bound::max_live(&analysis.problem).ok_or(AnalysisError::Overflow)?;
    }
    Ok(())
}

/// The method's groups for the shared-objects allocation: group 1 the input and output
/// blocks of the accelerated operators (execution order, input slots then output slots;
/// first in the pool when [`AcceleratorBuffers::Pooled`], else new objects), group 2 the
/// in-place operators' blocks, group 3 the other operators' steps.
pub fn npu_groups(
    graph: &Graph,
    analysis: &Analysis,
    configs: &[OperatorConfig],
    platform: &Platform,
) -> Groups {
    let mut groups = Groups {
        share_dedicated: platform.accelerator_buffers == AcceleratorBuffers::Reusable,
        ..Groups::default()
    };
    let mut in_place = Vec::new();
    let block = |v: crate::ir::ValueId| analysis.values[v.index()].buffer;
    for config in configs {
        let node = graph.node(config.node);
        match config.group {
            OpGroup::Accelerated => groups.dedicated.extend(
                node.inputs
                    .iter()
                    .flatten()
                    .chain(&node.outputs)
                    .filter_map(|&v| block(v)),
            ),
            OpGroup::InPlace => in_place.extend(node.outputs.first().and_then(|&y| block(y))),
            OpGroup::Other => groups.steps.push(config.step),
        }
    }
    if platform.accelerator_buffers == AcceleratorBuffers::Pooled {
        groups.early = std::mem::take(&mut groups.dedicated);
    }
    groups.early.extend(in_place);
    groups
}

/// Why the method could not plan a graph.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NpuError {
    #[error(transparent)]
    Analysis(#[from] AnalysisError),
    #[error(transparent)]
    Problem(#[from] ProblemError),
    #[error(transparent)]
    Plan(#[from] PlanError),
}

/// What the allocation needs for one graph.
#[derive(Clone, Debug)]
pub struct NpuInput {
    /// The problem planned: the analysis' buffers with the platform's alignment.
    pub problem: Problem,
    pub configs: Vec<OperatorConfig>,
    pub groups: Groups,
}

/// The problem, the operator configuration and the groups of `analysis` (from
/// [`analyse_for`]); every alignment is raised to the platform's and to `alignment` (1:
/// none beyond the platform's).
pub fn npu_input(
    graph: &Graph,
    analysis: &Analysis,
    platform: &Platform,
    alignment: u64,
) -> Result<NpuInput, NpuError> {
    let problem = analysis
        .problem
        .with_alignment(platform.alignment)?
        .with_alignment(alignment)?;
    let configs = operator_configs(graph, analysis, platform)?;
    let groups = npu_groups(graph, analysis, &configs, platform);
    Ok(NpuInput {
        problem,
        configs,
        groups,
    })
}

/// Everything the method produced for one graph.
#[derive(Clone, Debug)]
pub struct NpuPlan {
    /// The problem planned: the analysis' buffers with the platform's alignment.
    pub problem: Problem,
    pub configs: Vec<OperatorConfig>,
    /// Shared objects, each block's object, the statistics and the arena plan.
    pub assignment: Assignment,
}

/// Plans `analysis` (from [`analyse_for`]) with the method ([`npu_input`], then
/// [`assign`] with `rule`, `slack` and `layout`); the caller checks the plan like every
/// plan.
#[allow(clippy::too_many_arguments)]
pub fn plan_npu(
    graph: &Graph,
    analysis: &Analysis,
    platform: &Platform,
    rule: Match,
    slack: Slack,
    layout: Layout,
    alignment: u64,
) -> Result<NpuPlan, NpuError> {
    let input = npu_input(graph, analysis, platform, alignment)?;
    let assignment = assign(&input.problem, &input.groups, rule, slack, layout)?;
    Ok(NpuPlan {
        problem: input.problem,
        configs: input.configs,
        assignment,
    })
}
