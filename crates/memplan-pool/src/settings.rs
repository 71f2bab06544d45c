//! The preloaded pool's settings, read from the `MEMPLAN_POOL_*` environment variables.
//!
//! Every variable is checked: a value that is not accepted is reported once through the
//! caller's `bad` callback ([`BadValue`], which formats without allocating) and the
//! variable's default is used. Nothing here reads the environment itself: `memplan-preload`
//! passes a lookup that does not allocate (`getenv`).

use std::fmt;

use memplan::planner;

use crate::online::Method;
use crate::process::Config;

/// Where the large requests the pool does not serve go (`MEMPLAN_POOL_UNPLANNED`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unplanned {
    /// Mapped on their own, page-exact (glibc's mmap threshold set to the pool's).
    Mmap,
    /// The system allocator's own policy.
    Heap,
}

/// Everything the shim needs to know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// `MEMPLAN_POOL`: false passes everything to the system.
    pub on: bool,
    pub config: Config,
    pub unplanned: Unplanned,
    /// `MEMPLAN_POOL_SUMMARY`.
    pub summary: bool,
    /// `MEMPLAN_POOL_LOG`.
    pub log: bool,
}

/// Every variable read, for a check of unknown `MEMPLAN_POOL_*` names.
pub const VARIABLES: [&str; 7] = [
    "MEMPLAN_POOL",
    "MEMPLAN_POOL_THRESHOLD",
    "MEMPLAN_POOL_PLANNER",
    "MEMPLAN_POOL_PLAN",
    "MEMPLAN_POOL_UNPLANNED",
    "MEMPLAN_POOL_SUMMARY",
    "MEMPLAN_POOL_LOG",
];

/// What a variable accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accepted {
    /// `1`/`on` or `0`/`off`.
    Switch,
    /// A whole number of bytes, at least 1.
    Bytes,
    /// A memplan planner's name.
    Planner,
    /// `offsets[:PLANNER]` or `size-classes[:G[:ORDER[:packed]]]`.
    Plan,
    /// `mmap` or `heap`.
    Unplanned,
}

/// A value that is not accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadValue<'a> {
    pub variable: &'static str,
    pub value: &'a str,
    pub accepted: Accepted,
    /// The default used instead.
    pub default: &'static str,
}

impl fmt::Display for BadValue<'_> {
    /// One line: the variable, the value, what is accepted and the default used.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "memplan pool: {}=`{}` is not accepted (",
            self.variable, self.value
        )?;
        match self.accepted {
            Accepted::Switch => f.write_str("`1`/`on` or `0`/`off`")?,
            Accepted::Bytes => f.write_str("a whole number of bytes, at least 1")?,
            Accepted::Planner => planners(f)?,
            Accepted::Plan => {
                f.write_str(
                    "`offsets[:PLANNER]` or `size-classes[:G[:ORDER[:packed]]]`, PLANNER: ",
                )?;
                planners(f)?;
                f.write_str("; ORDER: allocation, size-descending, lifetime-descending")?
            }
            Accepted::Unplanned => f.write_str("`mmap` or `heap`")?,
        }
        write!(f, "); using the default, {}", self.default)
    }
}

/// The planners' names, comma-separated.
fn planners(f: &mut fmt::Formatter<'_>) -> fmt::Result {
    for (i, p) in planner::all().iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        f.write_str(p.name())?;
    }
    Ok(())
}

fn switch(value: &str) -> Option<bool> {
    match value {
        "1" | "on" => Some(true),
        "0" | "off" => Some(false),
        _ => None,
    }
}

/// The settings from `get` (a variable's value, `None` when unset; an empty value counts
/// as unset). Each bad value is passed to `bad` once, and its default is used.
pub fn from_env<'a>(
    get: impl Fn(&'static str) -> Option<&'a str>,
    mut bad: impl FnMut(BadValue<'a>),
) -> Settings {
    let get = |name| get(name).filter(|v: &&str| !v.is_empty());
    let mut report = |variable, value, accepted, default| {
        bad(BadValue {
            variable,
            value,
            accepted,
            default,
        })
    };
    let mut flag = |variable, default: bool| match get(variable) {
        None => default,
        Some(v) => switch(v).unwrap_or_else(|| {
            report(
                variable,
                v,
                Accepted::Switch,
                if default { "on" } else { "off" },
            );
            default
        }),
    };
    let on = flag("MEMPLAN_POOL", true);
    let summary = flag("MEMPLAN_POOL_SUMMARY", false);
    let log = flag("MEMPLAN_POOL_LOG", false);

    let mut config = Config::default();
    if let Some(v) = get("MEMPLAN_POOL_THRESHOLD") {
        match v.parse::<usize>() {
            Ok(t) if t > 0 => config.threshold = t,
            _ => report("MEMPLAN_POOL_THRESHOLD", v, Accepted::Bytes, "65536"),
        }
    }
    if let Some(v) = get("MEMPLAN_POOL_PLANNER") {
        if planner::by_name(v).is_ok() {
            config.method = Method::Offsets(v.to_string());
        } else {
            report("MEMPLAN_POOL_PLANNER", v, Accepted::Planner, "best-of");
        }
    }
    if let Some(v) = get("MEMPLAN_POOL_PLAN") {
        match Method::parse(v) {
            Ok(Method::Offsets(name)) if planner::by_name(&name).is_err() => {
                report("MEMPLAN_POOL_PLAN", v, Accepted::Plan, "offsets:best-of")
            }
            Ok(method) => config.method = method,
            Err(_) => report("MEMPLAN_POOL_PLAN", v, Accepted::Plan, "offsets:best-of"),
        }
    }
    let unplanned = match get("MEMPLAN_POOL_UNPLANNED") {
        None | Some("mmap") => Unplanned::Mmap,
        Some("heap") => Unplanned::Heap,
        Some(v) => {
            report("MEMPLAN_POOL_UNPLANNED", v, Accepted::Unplanned, "mmap");
            Unplanned::Mmap
        }
    };
    config.page_exact = unplanned == Unplanned::Mmap;
    Settings {
        on,
        config,
        unplanned,
        summary,
        log,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn read(vars: &[(&'static str, &'static str)]) -> (Settings, Vec<String>) {
        let vars: HashMap<_, _> = vars.iter().copied().collect();
        let mut lines = Vec::new();
        let s = from_env(|k| vars.get(k).copied(), |b| lines.push(b.to_string()));
        (s, lines)
    }

    #[test]
    fn unset_gives_the_defaults() {
        let (s, lines) = read(&[]);
        assert!(lines.is_empty());
        assert!(s.on && !s.summary && !s.log);
        assert_eq!(s.unplanned, Unplanned::Mmap);
        assert_eq!(s.config.threshold, 65536);
        assert_eq!(s.config.method, Method::default());
    }

    #[test]
    fn good_values_are_taken() {
        let (s, lines) = read(&[
            ("MEMPLAN_POOL_THRESHOLD", "4096"),
            ("MEMPLAN_POOL_PLANNER", "greedy-size-bestfit"),
            ("MEMPLAN_POOL_UNPLANNED", "heap"),
            ("MEMPLAN_POOL_SUMMARY", "1"),
            ("MEMPLAN_POOL", "on"),
        ]);
        assert!(lines.is_empty(), "{lines:?}");
        assert_eq!(s.config.threshold, 4096);
        assert_eq!(
            s.config.method,
            Method::Offsets("greedy-size-bestfit".into())
        );
        assert_eq!(s.unplanned, Unplanned::Heap);
        assert!(!s.config.page_exact && s.summary && s.on);
    }

    #[test]
    fn each_bad_value_is_named_once_and_the_default_used() {
        for (var, value) in [
            ("MEMPLAN_POOL_THRESHOLD", "abc"),
            ("MEMPLAN_POOL_THRESHOLD", "-5"),
            ("MEMPLAN_POOL_THRESHOLD", "1e23"),
            ("MEMPLAN_POOL_THRESHOLD", "0"),
            ("MEMPLAN_POOL_THRESHOLD", "99999999999999999999999"),
            ("MEMPLAN_POOL_PLANNER", "nonsense"),
            ("MEMPLAN_POOL_PLAN", "slabs"),
            ("MEMPLAN_POOL_PLAN", "offsets:nonsense"),
            ("MEMPLAN_POOL_PLAN", "size-classes:0"),
            ("MEMPLAN_POOL_UNPLANNED", "sometimes"),
            ("MEMPLAN_POOL_SUMMARY", "yes please"),
            ("MEMPLAN_POOL_LOG", "2"),
            ("MEMPLAN_POOL", "maybe"),
        ] {
            let (s, lines) = read(&[(var, value)]);
            assert_eq!(lines.len(), 1, "{var}={value}: {lines:?}");
            assert!(
                lines[0].contains(var) && lines[0].contains(value) && lines[0].contains("default"),
                "{}",
                lines[0]
            );
            assert_eq!(s, read(&[]).0, "{var}={value}: the defaults");
        }
        let (_, lines) = read(&[("MEMPLAN_POOL_PLANNER", "nonsense")]);
        assert!(
            lines[0].contains("best-of"),
            "names the planners: {}",
            lines[0]
        );
    }
}
