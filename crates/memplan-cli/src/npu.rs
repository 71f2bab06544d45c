//! `--planner npu` (the `npu` method): the `--platform` and `--match` flags, the problem and
//! groups the planner runs on, its report, and `memplan inspect --operators`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use memplan::planner::npu::{Assignment, Layout, Match, Slack};

use memplan::Plan;
use memplan_graph::{AcceleratorBuffers, OperatorConfig, Platform};
use serde_json::json;

use crate::commands::emit;
use crate::input::{self, GraphSettings, Loaded};
use crate::table::{bytes, columns, key_values};
use crate::InspectFormat;
use memplan_session::spec::PlannerSpec;
pub use memplan_session::spec::{parse_group1, parse_slack};

/// `--platform`: the platform description of `--planner npu` and `inspect --operators`.
#[derive(Args, Clone, Debug, Default)]
pub struct PlatformArg {
    /// npu: the platform description, a JSON file (see doc/npu.md); default: the shipped
    /// profile platforms/default-npu.json.
    #[arg(long, value_name = "FILE")]
    pub platform: Option<PathBuf>,
}

/// The flags of `--planner npu` (ignored by the other planners).
#[derive(Args, Clone, Debug, Default)]
pub struct NpuArgs {
    #[command(flatten)]
    pub platform: PlatformArg,
    /// npu: how a tensor picks a free buffer of the pool. The default, exact, is a
    /// deviation from the method: only buffers of exactly the tensor's size. size is the
    /// method's size match as stated: the closest size at least the tensor's. lifetime:
    /// the closest usage period in time (grown when smaller). See doc/npu.md.
    #[arg(long = "match", value_enum, default_value_t = MatchArg::Exact)]
    pub match_rule: MatchArg,
    /// npu: how the accelerated operators' tensors get memory, overriding the platform's
    /// `accelerator_buffers`: pooled (first, through the buffer pool), reusable (a new
    /// buffer each, later tensors may join it) or dedicated (a buffer each, never shared).
    #[arg(long = "group1", value_name = "pooled|reusable|dedicated", value_parser = parse_group1)]
    pub group1: Option<AcceleratorBuffers>,
    /// npu: how the shared buffers get offsets: placed by an offset planner over their own
    /// lifetimes, or end to end.
    #[arg(long = "npu-layout", value_enum, default_value_t = LayoutArg::Offsets)]
    pub layout: LayoutArg,
    /// npu, `--match size` only: a pool buffer matches a tensor when it is larger by at
    /// most this percentage (a deviation from the method; 0 is `--match exact`), or `any`
    /// (the default: the least difference, however large, as the method states it).
    #[arg(long = "slack", value_name = "PERCENT|any", value_parser = parse_slack)]
    pub slack: Option<Slack>,
}

/// `--npu-layout` and the spec option `layout=`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum LayoutArg {
    /// The shared buffers placed by an offset planner over their own lifetimes.
    #[default]
    Offsets,
    /// The shared buffers end to end.
    EndToEnd,
}

impl LayoutArg {
    fn layout(self) -> Layout {
        match self {
            LayoutArg::Offsets => Layout::Offsets,
            LayoutArg::EndToEnd => Layout::EndToEnd,
        }
    }
}

/// `--match`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum MatchArg {
    /// The default, a deviation from the method: a free buffer of exactly the tensor's
    /// size (size match restricted to equal sizes).
    #[default]
    Exact,
    /// The method's size match: among free buffers of size ≥ the tensor's, the one whose
    /// size differs least.
    Size,
    /// Among free buffers, the one whose usage periods are closest in time.
    Lifetime,
}

impl MatchArg {
    fn of(rule: Match) -> MatchArg {
        match rule {
            Match::Exact => MatchArg::Exact,
            Match::Size => MatchArg::Size,
            Match::Lifetime => MatchArg::Lifetime,
        }
    }

    fn rule(self) -> Match {
        match self {
            MatchArg::Exact => Match::Exact,
            MatchArg::Size => Match::Size,
            MatchArg::Lifetime => Match::Lifetime,
        }
    }
}

/// The npu flags of `spec`: `args` with the spec's npu options over them.
pub fn spec_args(spec: &PlannerSpec, args: &NpuArgs) -> NpuArgs {
    let mut args = args.clone();
    if let Some(rule) = spec.match_rule() {
        args.match_rule = MatchArg::of(rule);
    }
    if let Some(path) = spec.platform() {
        args.platform.platform = Some(path.to_path_buf());
    }
    if let Some(group1) = spec.group1() {
        args.group1 = Some(group1);
    }
    if let Some(layout) = spec.layout() {
        args.layout = match layout {
            Layout::Offsets => LayoutArg::Offsets,
            Layout::EndToEnd => LayoutArg::EndToEnd,
        };
    }
    if let Some(slack) = spec.slack() {
        args.slack = Some(slack);
    }
    args
}

impl NpuArgs {
    /// True when `--platform`, `--group1`, `--slack` or a non-default `--match` or
    /// `--npu-layout` was given.
    pub fn is_set(&self) -> bool {
        self.platform.platform.is_some()
            || self.match_rule != MatchArg::Exact
            || self.group1.is_some()
            || self.layout != LayoutArg::Offsets
            || self.slack.is_some()
    }
}

impl PlatformArg {
    /// The platform file's description, or the shipped default; and how to name it.
    pub fn load(&self) -> Result<(Platform, String)> {
        memplan_session::npu::load_platform(self.platform.as_deref())
    }
}

pub use memplan_session::npu::{source_name, Prepared};

impl NpuArgs {
    /// The clap-free options of these flags, for [`memplan_session::npu::prepare`].
    pub fn options(&self) -> memplan_session::npu::NpuOptions {
        memplan_session::npu::NpuOptions {
            platform_file: self.platform.platform.clone(),
            rule: self.match_rule.rule(),
            group1: self.group1,
            layout: self.layout.layout(),
            slack: self.slack,
        }
    }
}

/// [`memplan_session::npu::prepare`] with the flags of `args`.
pub fn prepare(
    file: &Path,
    loaded: &Loaded,
    settings: &GraphSettings,
    args: &NpuArgs,
    alignment: u64,
) -> Result<Prepared> {
    memplan_session::npu::prepare(file, loaded, settings, &args.options(), alignment)
}

/// The tensors of each shared buffer: the values of its blocks (graph), or the buffer
/// names (CSV).
fn tensors_of(prepared: &Prepared, assignment: &Assignment) -> Vec<Vec<String>> {
    assignment
        .objects
        .iter()
        .map(|object| {
            object
                .members
                .iter()
                .flat_map(|&b| match &prepared.graph {
                    Some(part) => part.analysis.buffer_values[b.index()]
                        .iter()
                        .map(|&v| part.graph.value(v).name.clone())
                        .collect(),
                    None => vec![prepared.problem.buffer(b).name.clone()],
                })
                .collect()
        })
        .collect()
}

/// Group sizes as `N accelerated, M in-place, K other`.
fn group_counts(configs: &[OperatorConfig]) -> String {
    let count = |g| configs.iter().filter(|c| c.group == g).count();
    format!(
        "{} accelerated, {} in-place, {} other",
        count(memplan_graph::OpGroup::Accelerated),
        count(memplan_graph::OpGroup::InPlace),
        count(memplan_graph::OpGroup::Other)
    )
}

/// The plan JSON's npu fields: platform, match rule, statistics, and every shared buffer
/// with its offset and tensors.
pub fn json_extras(
    prepared: &Prepared,
    assignment: &Assignment,
    extra: &mut serde_json::Map<String, serde_json::Value>,
) {
    let stats = assignment.stats;
    extra.insert("platform".into(), json!(prepared.platform.name));
    // What `memplan check` needs to rebuild the problem (null: the built-in default).
    extra.insert(
        "platform_file".into(),
        json!(prepared
            .platform_file
            .as_ref()
            .map(|p| p.display().to_string())),
    );
    extra.insert(
        "accelerator_buffers".into(),
        json!(prepared.platform.accelerator_buffers.name()),
    );
    if prepared.platform.plan_weights {
        // Only when on, so that the plans of other platforms stay as they were.
        extra.insert("plan_weights".into(), json!(true));
        extra.insert(
            "weight_lifetime".into(),
            json!(prepared.platform.weight_lifetime.name()),
        );
    }
    extra.insert("match".into(), json!(prepared.rule.name()));
    if prepared.rule == Match::Size {
        // Only where it applies.
        extra.insert("slack".into(), json!(prepared.slack.to_string()));
    }
    extra.insert("layout".into(), json!(prepared.layout.name()));
    extra.insert("pool_buffers".into(), json!(stats.buffers));
    extra.insert("dedicated_buffers".into(), json!(stats.dedicated_buffers));
    extra.insert("reused_bytes".into(), json!(stats.reused_bytes));
    extra.insert("new_pool_bytes".into(), json!(stats.new_pool_bytes));
    extra.insert("grown_bytes".into(), json!(stats.grown_bytes));
    let offsets = object_offsets(assignment, &assignment.plan);
    let list: Vec<_> = assignment
        .objects
        .iter()
        .zip(tensors_of(prepared, assignment))
        .zip(offsets)
        .map(|((object, tensors), offset)| {
            json!({
                "size": object.size,
                "offset": offset,
                "dedicated": object.dedicated,
                "tensors": tensors,
            })
        })
        .collect();
    extra.insert("shared_buffers".into(), json!(list));
}

/// Each object's offset: its first member's.
fn object_offsets(assignment: &Assignment, plan: &Plan) -> Vec<u64> {
    assignment
        .objects
        .iter()
        .map(|o| o.members.first().map_or(0, |&m| plan.offset(m)))
        .collect()
}

/// The key-value rows of the plan table.
pub fn table_rows(prepared: &Prepared, assignment: &Assignment) -> Vec<(&'static str, String)> {
    let stats = assignment.stats;
    let mut rows = vec![
        (
            "platform",
            format!(
                "{} ({}), alignment {}, accelerator buffers {}",
                prepared.platform.name,
                source_name(prepared.platform_file.as_deref()),
                prepared.platform.alignment,
                prepared.platform.accelerator_buffers.name()
            ) + &if prepared.platform.plan_weights {
                format!(
                    ", accelerators' weights planned (live: {})",
                    prepared.platform.weight_lifetime.name()
                )
            } else {
                String::new()
            },
        ),
        (
            "match",
            match prepared.rule {
                Match::Exact => {
                    "exact (equal sizes only: a deviation from the method's size match, --match size)"
                        .to_string()
                }
                Match::Size => format!("size, slack {}", prepared.slack),
                Match::Lifetime => "lifetime".to_string(),
            },
        ),
        ("layout", prepared.layout.name().to_string()),
    ];
    if let Some(part) = &prepared.graph {
        rows.push(("operators", group_counts(&part.configs)));
    }
    let mut pool = format!(
        "{} shared buffers ({} dedicated), {} reused, {} new pool",
        stats.buffers,
        stats.dedicated_buffers,
        bytes(stats.reused_bytes),
        bytes(stats.new_pool_bytes)
    );
    if stats.grown_bytes > 0 {
        pool.push_str(&format!(" ({} by growing)", bytes(stats.grown_bytes)));
    }
    rows.push(("pool", pool));
    rows
}

/// The platform an npu plan file was made with, for `memplan check` to rebuild its
/// problem: `--platform` when given, else the plan's `platform_file`, else the built-in
/// default; the platform's name must be the plan's `platform`. `None` for the plan of
/// another planner, which `--platform` does not apply to.
pub fn plan_platform(
    plan_path: &Path,
    summary: &memplan::io::json::PlanSummary,
    given: &PlatformArg,
) -> Result<Option<PlatformArg>> {
    let plan = plan_path.display();
    if summary.planner != memplan::planner::Planner::name(&memplan::planner::Npu::default()) {
        if let Some(path) = &given.platform {
            anyhow::bail!(
                "--platform '{}' applies to the plans of --planner npu only, and '{plan}' is a plan of '{}'",
                path.display(),
                summary.planner
            );
        }
        return Ok(None);
    }
    let Some(serde_json::Value::String(recorded)) = summary.extra.get("platform") else {
        anyhow::bail!(
            "'{plan}' is an npu plan but does not record its \"platform\" (the platform's name); plan again with `memplan plan --planner npu -f json`"
        );
    };
    let recorded_file = match summary.extra.get("platform_file") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(path)) => Some(PathBuf::from(path)),
        Some(other) => anyhow::bail!(
            "'{plan}': \"platform_file\" must be a path string or null (the built-in default), not {other}"
        ),
    };
    // A plan is data: memplan never opens a path written inside it. The file it names
    // is only a hint for the error message.
    if let (None, Some(file)) = (&given.platform, &recorded_file) {
        anyhow::bail!(
            "'{plan}' was made with the platform file '{}' (its \"platform_file\"); memplan does not open files named inside a plan: pass it with --platform '{}'",
            file.display(),
            file.display()
        );
    }
    let chosen = PlatformArg {
        platform: given.platform.clone(),
    };
    let (platform, _) = chosen
        .load()
        .context("cannot load the platform given with --platform")?;
    if &platform.name != recorded {
        let hint = if given.platform.is_some() {
            "pass the platform file the plan was made with"
        } else {
            "pass its platform file with --platform FILE"
        };
        let what = match &chosen.platform {
            Some(path) => format!("the platform file '{}'", path.display()),
            None => "the built-in default platform".to_string(),
        };
        anyhow::bail!(
            "'{plan}' was made for the platform '{recorded}', but {what} is '{}'; {hint}",
            platform.name
        );
    }
    Ok(Some(chosen))
}

/// `memplan inspect --operators`: every operator's configuration (the `npu` method).
pub fn inspect_operators(
    file: &Path,
    format: InspectFormat,
    settings: &GraphSettings,
    platform: &PlatformArg,
) -> Result<ExitCode> {
    let (platform, source) = platform.load()?;
    let graph = input::read_graph(file, &settings.import)?;
    let analysis = memplan_graph::analyse_for(&graph, settings.order, settings.options, &platform)
        .with_context(|| format!("'{}'", file.display()))?;
    let configs = memplan_graph::operator_configs(&graph, &analysis, &platform)
        .with_context(|| format!("'{}'", file.display()))?;
    let buffers = analysis.problem.buffers();
    let text = match format {
        InspectFormat::Csv => {
            let mut out =
                String::from("step,operator,op_type,group,width,tensor,bytes,start,end\n");
            for c in &configs {
                let node = graph.node(c.node);
                for &b in &c.present {
                    let t = &buffers[b.index()];
                    out.push_str(&format!(
                        "{},{},{},{},{},{},{},{},{}\n",
                        c.step,
                        crate::inspect::csv_field(&node.name),
                        crate::inspect::csv_field(&node.op_type),
                        c.group.name(),
                        c.width,
                        crate::inspect::csv_field(&t.name),
                        t.size,
                        t.lifetime.start,
                        t.lifetime.end
                    ));
                }
            }
            out
        }
        InspectFormat::Json => {
            let operators: Vec<_> = configs
                .iter()
                .map(|c| {
                    let node = graph.node(c.node);
                    let tensors: Vec<_> = c
                        .present
                        .iter()
                        .map(|&b| {
                            let t = &buffers[b.index()];
                            json!({"name": t.name, "bytes": t.size, "start": t.lifetime.start, "end": t.lifetime.end})
                        })
                        .collect();
                    json!({
                        "step": c.step,
                        "name": node.name,
                        "op_type": node.op_type,
                        "group": c.group.name(),
                        "width": c.width,
                        "tensors": tensors,
                    })
                })
                .collect();
            let value = json!({
                "graph": graph.name,
                "platform": platform.name,
                "order": settings.order.name(),
                "operators": operators,
            });
            format!("{}\n", serde_json::to_string_pretty(&value)?)
        }
        InspectFormat::Table => {
            let mut out = key_values(&[
                ("file", file.display().to_string()),
                (
                    "graph",
                    format!("'{}': {} nodes", graph.name, graph.nodes().len()),
                ),
                (
                    "platform",
                    format!(
                        "{} ({source}), alignment {}",
                        platform.name, platform.alignment
                    ),
                ),
                ("order", settings.order.name().to_string()),
            ]);
            out.push('\n');
            let cells: Vec<Vec<String>> = configs
                .iter()
                .map(|c| {
                    let node = graph.node(c.node);
                    let present: Vec<String> = c
                        .present
                        .iter()
                        .map(|&b| {
                            let t = &buffers[b.index()];
                            format!("{} {}", t.name, t.lifetime)
                        })
                        .collect();
                    vec![
                        c.step.to_string(),
                        node.name.clone(),
                        node.op_type.clone(),
                        c.group.name().to_string(),
                        c.width.to_string(),
                        present.join(", "),
                    ]
                })
                .collect();
            out.push_str(&columns(
                &[
                    "step",
                    "operator",
                    "type",
                    "group",
                    "width",
                    "tensors present [usage period)",
                ],
                &cells,
            ));
            out.push('\n');
            let widest = configs
                .iter()
                .max_by_key(|c| (c.width, std::cmp::Reverse(c.step)));
            out.push_str(&key_values(&[
                ("operators", group_counts(&configs)),
                (
                    "widest",
                    widest.map_or("-".into(), |c| {
                        format!("{}, {}", graph.node(c.node).name, bytes(c.width))
                    }),
                ),
            ]));
            out
        }
    };
    emit(&text, None)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod spec_tests {
    use super::*;

    /// A spec's npu options override the flags for that spec only.
    #[test]
    fn spec_options_override_the_npu_flags() {
        let spec =
            PlannerSpec::parse("npu:platform=platforms/npu-pooled.json:match=lifetime").unwrap();
        let args = spec_args(&spec, &NpuArgs::default());
        assert_eq!(args.match_rule, MatchArg::Lifetime);
        assert_eq!(
            args.platform.platform.as_deref(),
            Some(Path::new("platforms/npu-pooled.json"))
        );
        let plain = PlannerSpec::parse("npu").unwrap();
        let flags = NpuArgs {
            match_rule: MatchArg::Lifetime,
            ..NpuArgs::default()
        };
        assert_eq!(spec_args(&plain, &flags).match_rule, MatchArg::Lifetime);
        let size = PlannerSpec::parse("npu:match=size").unwrap();
        assert_eq!(spec_args(&size, &flags).match_rule, MatchArg::Size);
        // The method's size match is `size`, unbounded unless a slack is given; the
        // default is the named deviation `exact`.
        assert_eq!(spec_args(&size, &NpuArgs::default()).slack, None);
        assert_eq!(NpuArgs::default().match_rule, MatchArg::Exact);
        let bounded = PlannerSpec::parse("npu:match=size:slack=25").unwrap();
        let args = spec_args(&bounded, &NpuArgs::default());
        assert_eq!(
            (args.match_rule, args.slack),
            (MatchArg::Size, Some(Slack::Percent(25)))
        );
    }
}
