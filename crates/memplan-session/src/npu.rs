//! The `npu` method's preparation: the platform description, the problem with the
//! method's three groups of operators, and the allocation run over them.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use memplan::planner::npu::{assign, Assignment, Groups, Layout, Match, Slack};
use memplan::planner::PlanError;
use memplan::Problem;
use memplan_graph::{AcceleratorBuffers, Analysis, Graph, OperatorConfig, Platform};

use crate::input::{self, GraphSettings, Loaded};

/// The options of the `npu` planner (the flags `--platform`, `--match`, `--group1`,
/// `--npu-layout`, `--slack`, or a spec's `npu:` options).
#[derive(Clone, Debug, Default)]
pub struct NpuOptions {
    /// The platform description file; `None` for the built-in default profile.
    pub platform_file: Option<PathBuf>,
    /// How a tensor picks a free pool buffer (default: `exact`, a named deviation).
    pub rule: Match,
    /// Overrides the platform's `accelerator_buffers`.
    pub group1: Option<AcceleratorBuffers>,
    /// How the shared buffers get offsets.
    pub layout: Layout,
    /// For `size` match only: how much larger a matching buffer may be.
    pub slack: Option<Slack>,
}

/// The platform file's description, or the shipped default; and how to name it.
pub fn load_platform(file: Option<&Path>) -> Result<(Platform, String)> {
    let source = source_name(file);
    match file {
        None => Ok((Platform::default_profile(), source)),
        Some(path) => {
            let text = input::read_text(path)?;
            Ok((Platform::parse(&text, &source)?, source))
        }
    }
}

/// How reports name a platform: its file's path, or `built-in default`.
pub fn source_name(file: Option<&Path>) -> String {
    file.map_or("built-in default".to_string(), |p| p.display().to_string())
}

/// The graph side of a prepared run.
pub struct GraphPart {
    pub graph: Graph,
    /// The analysis with the platform's in-place operators.
    pub analysis: Analysis,
    pub configs: Vec<OperatorConfig>,
}

/// What `--planner npu` plans: the problem, the method's groups, the platform.
pub struct Prepared {
    pub problem: Problem,
    pub groups: Groups,
    pub rule: Match,
    pub slack: Slack,
    pub layout: Layout,
    /// The platform, its `accelerator_buffers` replaced by `--group1` when given.
    pub platform: Platform,
    /// The platform file as given (`--platform`), or `None` for the built-in default.
    pub platform_file: Option<PathBuf>,
    /// `None` for a minimalloc CSV: every step is an operator of group 3.
    pub graph: Option<GraphPart>,
}

impl Prepared {
    /// Runs the allocation.
    pub fn assign(&self) -> Result<Assignment, PlanError> {
        assign(
            &self.problem,
            &self.groups,
            self.rule,
            self.slack,
            self.layout,
        )
    }
}

/// The problem and groups of `--planner npu` for a loaded file, with every alignment
/// raised to the platform's and to `alignment`. A graph is analysed again with the
/// platform's in-place operators (the default profile's are the analysis' own, so the
/// problem is the one every planner plans); a minimalloc CSV has no operators, so every
/// start step is one of group 3.
pub fn prepare(
    file: &Path,
    loaded: &Loaded,
    settings: &GraphSettings,
    args: &NpuOptions,
    alignment: u64,
) -> Result<Prepared> {
    let (mut platform, _) = load_platform(args.platform_file.as_deref())?;
    if let Some(group1) = args.group1 {
        platform.accelerator_buffers = group1;
    }
    let platform_file = args.platform_file.clone();
    let rule = args.rule;
    let layout = args.layout;
    if let Some(slack) = args.slack.filter(|_| rule != Match::Size) {
        anyhow::bail!(
            "slack {slack} (--slack, npu:slack=) bounds size match only, and the match rule is '{}': add --match size (npu:match=size); the default, exact, takes buffers of exactly the tensor's size",
            rule.name()
        );
    }
    let slack = args.slack.unwrap_or_default();
    let Some((graph, _)) = &loaded.graph else {
        let problem = loaded
            .problem
            .with_alignment(platform.alignment)?
            .with_alignment(alignment)?;
        let groups = Groups::steps_only(&problem);
        return Ok(Prepared {
            problem,
            groups,
            rule,
            slack,
            layout,
            platform,
            platform_file,
            graph: None,
        });
    };
    let analysis = memplan_graph::analyse_for(graph, settings.order, settings.options, &platform)
        .with_context(|| format!("'{}'", file.display()))?;
    let input = memplan_graph::npu_input(graph, &analysis, &platform, alignment)
        .with_context(|| format!("'{}'", file.display()))?;
    Ok(Prepared {
        problem: input.problem,
        groups: input.groups,
        rule,
        slack,
        layout,
        platform,
        platform_file,
        graph: Some(GraphPart {
            graph: graph.clone(),
            analysis,
            configs: input.configs,
        }),
    })
}
