//! Planner specs: a planner name with options, as `--planner` and `--planners` take it,
//! so that one `memplan bench` can run several variants of a planner side by side.
//!
//! ```text
//! SPEC   = NAME [":" OPTION]...
//! OPTION = KEY "=" VALUE | FLAG
//! ```
//!
//! `:` separates the options (not `,`, which separates the specs of `--planners`); a list
//! value joins its items with `+`. The options:
//!
//! | planner | option | meaning, as the flag of the same name |
//! |---|---|---|
//! | `exclusive` | `rules=LIST` | `--exclusive-rules`, items `edges`, `branches`, `outputs` (or `none`) joined by `+` |
//! | `exclusive` | `fragmented` | `--fragmented` |
//! | `exclusive` | `orders=all\|one` | (none): `all` plans for every execution order the edges allow |
//! | `npu` | `match=exact\|size\|lifetime` (default `exact`, a deviation: equal sizes only; `size` is the method's size match) | `--match` |
//! | `npu` | `platform=FILE` | `--platform` |
//! | `strip` | `metric=M` | `--metric` (a lexicographic `a,b` only in `--planner`: `,` separates `--planners`) |
//! | `strip` | `order=descending\|ascending` | none (default: both, in the portfolio) |
//! | `strip` | `placement=bottom\|stacked\|stacked-previous` | none (default: `bottom` and `stacked`, in the portfolio; `stacked` is the source's pairing, on the next rectangle in the order overlapping it in time, `stacked-previous` the previous one) |
//! | `strip` | `max-iters=N` | `--max-iters` |
//! | `strip` | `max-reads=N` | none (default: [`Strip::DEFAULT_MAX_READS`]) |
//! | `npu` | `group1=pooled\|reusable\|dedicated` | `--group1` |
//! | `npu` | `layout=offsets\|end-to-end` | `--npu-layout` |
//! | `npu` | `slack=PERCENT\|any` (with `match=size` only; default `any`, the method's rule) | `--slack` |
//!
//! An option of a spec overrides the flag for that spec only; a plain name takes the flags.
//! Examples: `exclusive:rules=edges+outputs`, `exclusive:fragmented`, `npu:match=lifetime`,
//! `npu:platform=platforms/npu-pooled.json:match=lifetime`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use memplan::planner::npu::{Layout, Match};
use memplan::planner::strip::{Direction, Placement};
use memplan::planner::Slack;
use memplan::planner::{self, Metric, Planner, Strip};
use memplan_graph::AcceleratorBuffers;
use memplan_graph::Rules;

use crate::input::GraphSettings;

/// The planner every shell runs when none is named (`memplan plan FILE`, `memplan report`,
/// `memplan.plan(problem)`, the ExecuTorch and TFLite Micro paths): `search`, which starts
/// from best-of's plan and improves it until it proves the arena optimal or
/// [`DEFAULT_TIME_LIMIT`] runs out. So a user who names no planner gets the best plan
/// memplan finds within a small budget, never worse than best-of's.
pub const DEFAULT_PLANNER: &str = "search";

/// The time budget of [`DEFAULT_PLANNER`] when neither a planner nor a time limit is given:
/// one second. On every model of `../shared/models` and `../shared/tflite` the search
/// proves its arena optimal in a few milliseconds, so the budget matters only for hard
/// instances (MiniMalloc's), which take all of it. A search named explicitly keeps its
/// own default (five seconds).
pub const DEFAULT_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(1);

/// `--slack` and the spec option `slack=`.
pub fn parse_slack(text: &str) -> Result<Slack, String> {
    Slack::parse(text).ok_or_else(|| {
        format!("'{text}' is neither a percentage (0, 25, 25%) nor 'any' (how much larger a matching pool buffer may be)")
    })
}

/// `--group1` and the spec option `group1=`.
pub fn parse_group1(text: &str) -> Result<AcceleratorBuffers, String> {
    AcceleratorBuffers::parse(text).ok_or_else(|| {
        format!("'{text}' is none of pooled, reusable, dedicated (how group 1 gets memory)")
    })
}

/// npu's match rule by its name (`exact`, `size`, `lifetime`).
pub fn parse_match(text: &str) -> Option<Match> {
    [Match::Exact, Match::Size, Match::Lifetime]
        .into_iter()
        .find(|m| m.name() == text)
}

/// npu's layout by its name (`offsets`, `end-to-end`).
pub fn parse_layout(text: &str) -> Option<Layout> {
    [Layout::Offsets, Layout::EndToEnd]
        .into_iter()
        .find(|l| l.name() == text)
}

/// Which planner a spec names, for the shells to branch on (the one place where planner
/// names are compared).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    BestOf,
    Search,
    Strip,
    /// `exclusive`, contiguous or fragmented: plans the graph's exclusivity problem.
    Exclusive,
    /// `npu`: plans its own problem with the method's groups.
    Npu,
    /// Any other planner, run on the lifetime problem as it is.
    Other,
}

impl Kind {
    /// The kind of `planner`.
    pub fn of(planner: &dyn Planner) -> Kind {
        let name = planner.name();
        if name == planner::BestOf.name() {
            Kind::BestOf
        } else if name == planner::Search::DEFAULT.name() {
            Kind::Search
        } else if name == Strip::DEFAULT.name() {
            Kind::Strip
        } else if name == planner::Exclusive::DEFAULT.name() {
            Kind::Exclusive
        } else if name == planner::Npu::default().name() {
            Kind::Npu
        } else {
            Kind::Other
        }
    }
}

/// A planner with the options of its spec.
#[derive(Clone, Debug)]
pub struct PlannerSpec {
    /// The spec as written: the name of its column or rows in `memplan bench`.
    pub label: String,
    /// The planner named (the contiguous `exclusive` even under `fragmented`: see
    /// [`PlannerSpec::planner`]).
    name: &'static str,
    /// `exclusive`'s `rules=`.
    exclusive_rules: Option<Rules>,
    /// `exclusive`'s `fragmented`.
    fragmented: bool,
    /// `exclusive`'s `orders=all`.
    all_orders: bool,
    /// `npu`'s `match=`.
    match_rule: Option<Match>,
    /// `npu`'s `platform=`.
    platform: Option<PathBuf>,
    /// `strip`'s `metric=`, `order=`, `placement=`, `max-iters=` and `max-reads=` (unset:
    /// `None`, and the defaults in [`PlannerSpec::strip`]).
    strip_metric: Option<Metric>,
    strip_direction: Option<Direction>,
    strip_placement: Option<Placement>,
    strip_max_iters: Option<u32>,
    strip_max_reads: Option<u64>,
    /// `npu`'s `group1=`.
    group1: Option<AcceleratorBuffers>,
    /// `npu`'s `layout=`.
    layout: Option<Layout>,
    /// `npu`'s `slack=`.
    slack: Option<Slack>,
}

/// The options each planner takes, for error messages.
fn options_of(name: &str) -> &'static str {
    if name == planner::Exclusive::DEFAULT.name() {
        "rules=LIST (edges+branches+outputs, or none), fragmented and orders=all|one"
    } else if name == planner::Npu::default().name() {
        "match=exact|size|lifetime, platform=FILE, group1=pooled|reusable|dedicated, layout=offsets|end-to-end and slack=PERCENT|any (with match=size)"
    } else if name == Strip::DEFAULT.name() {
        "metric=M, order=descending|ascending, placement=bottom|stacked|stacked-previous, max-iters=N and max-reads=N"
    } else {
        "none"
    }
}

impl PlannerSpec {
    /// Parses a spec; the error names the spec, the planner and the option at fault.
    pub fn parse(text: &str) -> Result<PlannerSpec> {
        let text = text.trim();
        let mut parts = text.split(':');
        let name = parts.next().unwrap_or_default().trim();
        let planner = match planner::by_name(name) {
            Ok(p) => p,
            Err(e) if ["edges", "branches", "outputs", "none"].contains(&name) => bail!(
                "{e}; '{name}' is an exclusivity rule: inside --planners join the rules with '+', e.g. exclusive:rules=edges+outputs"
            ),
            Err(e) => return Err(e.into()),
        };
        let mut spec = PlannerSpec {
            label: text.to_string(),
            name: planner.name(),
            exclusive_rules: None,
            fragmented: false,
            all_orders: false,
            match_rule: None,
            platform: None,
            strip_metric: None,
            strip_direction: None,
            strip_placement: None,
            strip_max_iters: None,
            strip_max_reads: None,
            group1: None,
            layout: None,
            slack: None,
        };
        let is_strip = spec.name == Strip::DEFAULT.name();
        let is_exclusive = spec.name == planner::Exclusive::DEFAULT.name();
        let is_npu = spec.name == planner::Npu::default().name();
        let mut seen: Vec<&str> = Vec::new();
        for option in parts {
            let (key, value) = match option.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim())),
                None => (option.trim(), None),
            };
            if key.is_empty() {
                bail!(
                    "planner spec '{text}': an empty option after ':'; options of '{}': {}",
                    spec.name,
                    options_of(spec.name)
                );
            }
            if seen.contains(&key) {
                bail!(
                    "planner spec '{text}': option '{key}' of planner '{}' is given twice",
                    spec.name
                );
            }
            seen.push(key);
            let needs_value = |value: Option<&str>| {
                match value {
                Some(v) if !v.is_empty() => Ok(v.to_string()),
                _ => Err(anyhow::anyhow!(
                    "planner spec '{text}': option '{key}' of planner '{}' needs a value ({key}=...)",
                    spec.name
                )),
            }
            };
            match key {
                "rules" if is_exclusive => {
                    let value = needs_value(value)?;
                    let rules = Rules::parse(&value.replace('+', ",")).map_err(|e| {
                        anyhow::anyhow!(
                            "planner spec '{text}': option 'rules' of planner 'exclusive': {e}"
                        )
                    })?;
                    spec.exclusive_rules = Some(rules);
                }
                "fragmented" if is_exclusive => {
                    if let Some(v) = value {
                        bail!(
                            "planner spec '{text}': option 'fragmented' of planner 'exclusive' takes no value (got '{v}'); write exclusive:fragmented"
                        );
                    }
                    spec.fragmented = true;
                }
                "orders" if is_exclusive => {
                    spec.all_orders = match needs_value(value)?.as_str() {
                        "all" => true,
                        "one" => false,
                        other => bail!(
                            "planner spec '{text}': option 'orders' of planner 'exclusive': '{other}' is neither 'all' (valid for every execution order) nor 'one'"
                        ),
                    };
                }
                "match" if is_npu => {
                    let value = needs_value(value)?;
                    let rule = parse_match(&value).ok_or_else(|| {
                        anyhow::anyhow!(
                            "planner spec '{text}': option 'match' of planner 'npu': '{value}' is none of 'exact', 'size' and 'lifetime'"
                        )
                    })?;
                    spec.match_rule = Some(rule);
                }
                "platform" if is_npu => {
                    spec.platform = Some(PathBuf::from(needs_value(value)?));
                }
                "metric" if is_strip => {
                    let value = needs_value(value)?;
                    spec.strip_metric = Some(value.parse::<Metric>().map_err(|e| {
                        anyhow::anyhow!(
                            "planner spec '{text}': option 'metric' of planner 'strip': {e}"
                        )
                    })?);
                }
                "order" if is_strip => {
                    let value = needs_value(value)?;
                    spec.strip_direction = Some(value.parse::<Direction>().map_err(|e| {
                        anyhow::anyhow!(
                            "planner spec '{text}': option 'order' of planner 'strip': {e}"
                        )
                    })?);
                }
                "placement" if is_strip => {
                    let value = needs_value(value)?;
                    spec.strip_placement = Some(value.parse::<Placement>().map_err(|e| {
                        anyhow::anyhow!(
                            "planner spec '{text}': option 'placement' of planner 'strip': {e}"
                        )
                    })?);
                }
                "max-iters" if is_strip => {
                    let value = needs_value(value)?;
                    spec.strip_max_iters = Some(value.parse::<u32>().map_err(|_| {
                        anyhow::anyhow!("planner spec '{text}': option 'max-iters' of planner 'strip': '{value}' is not a whole number from 0 to {}", u32::MAX)
                    })?);
                }
                "max-reads" if is_strip => {
                    let value = needs_value(value)?;
                    spec.strip_max_reads = Some(value.parse::<u64>().map_err(|_| {
                        anyhow::anyhow!("planner spec '{text}': option 'max-reads' of planner 'strip': '{value}' is not a whole number from 0 to {}", u64::MAX)
                    })?);
                }
                "group1" if is_npu => {
                    let value = needs_value(value)?;
                    spec.group1 = Some(parse_group1(&value).map_err(|e| {
                        anyhow::anyhow!(
                            "planner spec '{text}': option 'group1' of planner 'npu': {e}"
                        )
                    })?);
                }
                "slack" if is_npu => {
                    let value = needs_value(value)?;
                    spec.slack = Some(parse_slack(&value).map_err(|e| {
                        anyhow::anyhow!(
                            "planner spec '{text}': option 'slack' of planner 'npu': {e}"
                        )
                    })?);
                }
                "layout" if is_npu => {
                    let value = needs_value(value)?;
                    spec.layout = Some(parse_layout(&value).ok_or_else(|| {
                        anyhow::anyhow!(
                            "planner spec '{text}': option 'layout' of planner 'npu': '{value}' is neither 'offsets' nor 'end-to-end'"
                        )
                    })?);
                }
                _ => bail!(
                    "planner spec '{text}': planner '{}' has no option '{key}'; its options: {}",
                    spec.name,
                    options_of(spec.name)
                ),
            }
        }
        Ok(spec)
    }

    /// Which planner the spec names.
    pub fn kind(&self) -> Kind {
        Kind::of(planner::by_name(self.name).expect("the name was looked up when parsed"))
    }

    /// The planner to run: [`planner::Exclusive::FRAGMENTED`] for `exclusive` with
    /// `fragmented` (given in the spec or by `--fragmented`), else the planner named.
    pub fn planner(&self, settings: &GraphSettings) -> &'static dyn Planner {
        if self.name == planner::Exclusive::DEFAULT.name() && self.settings(settings).fragmented {
            &planner::Exclusive::FRAGMENTED
        } else {
            planner::by_name(self.name).expect("the name was looked up when parsed")
        }
    }

    /// The graph settings of this spec: `settings` with the spec's exclusive options.
    pub fn settings(&self, settings: &GraphSettings) -> GraphSettings {
        GraphSettings {
            exclusive_rules: self.exclusive_rules.unwrap_or(settings.exclusive_rules),
            fragmented: settings.fragmented || self.fragmented,
            all_orders: settings.all_orders || self.all_orders,
            ..settings.clone()
        }
    }

    /// For a `strip` spec, the strip to run: its options over the flags `--metric` and
    /// `--max-iters` (`metric`, `max_iters`); an option set in both is an error. `None`
    /// for another planner, which must not be given strip's flags.
    pub fn strip(&self, metric: Option<&str>, max_iters: Option<u32>) -> Result<Option<Strip>> {
        if self.name != Strip::DEFAULT.name() {
            if metric.is_some() || max_iters.is_some() {
                bail!(
                    "--metric and --max-iters apply to --planner strip only, not to '{}'",
                    self.name
                );
            }
            return Ok(None);
        }
        let flag_metric = metric.map(str::parse::<Metric>).transpose()?;
        if flag_metric.is_some() && self.strip_metric.is_some() {
            bail!(
                "planner spec '{}' sets the metric and so does --metric: give it once",
                self.label
            );
        }
        if max_iters.is_some() && self.strip_max_iters.is_some() {
            bail!(
                "planner spec '{}' sets max-iters and so does --max-iters: give it once",
                self.label
            );
        }
        Ok(Some(Strip {
            metric: self.strip_metric.or(flag_metric),
            direction: self.strip_direction,
            placement: self.strip_placement,
            max_iters: self
                .strip_max_iters
                .or(max_iters)
                .unwrap_or(Strip::DEFAULT_MAX_ITERS),
            max_reads: self.strip_max_reads.unwrap_or(Strip::DEFAULT_MAX_READS),
        }))
    }

    /// npu's `match=`, when the spec sets it.
    pub fn match_rule(&self) -> Option<Match> {
        self.match_rule
    }

    /// npu's `platform=`, when the spec sets it.
    pub fn platform(&self) -> Option<&Path> {
        self.platform.as_deref()
    }

    /// npu's `group1=`, when the spec sets it.
    pub fn group1(&self) -> Option<AcceleratorBuffers> {
        self.group1
    }

    /// npu's `layout=`, when the spec sets it.
    pub fn layout(&self) -> Option<Layout> {
        self.layout
    }

    /// npu's `slack=`, when the spec sets it.
    pub fn slack(&self) -> Option<Slack> {
        self.slack
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn error(text: &str) -> String {
        format!("{:#}", PlannerSpec::parse(text).unwrap_err())
    }

    #[test]
    fn options_override_the_flags_for_their_spec_only() {
        let base = GraphSettings::default();
        let spec = PlannerSpec::parse("exclusive:rules=edges+outputs").unwrap();
        let settings = spec.settings(&base);
        assert_eq!(settings.exclusive_rules.to_string(), "edges,outputs");
        assert!(!settings.fragmented);
        assert_eq!(spec.planner(&base).name(), "exclusive");

        let spec = PlannerSpec::parse("exclusive:fragmented").unwrap();
        assert_eq!(spec.settings(&base).exclusive_rules, Rules::ALL);
        assert_eq!(spec.planner(&base).name(), "exclusive");
        assert!(spec.settings(&base).fragmented);

        let spec =
            PlannerSpec::parse("npu:platform=platforms/npu-pooled.json:match=lifetime").unwrap();
        assert_eq!(spec.match_rule(), Some(Match::Lifetime));
        assert_eq!(
            spec.platform(),
            Some(std::path::Path::new("platforms/npu-pooled.json"))
        );
        assert_eq!(
            spec.label,
            "npu:platform=platforms/npu-pooled.json:match=lifetime"
        );
        let plain = PlannerSpec::parse("npu").unwrap();
        assert_eq!((plain.match_rule(), plain.slack()), (None, None));
        let size = PlannerSpec::parse("npu:match=size").unwrap();
        assert_eq!(size.match_rule(), Some(Match::Size));
        let exact = PlannerSpec::parse("npu:match=exact").unwrap();
        assert_eq!(exact.match_rule(), Some(Match::Exact));
        let bounded = PlannerSpec::parse("npu:match=size:slack=25:layout=end-to-end").unwrap();
        assert_eq!(
            (bounded.match_rule(), bounded.slack(), bounded.layout()),
            (
                Some(Match::Size),
                Some(Slack::Percent(25)),
                Some(Layout::EndToEnd)
            )
        );
    }

    #[test]
    fn errors_name_the_planner_and_the_option() {
        let e = error("exclusive:color=red");
        assert!(
            e.contains("'exclusive'") && e.contains("'color'") && e.contains("rules=LIST"),
            "{e}"
        );
        let e = error("naive:match=size");
        assert!(e.contains("'naive'") && e.contains("'match'"), "{e}");
        let e = error("exclusive:rules=edges+loops");
        assert!(e.contains("'rules'") && e.contains("'loops'"), "{e}");
        let e = error("npu:match=closest");
        assert!(e.contains("'match'") && e.contains("'closest'"), "{e}");
        let e = error("npu:platform");
        assert!(e.contains("needs a value"), "{e}");
        let e = error("exclusive:fragmented=yes");
        assert!(e.contains("takes no value"), "{e}");
        let e = error("npu:match=size:match=lifetime");
        assert!(e.contains("twice"), "{e}");
        let e = error("exclusive:");
        assert!(e.contains("empty option"), "{e}");
        let e = error("outputs");
        assert!(e.contains("unknown planner") && e.contains("'+'"), "{e}");
        let e = error("nonesuch:x");
        assert!(e.contains("unknown planner 'nonesuch'"), "{e}");
        let e = error("strip:order=sideways");
        assert!(e.contains("'order'") && e.contains("'sideways'"), "{e}");
        let e = error("strip:placement=top");
        assert!(e.contains("'placement'") && e.contains("stacked"), "{e}");
        let e = error("strip:metric=area");
        assert!(e.contains("'metric'") && e.contains("'area'"), "{e}");
        let e = error("strip:max-iters=-1");
        assert!(e.contains("'max-iters'"), "{e}");
        let e = error("strip:max-reads=1e9");
        assert!(e.contains("'max-reads'") && e.contains("'1e9'"), "{e}");
        let e = error("strip:colour=red");
        assert!(e.contains("placement=bottom|stacked"), "{e}");
    }

    #[test]
    fn strip_options_fix_their_choice_and_leave_the_rest_to_the_portfolio() {
        let spec = PlannerSpec::parse("strip:order=ascending:placement=stacked").unwrap();
        let strip = spec.strip(Some("size"), None).unwrap().unwrap();
        assert_eq!(strip.direction, Some(Direction::Ascending));
        assert_eq!(strip.placement, Some(Placement::Stacked));
        assert_eq!(strip.metric, Some("size".parse().unwrap()));
        assert_eq!(strip.max_iters, Strip::DEFAULT_MAX_ITERS);
        let spec = PlannerSpec::parse("strip:placement=stacked-previous").unwrap();
        let strip = spec.strip(None, None).unwrap().unwrap();
        assert_eq!(strip.placement, Some(Placement::StackedPrevious));
        let plain = PlannerSpec::parse("strip").unwrap();
        assert_eq!(plain.strip(None, None).unwrap(), Some(Strip::DEFAULT));
        let spec = PlannerSpec::parse("strip:metric=size:max-iters=3").unwrap();
        assert!(spec.strip(Some("length"), None).is_err());
        assert!(spec.strip(None, Some(2)).is_err());
        assert_eq!(spec.strip(None, None).unwrap().unwrap().max_iters, 3);
        let spec = PlannerSpec::parse("strip:max-reads=1000").unwrap();
        let strip = spec.strip(None, None).unwrap().unwrap();
        assert_eq!(
            (strip.max_reads, strip.max_iters),
            (1000, Strip::DEFAULT_MAX_ITERS)
        );
        let naive = PlannerSpec::parse("naive").unwrap();
        assert!(naive.strip(Some("size"), None).is_err());
        assert_eq!(naive.strip(None, None).unwrap(), None);
    }

    proptest! {
        /// Any text is parsed or rejected with an error, never a panic; a parsed spec keeps
        /// its text as its label and names a known planner.
        #[test]
        fn any_text_parses_or_errs(text in "[a-z+=:./-]{0,40}") {
            if let Ok(spec) = PlannerSpec::parse(&text) {
                prop_assert_eq!(&spec.label, text.trim());
                prop_assert!(planner::by_name(spec.name).is_ok());
            }
        }

        /// Every combination of the exclusive options round-trips through its spec.
        #[test]
        fn exclusive_options_round_trip(
            edges: bool, branches: bool, outputs: bool, fragmented: bool
        ) {
            let rules = Rules { edges, branches, outputs };
            let mut text = format!("exclusive:rules={}", rules.to_string().replace(',', "+"));
            if fragmented {
                text.push_str(":fragmented");
            }
            let spec = PlannerSpec::parse(&text).unwrap();
            let settings = spec.settings(&GraphSettings::default());
            prop_assert_eq!(settings.exclusive_rules, rules);
            prop_assert_eq!(settings.fragmented, fragmented);
        }
    }
}
