//! `memplan inspect`: every tensor of a graph with its lifetime and storage, and totals.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use memplan_graph::{Analysis, Graph, ValueId};
use serde_json::json;

use crate::commands::emit;
use crate::input::{self, GraphSettings};
use crate::table::{bytes, columns, key_values};
use crate::InspectFormat;

/// One tensor's row.
struct Row {
    name: String,
    dtype: &'static str,
    /// `1x3x224x224`; empty for a scalar; `?` when only the byte size is known.
    shape: String,
    dims: Option<Vec<u64>>,
    bytes: u64,
    /// `[start, end)`; `None` outside the arena.
    lifetime: Option<(u64, u64)>,
    kind: &'static str,
    /// The root of its alias group, when it shares a buffer.
    group: String,
    /// The input it was written over, when computed in place.
    partner: String,
    /// Why its size is an upper bound (a data-dependent size), when it is one.
    bound: Option<String>,
}

fn rows(graph: &Graph, analysis: &Analysis) -> Vec<Row> {
    let name = |id: Option<ValueId>| id.map_or(String::new(), |i| graph.value(i).name.clone());
    analysis
        .report_order
        .iter()
        .map(|&id| {
            let value = graph.value(id);
            let info = &analysis.values[id.index()];
            let shape = match &value.shape {
                Some(dims) => dims
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join("x"),
                None => "?".to_string(),
            };
            Row {
                name: value.name.clone(),
                dtype: value.dtype.name(),
                shape,
                dims: value.shape.clone(),
                bytes: value.bytes,
                lifetime: info.lifetime.map(|l| (l.start, l.end)),
                kind: info.role.name(),
                group: name(info.group_root),
                partner: name(info.inplace_of),
                bound: graph.bound_reason(id).map(str::to_string),
            }
        })
        .collect()
}

/// A CSV field, quoted when it holds a comma, a quote or a line break.
pub(crate) fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// `memplan inspect`.
pub fn inspect(file: &Path, format: InspectFormat, settings: &GraphSettings) -> Result<ExitCode> {
    let graph = input::read_graph(file, &settings.import)?;
    let analysis = input::analyse(file, &graph, settings)?;
    let rows = rows(&graph, &analysis);
    let stats = &analysis.stats;
    let largest = stats
        .largest
        .map(|(id, size)| (graph.value(id).name.clone(), size));
    let order = settings.order.name();
    let text = match format {
        InspectFormat::Csv => {
            let mut out =
                String::from("name,dtype,shape,bytes,start,end,kind,alias_group,inplace_partner\n");
            for row in &rows {
                let Some((start, end)) = row.lifetime else {
                    continue;
                };
                out.push_str(&format!(
                    "{},{},{},{},{start},{end},{},{},{}\n",
                    csv_field(&row.name),
                    row.dtype,
                    row.shape,
                    row.bytes,
                    row.kind,
                    csv_field(&row.group),
                    csv_field(&row.partner)
                ));
            }
            out
        }
        InspectFormat::Json => {
            let tensors: Vec<_> = rows
                .iter()
                .map(|r| {
                    let mut t = json!({
                        "name": r.name,
                        "dtype": r.dtype,
                        "shape": r.dims,
                        "bytes": r.bytes,
                        "start": r.lifetime.map(|l| l.0),
                        "end": r.lifetime.map(|l| l.1),
                        "kind": r.kind,
                        "alias_group": (!r.group.is_empty()).then_some(&r.group),
                        "inplace_partner": (!r.partner.is_empty()).then_some(&r.partner),
                    });
                    // Only data-dependent tensors carry `upper_bound` (why the size is one).
                    if let (Some(why), Some(map)) = (&r.bound, t.as_object_mut()) {
                        map.insert("upper_bound".into(), json!(why));
                    }
                    t
                })
                .collect();
            let value = json!({
                "graph": graph.name,
                "nodes": graph.nodes().len(),
                "order": order,
                "alias": settings.options.alias,
                "inplace": settings.options.inplace,
                "tensors": tensors,
                "totals": {
                    "arena_tensors": stats.arena_values,
                    "arena_bytes": stats.arena_bytes,
                    "activation_tensors": stats.activation_values,
                    "activation_bytes": stats.activation_bytes,
                    "weight_and_constant_bytes": stats.weight_bytes,
                    "buffers": analysis.problem.len(),
                    "max_live_bytes": stats.max_live_bytes,
                    "max_live_unshared_bytes": stats.max_live_unshared_bytes,
                    "largest_tensor": largest.as_ref().map(|(n, _)| n),
                    "largest_tensor_bytes": largest.as_ref().map(|(_, b)| b),
                    "alias_saved_bytes": stats.alias_saved_bytes,
                    "inplace_saved_bytes": stats.inplace_saved_bytes,
                },
            });
            format!("{}\n", serde_json::to_string_pretty(&value)?)
        }
        InspectFormat::Table => {
            let on_off = |on: bool| if on { "on" } else { "off" };
            let mut out = key_values(&[
                ("file", file.display().to_string()),
                (
                    "graph",
                    format!("'{}': {} nodes", graph.name, graph.nodes().len()),
                ),
                ("order", order.to_string()),
                ("aliasing", on_off(settings.options.alias).to_string()),
                ("in-place", on_off(settings.options.inplace).to_string()),
            ]);
            out.push('\n');
            let cells: Vec<Vec<String>> = rows
                .iter()
                .map(|r| {
                    let (start, end) = r.lifetime.map_or(("-".into(), "-".into()), |(s, e)| {
                        (s.to_string(), e.to_string())
                    });
                    vec![
                        r.name.clone(),
                        r.dtype.to_string(),
                        r.shape.clone(),
                        r.bytes.to_string(),
                        start,
                        end,
                        r.kind.to_string(),
                        r.group.clone(),
                        r.partner.clone(),
                    ]
                })
                .collect();
            out.push_str(&columns(
                &[
                    "name",
                    "dtype",
                    "shape",
                    "bytes",
                    "start",
                    "end",
                    "kind",
                    "alias group",
                    "in-place partner",
                ],
                &cells,
            ));
            out.push('\n');
            let bounded: Vec<&Row> = rows.iter().filter(|r| r.bound.is_some()).collect();
            if !bounded.is_empty() {
                out.push_str(&format!(
                    "{} tensors have data-dependent sizes, planned at an upper bound:\n",
                    bounded.len()
                ));
                for r in bounded {
                    out.push_str(&format!(
                        "  {} {}: {}\n",
                        r.name,
                        r.shape,
                        r.bound.as_deref().unwrap_or("")
                    ));
                }
                out.push('\n');
            }
            out.push_str(&key_values(&[
                (
                    "arena tensors",
                    format!(
                        "{}, {} (graph inputs, activations, graph outputs)",
                        stats.arena_values,
                        bytes(stats.arena_bytes)
                    ),
                ),
                (
                    "activations",
                    format!(
                        "{}, {} (without graph inputs and outputs)",
                        stats.activation_values,
                        bytes(stats.activation_bytes)
                    ),
                ),
                ("buffers", analysis.problem.len().to_string()),
                (
                    "max-live bound",
                    format!(
                        "{} ({} without aliasing and in-place)",
                        bytes(stats.max_live_bytes),
                        bytes(stats.max_live_unshared_bytes)
                    ),
                ),
                (
                    "largest tensor",
                    largest.map_or("-".into(), |(n, b)| format!("{n}, {}", bytes(b))),
                ),
                ("saved by aliasing", bytes(stats.alias_saved_bytes)),
                ("saved by in-place", bytes(stats.inplace_saved_bytes)),
                (
                    "weights, constants",
                    format!("{} (not in the arena)", bytes(stats.weight_bytes)),
                ),
            ]));
            out
        }
    };
    emit(&text, None)?;
    Ok(ExitCode::SUCCESS)
}

/// `memplan inspect --exclusive`: the exclusive pairs of blocks (the `exclusive` method), each with
/// the first rule that makes it (`edges`, `branches`, `outputs`, or `live` for rule 4).
pub fn inspect_exclusive(
    file: &Path,
    format: InspectFormat,
    settings: &GraphSettings,
) -> Result<ExitCode> {
    let graph = input::read_graph(file, &settings.import)?;
    let analysis = input::analyse(file, &graph, settings)?;
    let exclusive = memplan_graph::exclusivity(&graph, &analysis, settings.exclusive_rules);
    let buffers = analysis.problem.buffers();
    let name = |id: memplan::BufferId| buffers[id.index()].name.as_str();
    let text = match format {
        InspectFormat::Csv => {
            let mut out = String::from("a,b,rule\n");
            for &(a, b, reason) in &exclusive.pairs {
                out.push_str(&format!(
                    "{},{},{}\n",
                    csv_field(name(a)),
                    csv_field(name(b)),
                    reason.name()
                ));
            }
            out
        }
        InspectFormat::Json => {
            let pairs: Vec<_> = exclusive
                .pairs
                .iter()
                .map(|&(a, b, reason)| json!({"a": name(a), "b": name(b), "rule": reason.name()}))
                .collect();
            let value = json!({
                "graph": graph.name,
                "blocks": buffers.len(),
                "pairs": pairs,
            });
            format!("{}\n", serde_json::to_string_pretty(&value)?)
        }
        InspectFormat::Table => {
            let mut partners: Vec<Vec<String>> = vec![Vec::new(); buffers.len()];
            for &(a, b, reason) in &exclusive.pairs {
                partners[a.index()].push(format!("{} ({})", name(b), reason.name()));
                partners[b.index()].push(format!("{} ({})", name(a), reason.name()));
            }
            let cells: Vec<Vec<String>> = buffers
                .iter()
                .zip(&partners)
                .map(|(b, p)| vec![b.name.clone(), b.size.to_string(), p.join(", ")])
                .collect();
            let mut out = columns(&["block", "bytes", "exclusive with (rule)"], &cells);
            out.push('\n');
            out.push_str(&key_values(&[
                ("blocks", buffers.len().to_string()),
                ("exclusive pairs", exclusive.pairs.len().to_string()),
            ]));
            out
        }
    };
    emit(&text, None)?;
    Ok(ExitCode::SUCCESS)
}

/// `memplan inspect` of a memory-operation sequence or a pool trace: one row per
/// buffer (its tensor), name, bytes, lifetime and alignment, and the totals (buffers,
/// bytes, max-live bound, largest). A minimalloc CSV stays "not a graph".
pub fn inspect_csv(
    file: &Path,
    format: InspectFormat,
    settings: &GraphSettings,
) -> Result<ExitCode> {
    let loaded = input::read_input(file, settings)?;
    let problem = &loaded.problem;
    let max_live = memplan::bound::max_live(problem);
    let total: u128 = problem.buffers().iter().map(|b| u128::from(b.size)).sum();
    let largest = problem
        .buffers()
        .iter()
        .min_by_key(|b| std::cmp::Reverse(b.size));
    let text = match format {
        InspectFormat::Csv => {
            let mut out = String::from("name,bytes,start,end,alignment\n");
            for b in problem.buffers() {
                out.push_str(&format!(
                    "{},{},{},{},{}\n",
                    csv_field(&b.name),
                    b.size,
                    b.lifetime.start,
                    b.lifetime.end,
                    b.alignment
                ));
            }
            out
        }
        InspectFormat::Json => {
            let tensors: Vec<_> = problem
                .buffers()
                .iter()
                .map(|b| {
                    json!({
                        "name": b.name,
                        "bytes": b.size,
                        "start": b.lifetime.start,
                        "end": b.lifetime.end,
                        "alignment": b.alignment,
                    })
                })
                .collect();
            let value = json!({
                "file": file.display().to_string(),
                "tensors": tensors,
                "totals": {
                    "buffers": problem.len(),
                    "bytes": total.to_string(),
                    "max_live_bytes": max_live,
                    "largest_tensor": largest.map(|b| &b.name),
                    "largest_tensor_bytes": largest.map(|b| b.size),
                },
            });
            format!("{}\n", serde_json::to_string_pretty(&value)?)
        }
        InspectFormat::Table => {
            let rows: Vec<Vec<String>> = problem
                .buffers()
                .iter()
                .map(|b| {
                    vec![
                        b.name.clone(),
                        b.size.to_string(),
                        b.lifetime.to_string(),
                        b.alignment.to_string(),
                    ]
                })
                .collect();
            let mut out = columns(&["tensor", "bytes", "lifetime", "alignment"], &rows);
            out.push('\n');
            out.push_str(&key_values(&[
                ("file", file.display().to_string()),
                ("buffers", problem.len().to_string()),
                ("sum of sizes", format!("{total} B")),
                (
                    "max-live bound",
                    max_live.map_or_else(|| "over 2^64".into(), bytes),
                ),
                (
                    "largest",
                    largest
                        .map_or_else(|| "-".into(), |b| format!("{} ({})", b.name, bytes(b.size))),
                ),
            ]));
            out
        }
    };
    emit(&text, None)?;
    Ok(ExitCode::SUCCESS)
}
