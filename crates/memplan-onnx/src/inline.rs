//! Inlining of model-local functions (`ModelProto.functions`) before import, as
//! `onnx.inliner.inline_local_functions` does: every node that calls a function becomes the
//! function's nodes, in order, so the imported graph numbers them as steps of their own.
//!
//! - Formal inputs and outputs are renamed to the caller's values (an omitted optional input
//!   stays omitted); the function's internal values become `<call>/<name>`, where `<call>`
//!   is the calling node's name (`node_<i>` when it has none), so they are unique and
//!   readable. Inner nodes are named `<call>/<inner name>` (`<call>/<op>_<j>` when unnamed).
//! - Attributes with `ref_attr_name` take the caller's attribute of that name, else the
//!   function's default (`attribute_proto`), else they are dropped (ONNX semantics).
//! - Nested calls are expanded recursively; a function that calls itself (directly or not)
//!   is an error naming the chain.
//!
//! Functions are matched by `(domain, name, overload)`.

use std::collections::HashMap;

use crate::proto::{AttributeProto, FunctionProto, GraphProto, ModelProto, NodeProto};

/// Calls deeper than this are taken for recursion.
const MAX_DEPTH: usize = 64;

/// At most this many nodes after inlining (functions calling functions several times each
/// multiply); a larger expansion is an error rather than an exhausted memory.
pub const MAX_INLINED_NODES: usize = 1 << 20;

/// The main graph with every local-function call expanded, with, per node, the version of
/// the default operator set it was written for when that is a function's own (its
/// `opset_import`) rather than the model's; `None` when the model has no functions
/// (nothing to do). The error text names the calling node and function.
#[allow(clippy::type_complexity)]
pub fn inline_functions(
    model: &ModelProto,
) -> Result<Option<(GraphProto, Vec<Option<i64>>)>, String> {
    let Some(g) = &model.graph else {
        return Ok(None);
    };
    if model.functions.is_empty() {
        return Ok(None);
    }
    let mut table: HashMap<(&str, &str, &str), &FunctionProto> = HashMap::new();
    for f in &model.functions {
        if table
            .insert((f.domain.as_str(), f.name.as_str(), f.overload.as_str()), f)
            .is_some()
        {
            return Err(format!(
                "function '{}' of domain '{}' is defined twice",
                f.name, f.domain
            ));
        }
    }
    let mut out = Vec::with_capacity(g.node.len());
    let mut opsets = Vec::with_capacity(g.node.len());
    for (i, n) in g.node.iter().enumerate() {
        let call = if n.name.is_empty() {
            format!("node_{i}")
        } else {
            n.name.clone()
        };
        expand(
            &table,
            n,
            &call,
            None,
            &mut Vec::new(),
            &mut out,
            &mut opsets,
        )?;
    }
    let mut inlined = g.clone();
    inlined.node = out;
    Ok(Some((inlined, opsets)))
}

/// Appends `n` (already renamed and with its attributes bound) to `out`, expanded when it
/// calls a function; `chain` holds the functions being expanded, for the recursion check.
/// `opset` is the default-domain version of the function `n` sits in (`None`: the model's).
#[allow(clippy::too_many_arguments)]
fn expand(
    table: &HashMap<(&str, &str, &str), &FunctionProto>,
    n: &NodeProto,
    call: &str,
    opset: Option<i64>,
    chain: &mut Vec<String>,
    out: &mut Vec<NodeProto>,
    opsets: &mut Vec<Option<i64>>,
) -> Result<(), String> {
    let Some(f) = table.get(&(n.domain.as_str(), n.op_type.as_str(), n.overload.as_str())) else {
        if out.len() >= MAX_INLINED_NODES {
            return Err(format!(
                "inlining reaches more than {MAX_INLINED_NODES} nodes (at node '{call}'); the functions call each other too many times"
            ));
        }
        let mut n = n.clone();
        n.name = call.to_string();
        out.push(n);
        opsets.push(opset);
        return Ok(());
    };
    if chain.len() >= MAX_DEPTH || chain.contains(&f.name) {
        return Err(format!(
            "node '{call}' calls function '{}' recursively ({} -> {}); local functions must not recurse",
            f.name,
            chain.join(" -> "),
            f.name
        ));
    }
    if n.input.len() > f.input.len() || n.output.len() > f.output.len() {
        return Err(format!(
            "node '{call}' passes {} inputs and {} outputs to function '{}', which has {} and {}",
            n.input.len(),
            n.output.len(),
            f.name,
            f.input.len(),
            f.output.len()
        ));
    }
    let mut rename: HashMap<&str, String> = HashMap::new();
    for (i, formal) in f.input.iter().enumerate() {
        rename.insert(formal, n.input.get(i).cloned().unwrap_or_default());
    }
    for (i, formal) in f.output.iter().enumerate() {
        match n.output.get(i) {
            Some(actual) if !actual.is_empty() => {
                rename.insert(formal, actual.clone());
            }
            _ => {
                rename.insert(formal, format!("{call}/{formal}"));
            }
        }
    }
    let name_of = |v: &str| -> String {
        if v.is_empty() {
            return String::new();
        }
        rename
            .get(v)
            .cloned()
            .unwrap_or_else(|| format!("{call}/{v}"))
    };
    let caller_attrs: HashMap<&str, &AttributeProto> =
        n.attribute.iter().map(|a| (a.name.as_str(), a)).collect();
    let defaults: HashMap<&str, &AttributeProto> = f
        .attribute_proto
        .iter()
        .map(|a| (a.name.as_str(), a))
        .collect();
    let inner_opset = f
        .opset_import
        .iter()
        .find(|o| o.domain.is_empty() || o.domain == "ai.onnx")
        .map(|o| o.version)
        .or(opset);
    chain.push(f.name.clone());
    for (j, inner) in f.node.iter().enumerate() {
        let mut m = inner.clone();
        m.input = inner.input.iter().map(|v| name_of(v)).collect();
        m.output = inner.output.iter().map(|v| name_of(v)).collect();
        m.attribute = Vec::with_capacity(inner.attribute.len());
        for a in &inner.attribute {
            if a.ref_attr_name.is_empty() {
                m.attribute.push(a.clone());
                continue;
            }
            let bound = caller_attrs
                .get(a.ref_attr_name.as_str())
                .or_else(|| defaults.get(a.ref_attr_name.as_str()));
            if let Some(b) = bound {
                let mut b = (*b).clone();
                b.name = a.name.clone();
                b.ref_attr_name.clear();
                m.attribute.push(b);
            }
        }
        let inner_name = if inner.name.is_empty() {
            format!("{}_{j}", inner.op_type)
        } else {
            inner.name.clone()
        };
        let inner_call = format!("{call}/{inner_name}");
        expand(table, &m, &inner_call, inner_opset, chain, out, opsets)?;
    }
    chain.pop();
    Ok(())
}
