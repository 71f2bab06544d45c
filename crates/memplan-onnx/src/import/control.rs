//! Control flow: `If`, `Loop` and `Scan` with their sub-graphs.
//!
//! - **Outer values a body reads** (names it uses without defining them, at any depth) become
//!   extra inputs of the node, after its own ([`add_implicit_inputs`]): they are inputs of
//!   the node in the graph, so they live across it.
//! - **Bodies are inferred** with the node's inputs and the outer values in scope
//!   ([`infer`]): `If` takes the branch its condition selects when the condition is known,
//!   else both branches, which must agree (or differ only in sizes: the larger is planned,
//!   marked as a bound); `Loop` stacks its scan outputs along the trip count (`M` when known,
//!   else `--max-dim`, marked as a bound); `Scan` stacks along its scan inputs' length.
//! - **Bodies are laid out as steps** ([`Expansion`], built while the bodies are inferred;
//!   the importer adds them to the graph): the node (writing its outputs and the bodies'
//!   formal inputs), every body node as `<node>/<attribute>/<inner node>` with its values
//!   `<node>/<attribute>/<value>` (both branches of an `If` whose condition is unknown, one
//!   after the other, so that they share memory; nested bodies expand inside), then a
//!   closing step `<node>/end` reading what must live to the end of the body: its outputs,
//!   the node's outputs, and for `Loop` and `Scan` the formal inputs and the outer values the
//!   body reads, which the next iteration reads again. A `Loop` or `Scan` is thus planned
//!   for one iteration, valid for all (doc/onnx.md, "The graph built").
//! - **Upper bounds** reach into bodies: a body value computed from a bounded value (outer
//!   or local) is bounded too, with the same rule as the outer graph's.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use memplan_graph::{Attribute, DType};

use super::{constant_value, inherit_bound, node_ctx, Importer};
use crate::fold::Data;
use crate::infer::{self, Info, NodeError};
use crate::proto::{GraphProto, NodeProto};
use crate::ImportOptions;

/// A control-flow node's bodies as steps of the outer graph, around the node's own step:
/// the node (which writes its outputs and the bodies' formal inputs), every body node in
/// order (both branches of an `If` whose condition is unknown, one after the other), then a
/// closing step `<node>/end` that reads what must live to the end of an iteration.
#[derive(Clone, Debug, Default)]
pub(super) struct Expansion {
    /// The bodies' formal inputs (`Loop`: iteration number, condition, loop-carried values;
    /// `Scan`: states and one slice of each scan input), by key (an outer value's key is its name,
    /// a body value's is its graph name after [`BODY`]).
    pub formals: Vec<(String, Info)>,
    /// The bodies' initialisers (weights), by key.
    pub weights: Vec<(String, Info)>,
    /// The body nodes in order.
    pub nodes: Vec<BodyNode>,
    /// What the closing step reads, by key: the body outputs; for `Loop` and `Scan`
    /// also the formal inputs and the outer values the bodies read (every iteration reads
    /// them again), and a `Scan`'s own inputs (sliced at every iteration).
    pub end_reads: Vec<String>,
}

/// The first character of a body value's key: keys of body values never equal an outer
/// value's name (which is its key), however the file names its values. [`shown`] drops it.
const BODY: char = '\u{0}';

/// The graph name of the value whose key is `key`.
pub(super) fn shown(key: &str) -> &str {
    key.strip_prefix(BODY).unwrap_or(key)
}

/// One node of a body, named by its graph name and wired by keys.
#[derive(Clone, Debug)]
pub(super) struct BodyNode {
    /// `<node>/<attribute>/<inner node>` (`node_<j>` when unnamed).
    pub name: String,
    pub op: String,
    pub domain: String,
    /// Keys of its inputs (`""`: omitted), then, for a control-flow node, the
    /// outer values its own bodies read.
    pub inputs: Vec<String>,
    /// Keys of its outputs (omitted ones left out) with their facts.
    pub outputs: Vec<(String, Info)>,
    pub attrs: BTreeMap<String, Attribute>,
    /// Its own bodies, for a control-flow node.
    pub inner: Option<Expansion>,
}

/// `info` with the bound `why` (when there is one).
fn with_bound(mut info: Info, why: Option<String>) -> Info {
    if info.bound.is_none() {
        info.bound = why;
    }
    info
}

/// True for the control-flow operators of the default domain.
pub(super) fn is_control(n: &NodeProto) -> bool {
    (n.domain.is_empty() || n.domain == "ai.onnx")
        && matches!(n.op_type.as_str(), "If" | "Loop" | "Scan")
}

fn bodies(n: &NodeProto) -> impl Iterator<Item = (&str, &GraphProto)> {
    n.attribute
        .iter()
        .filter_map(|a| a.g.as_deref().map(|g| (a.name.as_str(), g)))
}

/// Names `g` reads that it does not define (its inputs, initialisers, node outputs), in
/// first-use order, including those its nested sub-graphs read.
pub(super) fn free_names(g: &GraphProto) -> Vec<String> {
    let mut defined: BTreeSet<&str> = g.input.iter().map(|v| v.name.as_str()).collect();
    defined.extend(g.initializer.iter().map(|t| t.name.as_str()));
    for n in &g.node {
        defined.extend(n.output.iter().map(String::as_str));
    }
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    let mut push = |name: &str, out: &mut Vec<String>| {
        if !name.is_empty() && !defined.contains(name) && seen.insert(name.to_string()) {
            out.push(name.to_string());
        }
    };
    for n in &g.node {
        for i in &n.input {
            push(i, &mut out);
        }
        for (_, b) in bodies(n) {
            for name in free_names(b) {
                push(&name, &mut out);
            }
        }
    }
    for o in &g.output {
        push(&o.name, &mut out);
    }
    out
}

/// The graph with every control-flow node's outer reads appended to its inputs, and the
/// number of each node's own inputs; `None` when no node has a sub-graph.
pub(super) fn add_implicit_inputs(g: &GraphProto) -> Option<(GraphProto, Vec<usize>)> {
    if !g.node.iter().any(|n| bodies(n).next().is_some()) {
        return None;
    }
    let mut g2 = g.clone();
    let mut explicit = Vec::with_capacity(g.node.len());
    for n in &mut g2.node {
        explicit.push(n.input.len());
        let mut extra: Vec<String> = Vec::new();
        for (_, b) in bodies(n) {
            for name in free_names(b) {
                if !n.input.contains(&name) && !extra.contains(&name) {
                    extra.push(name);
                }
            }
        }
        n.input.extend(extra);
    }
    Some((g2, explicit))
}

/// Infers a control-flow node's outputs. `inputs` are its own inputs (without the implicit
/// ones), `outer` every value in scope by its name in the file, `rename` its key in the
/// graph. The node's bodies are laid out in `exp`, named under `path` (the node's own
/// graph name).
#[allow(clippy::too_many_arguments)]
pub(super) fn infer(
    imp: &Importer,
    n: &NodeProto,
    inputs: &[Option<&Info>],
    outer: &dyn Fn(&str) -> Option<Info>,
    opset: i64,
    options: &ImportOptions,
    rename: &dyn Fn(&str) -> String,
    path: &str,
    exp: &mut Expansion,
) -> Result<Vec<Info>, String> {
    let body = |name: &str| -> Result<&GraphProto, String> {
        bodies(n)
            .find(|(a, _)| *a == name)
            .map(|(_, g)| g)
            .ok_or_else(|| format!("attribute '{name}' (a graph) is missing"))
    };
    let input = |slot: usize| -> Result<&Info, String> {
        inputs
            .get(slot)
            .copied()
            .flatten()
            .ok_or_else(|| format!("input {slot} is missing"))
    };
    match n.op_type.as_str() {
        "If" => {
            let cond = input(0)?;
            let pick = match &cond.data {
                Some(Data::Ints(v)) if v.len() == 1 => Some(v[0] != 0),
                _ => None,
            };
            let mut run = |name: &str| -> Result<Vec<Info>, String> {
                let scope = format!("{path}/{name}");
                let (infos, names) = infer_graph(
                    imp,
                    body(name)?,
                    &[],
                    outer,
                    rename,
                    opset,
                    options,
                    &scope,
                    exp,
                )
                .map_err(|e| format!("in {name}: {e}"))?;
                exp.end_reads.extend(names);
                Ok(infos)
            };
            match pick {
                Some(true) => run("then_branch"),
                Some(false) => run("else_branch"),
                None => {
                    let t = run("then_branch")?;
                    let e = run("else_branch")?;
                    if t.len() != e.len() {
                        return Err(format!(
                            "then_branch has {} outputs and else_branch {}",
                            t.len(),
                            e.len()
                        ));
                    }
                    t.into_iter()
                        .zip(e)
                        .enumerate()
                        .map(|(k, (a, b))| merge_branches(k, a, b))
                        .collect()
                }
            }
        }
        "Loop" => {
            let g = body("body")?;
            let carried: Vec<Info> = (2..inputs.len())
                .map(|s| input(s).cloned())
                .collect::<Result<_, _>>()?;
            let (trip, bound) = match inputs.first().copied().flatten() {
                Some(m) => match &m.data {
                    Some(Data::Ints(v)) if v.len() == 1 => (u64::try_from(v[0]).unwrap_or(0), None),
                    _ => user_trip(options, "the trip count M (input 0) is a runtime value")?,
                },
                None => user_trip(
                    options,
                    "the Loop has no trip count M; it stops on its condition",
                )?,
            };
            let mut formal = vec![
                Info::new(DType::Int64, vec![]),
                Info::new(DType::Bool, vec![]),
            ];
            formal.extend(
                carried
                    .iter()
                    .map(|c| with_bound(Info::new(c.dtype, c.shape.clone()), c.bound.clone())),
            );
            let scope = format!("{path}/body");
            let (outs, names) =
                infer_graph(imp, g, &formal, outer, rename, opset, options, &scope, exp)
                    .map_err(|e| format!("in body: {e}"))?;
            iteration_reads(n, rename, names, exp);
            let n_carried = carried.len();
            if outs.len() < 1 + n_carried {
                return Err(format!(
                    "the body has {} outputs; it needs the condition and {n_carried} loop-carried values",
                    outs.len()
                ));
            }
            let mut result = Vec::new();
            for (k, (init, out)) in carried.iter().zip(&outs[1..1 + n_carried]).enumerate() {
                if init.shape != out.shape || init.dtype != out.dtype {
                    return Err(format!(
                        "loop-carried value {k} enters as {} {:?} and leaves the body as {} {:?}; a value that changes shape across iterations has no static size",
                        init.dtype, init.shape, out.dtype, out.shape
                    ));
                }
                result.push(with_bound(
                    Info::new(out.dtype, out.shape.clone()),
                    out.bound.clone().or_else(|| init.bound.clone()),
                ));
            }
            for s in &outs[1 + n_carried..] {
                let mut shape = vec![trip];
                shape.extend_from_slice(&s.shape);
                result.push(match &bound {
                    Some(why) => Info::bounded(s.dtype, shape, why.clone()),
                    None => with_bound(Info::new(s.dtype, shape), s.bound.clone()),
                });
            }
            Ok(result)
        }
        "Scan" => {
            let g = body("body")?;
            let attrs = attrs_of(imp, n)?;
            let get_ints = |name: &str| match attrs.get(name) {
                Some(Attribute::Ints(v)) => v.clone(),
                _ => Vec::new(),
            };
            let m = match attrs.get("num_scan_inputs") {
                Some(Attribute::Int(m)) if *m > 0 => *m as usize,
                _ => {
                    return Err(
                        "attribute 'num_scan_inputs' is required and must be positive".into(),
                    )
                }
            };
            if m > inputs.len() {
                return Err(format!(
                    "num_scan_inputs is {m} but the node has {} inputs",
                    inputs.len()
                ));
            }
            let n_states = inputs.len() - m;
            let in_axes = get_ints("scan_input_axes");
            let out_axes = get_ints("scan_output_axes");
            let mut formal = Vec::new();
            for s in 0..n_states {
                let i = input(s)?;
                formal.push(with_bound(
                    Info::new(i.dtype, i.shape.clone()),
                    i.bound.clone(),
                ));
            }
            let mut len = None;
            for k in 0..m {
                let i = input(n_states + k)?;
                let ax = in_axes.get(k).copied().unwrap_or(0);
                let ax = infer::normalize_axis(ax, i.shape.len()).ok_or_else(|| {
                    format!(
                        "scan_input_axes[{k}] = {ax} is out of range for scan input {k} of rank {}",
                        i.shape.len()
                    )
                })?;
                let l = i.shape[ax];
                if *len.get_or_insert(l) != l {
                    return Err(format!(
                        "scan inputs have different lengths ({} and {l})",
                        len.unwrap_or(0)
                    ));
                }
                let mut shape = i.shape.clone();
                shape.remove(ax);
                formal.push(with_bound(Info::new(i.dtype, shape), i.bound.clone()));
            }
            let len = len.unwrap_or(0);
            let scope = format!("{path}/body");
            let (outs, names) =
                infer_graph(imp, g, &formal, outer, rename, opset, options, &scope, exp)
                    .map_err(|e| format!("in body: {e}"))?;
            iteration_reads(n, rename, names, exp);
            // The scan inputs are sliced at every iteration.
            exp.end_reads.extend(
                n.input[..inputs.len()]
                    .iter()
                    .filter(|i| !i.is_empty())
                    .map(|i| rename(i)),
            );
            if outs.len() < n_states {
                return Err(format!(
                    "the body has {} outputs for {n_states} states",
                    outs.len()
                ));
            }
            let mut result: Vec<Info> = outs[..n_states]
                .iter()
                .map(|o| with_bound(Info::new(o.dtype, o.shape.clone()), o.bound.clone()))
                .collect();
            for (k, o) in outs[n_states..].iter().enumerate() {
                let ax = out_axes.get(k).copied().unwrap_or(0);
                let ax = infer::normalize_axis(ax, o.shape.len() + 1).ok_or_else(|| {
                    format!(
                        "scan_output_axes[{k}] = {ax} is out of range for rank {}",
                        o.shape.len() + 1
                    )
                })?;
                let mut shape = o.shape.clone();
                shape.insert(ax, len);
                result.push(with_bound(Info::new(o.dtype, shape), o.bound.clone()));
            }
            Ok(result)
        }
        other => Err(format!("'{other}' is not a control-flow operator")),
    }
}

/// The closing step of a `Loop` or `Scan` reads the body outputs (`outputs`), the formal
/// inputs and the outer values the body reads (its own inputs among them when the body
/// reads them by name): each iteration needs them again.
fn iteration_reads(
    n: &NodeProto,
    rename: &dyn Fn(&str) -> String,
    outputs: Vec<String>,
    exp: &mut Expansion,
) {
    exp.end_reads.extend(outputs);
    let formals: Vec<String> = exp.formals.iter().map(|(name, _)| name.clone()).collect();
    exp.end_reads.extend(formals);
    for (_, b) in bodies(n) {
        exp.end_reads
            .extend(free_names(b).iter().map(|name| rename(name)));
    }
}

fn user_trip(options: &ImportOptions, why: &str) -> Result<(u64, Option<String>), String> {
    match options.max_dim {
        Some(m) => Ok((m, Some(format!("{why}; trip count <= --max-dim {m}")))),
        None => Err(format!(
            "{why}, so the scan outputs have no static size; give an upper bound with --max-dim <n> (ImportOptions::max_dim)"
        )),
    }
}

/// One output of an `If` whose condition is unknown: equal branches, or the larger sizes
/// of two of one rank and type (marked as a bound).
fn merge_branches(k: usize, a: Info, b: Info) -> Result<Info, String> {
    if a.dtype == b.dtype && a.shape == b.shape {
        return Ok(with_bound(Info::new(a.dtype, a.shape), a.bound.or(b.bound)));
    }
    if a.dtype != b.dtype || a.shape.len() != b.shape.len() {
        return Err(format!(
            "output {k} is {} {:?} in then_branch and {} {:?} in else_branch; branches of an If with an unknown condition must agree in type and rank",
            a.dtype, a.shape, b.dtype, b.shape
        ));
    }
    let shape: Vec<u64> = a
        .shape
        .iter()
        .zip(&b.shape)
        .map(|(x, y)| *x.max(y))
        .collect();
    Ok(Info::bounded(
        a.dtype,
        shape,
        format!(
            "If output {k} is {:?} or {:?} depending on its runtime condition; the larger is planned",
            a.shape, b.shape
        ),
    ))
}

fn attrs_of(imp: &Importer, n: &NodeProto) -> Result<BTreeMap<String, Attribute>, String> {
    let mut map = BTreeMap::new();
    for a in &n.attribute {
        if let Some(v) = imp.attribute(&n.name, a).map_err(|e| e.to_string())? {
            map.insert(a.name.clone(), v);
        }
    }
    Ok(map)
}

/// Infers a sub-graph's outputs, its nodes in their order: `formal` for its inputs, its
/// own initialisers, and `outer` for every other name (`rename`: its key). Lays the
/// sub-graph out in `exp`, its values named `<scope>/<name>`, nested bodies under
/// `<scope>/<inner node>/<attribute>`. Returns the outputs' facts and keys.
#[allow(clippy::too_many_arguments)]
fn infer_graph(
    imp: &Importer,
    g: &GraphProto,
    formal: &[Info],
    outer: &dyn Fn(&str) -> Option<Info>,
    rename: &dyn Fn(&str) -> String,
    opset: i64,
    options: &ImportOptions,
    scope: &str,
    exp: &mut Expansion,
) -> Result<(Vec<Info>, Vec<String>), String> {
    if formal.len() != g.input.len() {
        return Err(format!(
            "the sub-graph has {} inputs but {} are given",
            g.input.len(),
            formal.len()
        ));
    }
    let mut local: HashMap<String, Info> = HashMap::new();
    let scoped = |name: &str| format!("{BODY}{scope}/{name}");
    for (vi, f) in g.input.iter().zip(formal) {
        local.insert(vi.name.clone(), f.clone());
        exp.formals.push((scoped(&vi.name), f.clone()));
    }
    for t in &g.initializer {
        let info = imp
            .tensor(t, &t.name, |_| true)
            .map_err(|e| e.to_string())?;
        exp.weights.push((scoped(&t.name), info.clone()));
        local.insert(t.name.clone(), info);
    }
    for (i, n) in g.node.iter().enumerate() {
        let label = if n.name.is_empty() {
            format!("node_{i}")
        } else {
            n.name.clone()
        };
        let fail = |m: String| format!("node '{label}' ({}): {m}", n.op_type);
        let attrs = attrs_of(imp, n).map_err(fail)?;
        let mut owned: Vec<Option<Info>> = Vec::with_capacity(n.input.len());
        for (slot, name) in n.input.iter().enumerate() {
            if name.is_empty() {
                owned.push(None);
                continue;
            }
            let info = local.get(name).cloned().or_else(|| outer(name));
            match info {
                Some(i) => owned.push(Some(i)),
                None => {
                    return Err(fail(format!(
                        "input {slot} '{name}' is not defined in the sub-graph or around it"
                    )))
                }
            }
        }
        let graph_name = |name: &str| -> String {
            if name.is_empty() {
                String::new()
            } else if local.contains_key(name) {
                scoped(name)
            } else {
                rename(name)
            }
        };
        let mut inputs: Vec<String> = n.input.iter().map(|i| graph_name(i)).collect();
        // The bounded values the node reads (slot, graph name): its own inputs, and for a
        // nested control-flow node the values its bodies read (no slot of its own).
        let mut bounded: Vec<(usize, String)> = owned
            .iter()
            .enumerate()
            .filter(|(_, i)| i.as_ref().is_some_and(|i| i.bound.is_some()))
            .map(|(slot, _)| (slot, shown(&inputs[slot]).to_string()))
            .collect();
        let ins: Vec<Option<&Info>> = owned.iter().map(Option::as_ref).collect();
        let path = format!("{scope}/{label}");
        let mut inner = None;
        let outs = if n.op_type == "Constant" && (n.domain.is_empty() || n.domain == "ai.onnx") {
            vec![constant_value(&label, &attrs).map_err(fail)?]
        } else if is_control(n) {
            for (_, b) in bodies(n) {
                for name in free_names(b) {
                    if n.input.contains(&name) {
                        continue;
                    }
                    let info = local.get(&name).cloned().or_else(|| outer(&name));
                    if info.is_some_and(|i| i.bound.is_some()) {
                        bounded.push((usize::MAX, shown(&graph_name(&name)).to_string()));
                    }
                    if !inputs.contains(&graph_name(&name)) {
                        inputs.push(graph_name(&name));
                    }
                }
            }
            let scope_of = |name: &str| local.get(name).cloned().or_else(|| outer(name));
            let mut e = Expansion::default();
            let outs = infer(
                imp,
                n,
                &ins,
                &scope_of,
                opset,
                options,
                &graph_name,
                &path,
                &mut e,
            )
            .map_err(fail)?;
            inner = Some(e);
            outs
        } else {
            let ctx = node_ctx(n, &ins, &attrs, opset, options);
            match infer::infer_node(&ctx) {
                Ok(o) => o,
                Err(NodeError::Msg(m)) => return Err(fail(m)),
                Err(NodeError::Unsupported(why)) => {
                    return Err(fail(format!(
                        "operator '{}' is not supported: {why}",
                        n.op_type
                    )))
                }
            }
        };
        let mut outputs = Vec::new();
        for (slot, out) in n.output.iter().enumerate() {
            if out.is_empty() {
                continue;
            }
            let mut info = outs.get(slot).cloned().ok_or_else(|| {
                fail(format!(
                    "{} defines {} outputs, the node has {}",
                    n.op_type,
                    outs.len(),
                    n.output.len()
                ))
            })?;
            inherit_bound(&n.op_type, &bounded, &mut info);
            outputs.push((scoped(out), info.clone()));
            local.insert(out.clone(), info);
        }
        exp.nodes.push(BodyNode {
            name: path,
            op: n.op_type.clone(),
            domain: n.domain.clone(),
            inputs,
            outputs,
            attrs,
            inner,
        });
    }
    let mut infos = Vec::with_capacity(g.output.len());
    let mut names = Vec::with_capacity(g.output.len());
    for o in &g.output {
        let info = local
            .get(&o.name)
            .cloned()
            .or_else(|| outer(&o.name))
            .ok_or_else(|| format!("sub-graph output '{}' is not defined", o.name))?;
        infos.push(info);
        names.push(if local.contains_key(&o.name) {
            scoped(&o.name)
        } else {
            rename(&o.name)
        });
    }
    Ok((infos, names))
}
