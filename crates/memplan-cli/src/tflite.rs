//! `.tflite` models on the command line: what TFLite Micro will do with a plan, the
//! offline plan written into a model, an embedded plan checked, and `inspect`.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use memplan::planner::{Planner, TflmGreedy};
use memplan::Plan;
use memplan_tflite::{model::dtype_name, Entry};
use serde_json::json;

use crate::commands::emit;
use crate::input::{self, GraphSettings, TfliteInput};
use crate::table::{bytes, columns, key_values};
use crate::{InspectFormat, ReportFormat};

/// What TFLM does with a memplan plan of a `.tflite`'s arena.
pub struct TflmOutcome {
    /// The offline plan: one offset per tensor of every subgraph, `-1` for TFLM's own.
    pub offline: Vec<i32>,
    /// The head TFLM reports when the model carries `offline`: the plan's tensors where
    /// memplan put them, kernel scratch buffers where TFLM's greedy planner puts them.
    pub head_with_plan: u64,
    /// The head TFLM plans by itself (its GreedyMemoryPlanner, reproduced).
    pub own_head: u64,
}

/// Predicts what TFLM does with `plan` and what it would do without it.
pub fn outcome(input: &TfliteInput, plan: &Plan, file: &Path) -> Result<TflmOutcome> {
    let name = file.display().to_string();
    let offline = memplan_tflite::offline_offsets(&input.arena, plan, &name)?;
    let placement = memplan_tflite::tflm_placement(&input.arena, &offline, &name)?;
    let head_with_plan = memplan::plan::arena_bytes(&input.arena.problem, &placement)
        .with_context(|| format!("'{name}': an offset plus its tensor's size passes 2^64"))?;
    // TFLM's own head is that of its arena without memplan's sharing.
    let own = memplan_tflite::arena(&input.model, memplan_tflite::ArenaOptions::default(), &name)?;
    let own_head = TflmGreedy
        .plan(&own.problem)
        .with_context(|| format!("'{name}': TFLM's own planner"))?
        .arena_bytes
        .unwrap_or(0);
    Ok(TflmOutcome {
        offline,
        head_with_plan,
        own_head,
    })
}

/// The arena's [`memplan_tflite::TflmCaveat`]s as sentences, for JSON.
fn caveat_texts(arena: &memplan_tflite::Arena) -> Vec<String> {
    arena.caveats.iter().map(ToString::to_string).collect()
}

/// Warns on standard error of each thing TFLM does with the model that its file does not
/// show (weights it will not read, dynamic outputs it refuses), whatever the output format.
pub fn warn_caveats(arena: &memplan_tflite::Arena, file: &Path) {
    for caveat in &arena.caveats {
        let text = format!("'{}': {caveat}", file.display());
        noteln!("warning: {}", memplan::render::printable(&text));
    }
}

/// Rows for `memplan plan`'s table.
pub fn table_rows(input: &TfliteInput, outcome: &TflmOutcome) -> Vec<(&'static str, String)> {
    let scratch = input
        .arena
        .entries
        .iter()
        .filter(|e| matches!(e, Entry::Scratch(_)))
        .count();
    let mut rows = vec![
        ("TFLM head, this plan", bytes(outcome.head_with_plan)),
        ("TFLM head, its own", bytes(outcome.own_head)),
        ("scratch buffers", format!("{scratch} (placed by TFLM)")),
    ];
    for caveat in &input.arena.caveats {
        rows.push(("TFLM caveat", caveat.to_string()));
    }
    if !input.arena.unmodelled.is_empty() {
        rows.push((
            "unmodelled scratch",
            format!(
                "{} (TFLM's head may be larger by their scratch buffers)",
                input.arena.unmodelled.join(", ")
            ),
        ));
    }
    rows
}

/// Fields for `memplan plan --format json`.
pub fn json_extras(
    input: &TfliteInput,
    outcome: &TflmOutcome,
    extra: &mut serde_json::Map<String, serde_json::Value>,
) {
    extra.insert("tflm_head_bytes".into(), json!(outcome.head_with_plan));
    extra.insert("tflm_own_head_bytes".into(), json!(outcome.own_head));
    extra.insert("unmodelled_scratch".into(), json!(input.arena.unmodelled));
    extra.insert("tflm_caveats".into(), json!(caveat_texts(&input.arena)));
    extra.insert("offline_offsets".into(), json!(outcome.offline));
}

/// `memplan plan … --write-offline-plan OUT`: the model with the plan embedded.
pub fn write_offline_plan(
    input: &TfliteInput,
    outcome: &TflmOutcome,
    file: &Path,
    out: &Path,
) -> Result<()> {
    let written = memplan_tflite::write::with_offline_plan(
        &input.bytes,
        &outcome.offline,
        &file.display().to_string(),
    )?;
    // Hold the written file to what was planned: it reads back with the same offsets.
    let again = memplan_tflite::read_model(&written, &out.display().to_string())?;
    let embedded = memplan_tflite::offline::read(&again, &out.display().to_string())?;
    if embedded.as_deref() != Some(&outcome.offline[..]) {
        bail!(
            "internal error: the offline plan written to '{}' does not read back; please report this bug",
            out.display()
        );
    }
    std::fs::write(out, written).with_context(|| format!("cannot write '{}'", out.display()))
}

/// `memplan check MODEL.tflite`: the offline plan embedded in the model, checked against
/// TFLM's lifetimes with the scratch buffers TFLM will place around it.
pub fn check_embedded(file: &Path, format: ReportFormat) -> Result<ExitCode> {
    let name = file.display().to_string();
    let model = memplan_tflite::read_file(file)?;
    let Some(verdict) = memplan_tflite::check_offline(&model, &name)? else {
        bail!(
            "'{name}' has no OfflineMemoryAllocation metadata to check; write one with `memplan plan {name} --write-offline-plan OUT.tflite`, or give a plan file: `memplan check {name} PLAN`"
        );
    };
    warn_caveats(&verdict.arena, file);
    let valid = verdict.report.is_valid();
    let text = match format {
        ReportFormat::Json => {
            let value = json!({
                "valid": valid,
                "tflm_head_bytes": verdict.head,
                "tflm_caveats": caveat_texts(&verdict.arena),
                "placed_tensors": verdict.placed_tensors,
                "tensors": verdict.arena.tensor_count,
                "violations": verdict.report.violations.iter().map(|v| v.to_string()).collect::<Vec<_>>(),
                "allowed_sharing": verdict.allowed_sharing,
            });
            format!("{}\n", serde_json::to_string_pretty(&value)?)
        }
        ReportFormat::Table => {
            let mut out = key_values(&[
                ("model", name.clone()),
                (
                    "offline plan",
                    format!(
                        "{} of {} tensors placed",
                        verdict.placed_tensors, verdict.arena.tensor_count
                    ),
                ),
                ("TFLM head", bytes(verdict.head)),
                (
                    "shared as kernels allow",
                    verdict.allowed_sharing.len().to_string(),
                ),
                (
                    "verdict",
                    if valid {
                        "valid".to_string()
                    } else {
                        format!("INVALID, {} violations", verdict.report.violations.len())
                    },
                ),
            ]);
            for v in &verdict.report.violations {
                out.push_str(&format!(
                    "  {}\n",
                    memplan_tflite::display_name(&v.to_string())
                ));
            }
            out
        }
    };
    emit(&text, None)?;
    Ok(if valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `memplan inspect MODEL.tflite`: one row per tensor (subgraph, index, name, type, shape,
/// bytes, TFLM lifetime, kind, the buffer it shares) and one per scratch buffer.
pub fn inspect(file: &Path, format: InspectFormat, settings: &GraphSettings) -> Result<ExitCode> {
    let input = input::read_tflite(file, input::tflite_options(file, settings)?)?;
    let model = &input.model;
    let arena = &input.arena;
    warn_caveats(arena, file);
    // Each tensor's buffer (and the buffer's owner name) in the arena problem.
    let mut buffer_of = std::collections::HashMap::new();
    for (b, entry) in arena.entries.iter().enumerate() {
        if let Entry::Tensors(tensors) = entry {
            for &st in tensors {
                buffer_of.insert(st, b);
            }
        }
    }
    let buffers = arena.problem.buffers();
    struct Row {
        subgraph: usize,
        index: Option<usize>,
        name: String,
        dtype: String,
        shape: String,
        bytes: u64,
        lifetime: Option<(u64, u64)>,
        kind: &'static str,
        shares: String,
        /// `KIND@N`: the operator that writes it.
        producer: String,
    }
    let mut rows = Vec::new();
    for (s, sg) in model.subgraphs.iter().enumerate() {
        let mut producer = std::collections::HashMap::new();
        for (o, op) in sg.operators.iter().enumerate() {
            for &t in &op.outputs {
                producer.insert(t, format!("{}@{o}", op.kind()));
            }
        }
        for (t, tensor) in sg.tensors.iter().enumerate() {
            let buffer = buffer_of.get(&(s, t)).copied();
            // A model may have no buffers at all (the reader accepts buffer 0 then).
            let stored = model.buffers.get(tensor.buffer);
            let kind = if stored.is_some_and(|b| b.has_data()) {
                "constant"
            } else if stored.is_some_and(|b| b.external) {
                // TFLM does not read it (a TFLM caveat): in the arena, never filled.
                "unread constant"
            } else if tensor.is_variable {
                "variable"
            } else if buffer.is_none() {
                "empty"
            } else if sg.inputs.contains(&t) {
                "input"
            } else if sg.outputs.contains(&t) {
                "output"
            } else {
                "activation"
            };
            let shares = buffer
                .filter(|&b| matches!(&arena.entries[b], Entry::Tensors(g) if g[0] != (s, t)))
                .map(|b| buffers[b].name.clone())
                .unwrap_or_default();
            rows.push(Row {
                subgraph: s,
                index: Some(t),
                name: tensor.name.clone(),
                dtype: dtype_name(tensor.dtype),
                shape: tensor
                    .shape
                    .iter()
                    .map(i32::to_string)
                    .collect::<Vec<_>>()
                    .join("x"),
                bytes: tensor.bytes,
                lifetime: buffer.map(|b| {
                    let l = buffers[b].lifetime;
                    (l.start, l.end)
                }),
                kind,
                shares,
                producer: producer.get(&t).cloned().unwrap_or_default(),
            });
        }
    }
    for (b, entry) in arena.entries.iter().enumerate() {
        if let Entry::Scratch(request) = entry {
            rows.push(Row {
                subgraph: request.subgraph,
                index: None,
                name: buffers[b].name.clone(),
                dtype: "-".into(),
                shape: String::new(),
                bytes: request.bytes,
                lifetime: Some((buffers[b].lifetime.start, buffers[b].lifetime.end)),
                kind: "scratch",
                shares: String::new(),
                producer: request.operator_label(model),
            });
        }
    }
    let bound = memplan::bound::max_live(&arena.problem).unwrap_or(0);
    let own = TflmGreedy.plan(
        &memplan_tflite::arena(
            model,
            memplan_tflite::ArenaOptions::default(),
            &file.display().to_string(),
        )?
        .problem,
    )?;
    let text = match format {
        InspectFormat::Csv => {
            let mut out = String::from("name,dtype,shape,bytes,start,end,kind,shares_buffer_of\n");
            for r in rows.iter().filter(|r| r.lifetime.is_some()) {
                let (start, end) = r.lifetime.unwrap_or_default();
                out.push_str(&format!(
                    "{},{},{},{},{start},{end},{},{}\n",
                    crate::inspect::csv_field(&r.name),
                    r.dtype,
                    r.shape,
                    r.bytes,
                    r.kind,
                    crate::inspect::csv_field(&r.shares)
                ));
            }
            out
        }
        InspectFormat::Json => {
            let tensors: Vec<_> = rows
                .iter()
                .map(|r| {
                    json!({
                        "subgraph": r.subgraph,
                        "index": r.index,
                        "name": r.name,
                        "dtype": r.dtype,
                        "bytes": r.bytes,
                        "shape": r.shape,
                        "start": r.lifetime.map(|l| l.0),
                        "end": r.lifetime.map(|l| l.1),
                        "kind": r.kind,
                        "shares_buffer_of": (!r.shares.is_empty()).then_some(&r.shares),
                        "producer": (!r.producer.is_empty()).then_some(&r.producer),
                    })
                })
                .collect();
            let value = json!({
                "model": file.display().to_string(),
                "subgraphs": model.subgraphs.len(),
                "operators": model.subgraphs.iter().map(|s| s.operators.len()).sum::<usize>(),
                "tensors": tensors,
                "totals": {
                    "arena_buffers": arena.problem.len(),
                    "max_live_bound_bytes": bound,
                    "tflm_own_head_bytes": own.arena_bytes,
                    "unmodelled_scratch": arena.unmodelled,
                    "tflm_caveats": caveat_texts(arena),
                }
            });
            format!("{}\n", serde_json::to_string_pretty(&value)?)
        }
        InspectFormat::Table => {
            let table: Vec<Vec<String>> = rows
                .iter()
                .map(|r| {
                    vec![
                        r.index
                            .map_or("-".into(), |t| format!("{}:{t}", r.subgraph)),
                        memplan_tflite::display_name(&r.name).into_owned(),
                        r.dtype.clone(),
                        r.shape.clone(),
                        r.bytes.to_string(),
                        r.lifetime
                            .map_or(String::new(), |(a, b)| format!("[{a}, {b})")),
                        r.kind.to_string(),
                        memplan_tflite::display_name(&r.shares).into_owned(),
                    ]
                })
                .collect();
            let mut out = columns(
                &[
                    "tensor", "name", "dtype", "shape", "bytes", "lifetime", "kind", "shares",
                ],
                &table,
            );
            out.push('\n');
            let mut totals = vec![
                (
                    "operators",
                    model
                        .subgraphs
                        .iter()
                        .map(|s| s.operators.len())
                        .sum::<usize>()
                        .to_string(),
                ),
                ("arena buffers", arena.problem.len().to_string()),
                ("max-live bound", bytes(bound)),
                ("TFLM head, its own", bytes(own.arena_bytes.unwrap_or(0))),
            ];
            for caveat in &arena.caveats {
                totals.push(("TFLM caveat", caveat.to_string()));
            }
            if !arena.unmodelled.is_empty() {
                totals.push(("unmodelled scratch", arena.unmodelled.join(", ")));
            }
            out.push_str(&key_values(&totals));
            out
        }
    };
    emit(&text, None)?;
    Ok(ExitCode::SUCCESS)
}
