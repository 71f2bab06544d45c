//! PipeDream training profiles (`graph.txt`) and the training step built from them.
//!
//! # The file
//!
//! One line per layer, then one tab-indented line per edge (the reader accepts the two
//! kinds in any order; blank lines are skipped):
//!
//! ```text
//! node2 -- Conv2d(3, 64, ...) -- forward_compute_time=1.5, backward_compute_time=3.0, activation_size=1024.000, parameter_size=36.000
//! \tnode1 -- node2
//! ```
//!
//! Times are milliseconds, sizes bytes (written with a fraction, which must be zero). A
//! layer with several outputs (GNMT's LSTMs: output, hidden and cell state) gives its
//! `activation_size` as a list `[a; b; c]`; it is read as one output of the summed size.
//! Every error names the file, the 1-based line and what is wrong ([`PipeDreamError`]).
//!
//! # The training step
//!
//! [`training_step`] turns a profile into one training step of a [`Graph`]:
//!
//! - **Forward**: one node per layer (`op_type` = the module name before `(`, e.g.
//!   `Conv2d`; name = the layer's name), in a topological order of the edges that takes
//!   the ready layer appearing first in the file (PipeDream files are not in topological
//!   order). The `Input` layer's forward time is set to 0 (it includes data loading). A
//!   layer reads the outputs of its predecessors, in edge order, and its parameters.
//! - **Backward**: one node `<layer>.bwd` (op `Backward`) per layer except `Input`
//!   layers, in the reverse of the forward order, with the backward time as latency. It
//!   reads the gradients `grad:<succ>-><layer>` that its successors' backward nodes
//!   produce (all summed inside it), the *forward activations it needs*: the outputs of
//!   its layer's predecessors (so each forward activation lives until the backward node
//!   of its consumer), and the parameters. A layer without successors (the model's
//!   last layer) reads its own output instead of gradients: the loss seed. It produces
//!   `grad:<layer>-><pred>` for each predecessor that is not an `Input` layer, of the
//!   predecessor's activation size (no gradient flows into the data).
//! - **Parameters** (`<layer>.param`, when `parameter_size > 0`) are
//!   [`ValueKind::Weight`] values: outside the activation arena, like weight gradients,
//!   which are not modelled.
//!
//! ```text
//!  forward                               backward (reverse order)
//!  Input ─x─> conv ─c─> relu(inplace) ─r─> fc ─y─┐
//!                                                 └> fc.bwd ─grad:fc->relu─> relu.bwd
//!   conv.bwd reads x; relu.bwd reads c; fc.bwd reads y (seed) and r (storage c)
//! ```
//!
//! # In-place layers
//!
//! A layer marked `(inplace)` writes its output into the storage of its first
//! predecessor (first edge in file order), so its `activation_size` is not new memory.
//! It is modelled as follows: its output value is a **0-byte token** (it orders the
//! readers after the in-place layer), and every node that reads the token also reads
//! the **storage root**: the first non-in-place value down the chain of in-place inputs
//! (`BN -> ReLU(inplace) -> Add(inplace) -> ReLU(inplace)` all share BN's storage). The
//! root therefore lives as long as any member of the chain is read, and its bytes are
//! counted once. An in-place layer larger than its storage root, or with no
//! predecessor, is an error. With this model the sum of the forward activation bytes
//! drops by exactly the in-place layers' sizes: 40% for ResNet-50, 47% for VGG-16, 32%
//! for DenseNet-121 and 28% for Inception-v3, the overstatement the benchmark README
//! gives (tested in `tests/pipedream.rs`).
//!
//! The memory model of the result is [`memplan_graph::analyse`] with
//! [`memplan_graph::Options::NONE`] in [`memplan_graph::Order::File`] (the nodes are
//! added in execution order); its own alias and in-place rules must stay off, since the
//! sharing is already explicit.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::path::Path;

use memplan_graph::{DType, Graph, GraphError, NodeId, Value, ValueId, ValueKind};

/// One layer of a profile.
#[derive(Clone, Debug, PartialEq)]
pub struct Layer {
    /// Its name, e.g. `node12`.
    pub name: String,
    /// The PyTorch module description, e.g. `ReLU(inplace)`.
    pub description: String,
    /// Forward time in milliseconds, as profiled.
    pub forward_ms: f64,
    /// Backward time in milliseconds.
    pub backward_ms: f64,
    /// Size of the layer's output in bytes (the sum, for a list of several outputs).
    pub activation_bytes: u64,
    /// Size of the layer's parameters in bytes.
    pub parameter_bytes: u64,
    /// The 1-based line that defines it.
    pub line: usize,
}

impl Layer {
    /// True when the description marks the layer `(inplace)`.
    pub fn is_inplace(&self) -> bool {
        self.description.contains("(inplace)")
    }

    /// True for the data layer (`Input`), whose forward time is data loading.
    pub fn is_input(&self) -> bool {
        self.description == "Input"
    }

    /// The module name: the description up to the first `(`, e.g. `Conv2d`.
    pub fn op_type(&self) -> &str {
        let end = self.description.find('(').unwrap_or(self.description.len());
        self.description[..end].trim()
    }
}

/// A parsed profile: layers in file order and edges `(from, to)` as layer indices, in
/// file order.
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    /// A name for messages (the file name).
    pub name: String,
    pub layers: Vec<Layer>,
    pub edges: Vec<(usize, usize)>,
}

/// A profile that cannot be read, with the file and 1-based line at fault (line 0 when
/// the problem is the whole file, e.g. it cannot be opened).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct PipeDreamError {
    pub file: String,
    pub line: usize,
    pub message: String,
}

/// Reads a profile from a file.
pub fn read_file(path: &Path) -> Result<Profile, PipeDreamError> {
    let file = path.display().to_string();
    // Bounded like every text input (1 GiB; a NUL byte, as in `/dev/zero`, stops it at once).
    let text = memplan::io::file::read_text(path).map_err(|e| PipeDreamError {
        file: file.clone(),
        line: 0,
        message: format!("cannot read: {e}"),
    })?;
    parse(&text, &file)
}

/// Parses a profile; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<Profile, PipeDreamError> {
    let err = |line: usize, message: String| PipeDreamError {
        file: file.to_string(),
        line,
        message,
    };
    let mut layers: Vec<Layer> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut raw_edges: Vec<(usize, String, String)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        if raw.starts_with('\t') {
            let (a, b) = raw
                .trim()
                .split_once(" -- ")
                .ok_or_else(|| err(line, "an edge line must read '\\tnodeA -- nodeB'".into()))?;
            raw_edges.push((line, a.trim().to_string(), b.trim().to_string()));
            continue;
        }
        let (name, rest) = raw.split_once(" -- ").ok_or_else(|| {
            err(
                line,
                "a node line must read 'name -- description -- key=value, ...'".into(),
            )
        })?;
        let (description, fields) = rest.rsplit_once(" -- ").ok_or_else(|| {
            err(
                line,
                "a node line needs a description and fields separated by ' -- '".into(),
            )
        })?;
        let name = name.trim().to_string();
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(err(line, format!("bad node name '{name}'")));
        }
        let mut values: BTreeMap<&str, &str> = BTreeMap::new();
        for field in fields.split(',') {
            let (k, v) = field
                .trim()
                .split_once('=')
                .ok_or_else(|| err(line, format!("field '{}' is not key=value", field.trim())))?;
            if values.insert(k.trim(), v.trim()).is_some() {
                return Err(err(line, format!("field '{}' is given twice", k.trim())));
            }
        }
        let mut take = |key: &str| -> Result<&str, PipeDreamError> {
            values
                .remove(key)
                .ok_or_else(|| err(line, format!("missing field '{key}'")))
        };
        let forward = take("forward_compute_time")?;
        let backward = take("backward_compute_time")?;
        let activation = take("activation_size")?;
        let parameter = take("parameter_size")?;
        if let Some(k) = values.keys().next() {
            return Err(err(line, format!("unknown field '{k}'")));
        }
        let number = |key: &str, v: &str| -> Result<f64, PipeDreamError> {
            match v.parse::<f64>() {
                Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
                Ok(_) => Err(err(
                    line,
                    format!("field '{key}': {v} is not a finite number >= 0"),
                )),
                Err(_) => Err(err(line, format!("field '{key}': '{v}' is not a number"))),
            }
        };
        // A size is a number or a list `[a; b; c]` (a layer with several outputs), summed.
        let bytes = |key: &str, v: &str| -> Result<u64, PipeDreamError> {
            let parts: Vec<&str> = match v.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
                Some(list) => list.split(';').map(str::trim).collect(),
                None => vec![v],
            };
            let mut total = 0u64;
            for part in parts {
                let x = number(key, part)?;
                // 2^53: every integer below it is exact in f64.
                if x.fract() != 0.0 || x > 9_007_199_254_740_992.0 {
                    return Err(err(
                        line,
                        format!("field '{key}': {part} is not a whole number of bytes below 2^53"),
                    ));
                }
                total = total.checked_add(x as u64).ok_or_else(|| {
                    err(line, format!("field '{key}': the sizes overflow 64 bits"))
                })?;
            }
            Ok(total)
        };
        let forward_ms = number("forward_compute_time", forward)?;
        let backward_ms = number("backward_compute_time", backward)?;
        let activation_bytes = bytes("activation_size", activation)?;
        let parameter_bytes = bytes("parameter_size", parameter)?;
        if let Some(&first) = index.get(&name) {
            return Err(err(
                line,
                format!(
                    "node '{name}' is defined twice (first on line {})",
                    layers[first].line
                ),
            ));
        }
        index.insert(name.clone(), layers.len());
        layers.push(Layer {
            name,
            description: description.trim().to_string(),
            forward_ms,
            backward_ms,
            activation_bytes,
            parameter_bytes,
            line,
        });
    }
    let mut edges = Vec::with_capacity(raw_edges.len());
    let mut seen = HashMap::new();
    for (line, a, b) in raw_edges {
        let look = |n: &str| {
            index.get(n).copied().ok_or_else(|| {
                err(
                    line,
                    format!("edge names node '{n}', which no node line defines"),
                )
            })
        };
        let (from, to) = (look(&a)?, look(&b)?);
        if from == to {
            return Err(err(line, format!("edge from '{a}' to itself")));
        }
        if let Some(first) = seen.insert((from, to), line) {
            return Err(err(
                line,
                format!("edge '{a} -- {b}' is given twice (first on line {first})"),
            ));
        }
        edges.push((from, to));
    }
    if layers.is_empty() {
        return Err(err(0, "no node lines".into()));
    }
    Ok(Profile {
        name: file.to_string(),
        layers,
        edges,
    })
}

/// The training step built from a profile, with the ids a caller needs.
#[derive(Clone, Debug)]
pub struct TrainingStep {
    pub graph: Graph,
    /// Layer indices in forward execution order.
    pub forward_order: Vec<usize>,
    /// Per layer: its forward node.
    pub forward_node: Vec<NodeId>,
    /// Per layer: its backward node (`None` for `Input` layers).
    pub backward_node: Vec<Option<NodeId>>,
    /// Per layer: its output value (a 0-byte token for in-place layers).
    pub output: Vec<ValueId>,
    /// Per layer: the value holding its output's bytes (the storage root).
    pub storage: Vec<ValueId>,
}

/// Builds one training step from a profile, as the module documentation describes.
/// Errors (with the line of the layer at fault): a cycle, an in-place layer without
/// predecessor or larger than its storage, an `Input` layer with predecessors.
pub fn training_step(profile: &Profile) -> Result<TrainingStep, PipeDreamError> {
    let n = profile.layers.len();
    let err = |layer: usize, message: String| PipeDreamError {
        file: profile.name.clone(),
        line: profile.layers[layer].line,
        message,
    };
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut succs: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &(a, b) in &profile.edges {
        preds[b].push(a);
        succs[a].push(b);
    }
    // Kahn's algorithm, smallest file index first.
    let mut missing: Vec<usize> = preds.iter().map(Vec::len).collect();
    let mut ready: BinaryHeap<Reverse<usize>> =
        (0..n).filter(|&l| missing[l] == 0).map(Reverse).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse(l)) = ready.pop() {
        order.push(l);
        for &s in &succs[l] {
            missing[s] -= 1;
            if missing[s] == 0 {
                ready.push(Reverse(s));
            }
        }
    }
    if order.len() < n {
        let stuck = (0..n).find(|&l| missing[l] > 0).unwrap_or(0);
        return Err(err(
            stuck,
            format!(
                "node '{}' is on a cycle of edges",
                profile.layers[stuck].name
            ),
        ));
    }
    let ge = |layer: usize| move |e: GraphError| err(layer, format!("cannot build the graph: {e}"));
    let mut graph = Graph::new(profile.name.clone());
    let mut output = vec![ValueId(0); n];
    let mut storage = vec![ValueId(0); n];
    let mut param: Vec<Option<ValueId>> = vec![None; n];
    let mut forward_node = vec![NodeId(0); n];
    let mut backward_node = vec![None; n];
    // The values a reader of layer `p`'s output reads: the output, and its storage when
    // they differ (in-place layers).
    let reads =
        |output: &[ValueId], storage: &[ValueId], p: usize, into: &mut Vec<Option<ValueId>>| {
            for v in [output[p], storage[p]] {
                if !into.contains(&Some(v)) {
                    into.push(Some(v));
                }
            }
        };
    for &l in &order {
        let layer = &profile.layers[l];
        if layer.is_input() && !preds[l].is_empty() {
            return Err(err(
                l,
                format!("Input layer '{}' has predecessors", layer.name),
            ));
        }
        if layer.is_inplace() {
            let &first = preds[l].first().ok_or_else(|| {
                err(
                    l,
                    format!("in-place layer '{}' has no input to write into", layer.name),
                )
            })?;
            let root = storage[first];
            let root_bytes = graph.value(root).bytes;
            if layer.activation_bytes > root_bytes {
                return Err(err(l, format!(
                    "in-place layer '{}' ({} bytes) is larger than the storage it writes into ({} bytes)",
                    layer.name, layer.activation_bytes, root_bytes
                )));
            }
            output[l] = graph
                .add_value(Value::with_bytes(
                    layer.name.clone(),
                    DType::Float,
                    0,
                    ValueKind::Activation,
                ))
                .map_err(ge(l))?;
            storage[l] = root;
        } else {
            output[l] = graph
                .add_value(Value::with_bytes(
                    layer.name.clone(),
                    DType::Float,
                    layer.activation_bytes,
                    ValueKind::Activation,
                ))
                .map_err(ge(l))?;
            storage[l] = output[l];
        }
        if layer.parameter_bytes > 0 {
            param[l] = Some(
                graph
                    .add_value(Value::with_bytes(
                        format!("{}.param", layer.name),
                        DType::Float,
                        layer.parameter_bytes,
                        ValueKind::Weight,
                    ))
                    .map_err(ge(l))?,
            );
        }
        let mut inputs = Vec::new();
        for &p in &preds[l] {
            reads(&output, &storage, p, &mut inputs);
        }
        inputs.extend(param[l].map(Some));
        let node = graph
            .add_node(
                layer.name.clone(),
                layer.op_type(),
                inputs,
                vec![output[l]],
                BTreeMap::new(),
            )
            .map_err(ge(l))?;
        let ms = if layer.is_input() {
            0.0
        } else {
            layer.forward_ms
        };
        graph.set_latency(node, Some(ms));
        forward_node[l] = node;
    }
    // Gradient values, created when their producer (the successor's backward) is built.
    let mut grad: HashMap<(usize, usize), ValueId> = HashMap::new();
    for &l in order.iter().rev() {
        let layer = &profile.layers[l];
        if layer.is_input() {
            continue;
        }
        let mut inputs = Vec::new();
        if succs[l].is_empty() {
            reads(&output, &storage, l, &mut inputs);
        }
        for &s in &succs[l] {
            inputs.push(Some(grad[&(s, l)]));
        }
        for &p in &preds[l] {
            reads(&output, &storage, p, &mut inputs);
        }
        inputs.extend(param[l].map(Some));
        let mut outputs = Vec::new();
        for &p in &preds[l] {
            if profile.layers[p].is_input() {
                continue;
            }
            let name = format!("grad:{}->{}", layer.name, profile.layers[p].name);
            let v = graph
                .add_value(Value::with_bytes(
                    name,
                    DType::Float,
                    profile.layers[p].activation_bytes,
                    ValueKind::Activation,
                ))
                .map_err(ge(l))?;
            grad.insert((l, p), v);
            outputs.push(v);
        }
        let node = graph
            .add_node(
                format!("{}.bwd", layer.name),
                "Backward",
                inputs,
                outputs,
                BTreeMap::new(),
            )
            .map_err(ge(l))?;
        graph.set_latency(node, Some(layer.backward_ms));
        backward_node[l] = Some(node);
    }
    Ok(TrainingStep {
        graph,
        forward_order: order,
        forward_node,
        backward_node,
        output,
        storage,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testdata::TINY;

    #[test]
    fn parses_and_orders_topologically() {
        let p = parse(TINY, "tiny.txt").unwrap();
        assert_eq!(p.layers.len(), 4);
        assert_eq!(p.edges, vec![(1, 0), (0, 2), (2, 3)]);
        let step = training_step(&p).unwrap();
        // node1 (file index 1) must run before node2 (index 0).
        assert_eq!(step.forward_order, vec![1, 0, 2, 3]);
        let g = &step.graph;
        let names: Vec<&str> = g.nodes().iter().map(|n| n.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "node1",
                "node2",
                "node3",
                "node4",
                "node4.bwd",
                "node3.bwd",
                "node2.bwd"
            ]
        );
        assert_eq!(g.nodes()[0].latency_ms, Some(0.0), "Input time zeroed");
        assert_eq!(g.nodes()[4].latency_ms, Some(6.0));
        // ReLU(inplace): 0-byte token, storage is node2's output.
        assert_eq!(g.value(step.output[2]).bytes, 0);
        assert_eq!(step.storage[2], step.output[0]);
        // node4 reads the token and the storage; its backward reads them too (its
        // predecessor's activation) and its own output (loss seed).
        let n4 = g.node(step.forward_node[3]);
        assert!(n4.inputs.contains(&Some(step.output[2])));
        assert!(n4.inputs.contains(&Some(step.output[0])));
        let b4 = g.node(step.backward_node[3].unwrap());
        assert!(b4.inputs.contains(&Some(step.output[3])));
        assert!(b4.inputs.contains(&Some(step.output[0])));
        // node2.bwd produces no gradient for the Input layer.
        assert!(g.node(step.backward_node[0].unwrap()).outputs.is_empty());
        assert_eq!(step.backward_node[1], None);
    }

    #[test]
    fn size_lists_are_summed() {
        let text = "n1 -- LSTM(2, 2) -- forward_compute_time=1, backward_compute_time=2, activation_size=[6.0; 1.0; 1.0], parameter_size=3.000\n";
        let p = parse(text, "l").unwrap();
        assert_eq!(p.layers[0].activation_bytes, 8);
        assert_eq!(p.layers[0].op_type(), "LSTM");
        let bad = text.replace("1.0]", "x]");
        assert!(parse(&bad, "l")
            .unwrap_err()
            .message
            .contains("'x' is not a number"));
        let big = text.replace("[6.0", "[9007199254740992.0; 9007199254740992.0");
        let big = big.replace("1.0; 1.0]", "9007199254740992.0]");
        // 3 * 2^53 fits in u64; the per-part limit is what applies.
        assert_eq!(
            parse(&big, "l").unwrap().layers[0].activation_bytes,
            3 * (1u64 << 53)
        );
    }

    #[test]
    fn errors_name_file_and_line() {
        let cases = [
            ("node1 -- Input\n", 1, "description and fields"),
            (
                "node1 -- Input -- forward_compute_time=x, backward_compute_time=0, activation_size=1, parameter_size=0\n",
                1,
                "not a number",
            ),
            (
                "node1 -- Input -- forward_compute_time=1, backward_compute_time=0, activation_size=1.5, parameter_size=0\n",
                1,
                "whole number",
            ),
            (
                "node1 -- Input -- forward_compute_time=1, backward_compute_time=0, activation_size=1, parameter_size=0\n\tnode1 -- node9\n",
                2,
                "node9",
            ),
            (
                "node1 -- Input -- forward_compute_time=1, backward_compute_time=0, activation_size=1\n",
                1,
                "parameter_size",
            ),
            ("", 0, "no node lines"),
        ];
        for (text, line, needle) in cases {
            let e = parse(text, "f.txt").unwrap_err();
            assert_eq!(e.line, line, "{e}");
            assert!(e.to_string().starts_with(&format!("f.txt:{line}: ")), "{e}");
            assert!(e.message.contains(needle), "{e}");
        }
    }

    #[test]
    fn step_errors() {
        let l = |name: &str, desc: &str, act: u64| {
            format!("{name} -- {desc} -- forward_compute_time=1, backward_compute_time=1, activation_size={act}, parameter_size=0\n")
        };
        let cyc = format!(
            "{}{}\tn1 -- n2\n\tn2 -- n1\n",
            l("n1", "A", 1),
            l("n2", "B", 1)
        );
        let e = training_step(&parse(&cyc, "c").unwrap()).unwrap_err();
        assert!(e.message.contains("cycle"), "{e}");
        let lone = l("n1", "ReLU(inplace)", 1);
        let e = training_step(&parse(&lone, "c").unwrap()).unwrap_err();
        assert!(e.message.contains("no input"), "{e}");
        let big = format!(
            "{}{}\tn1 -- n2\n",
            l("n1", "A", 1),
            l("n2", "ReLU(inplace)", 2)
        );
        let e = training_step(&parse(&big, "c").unwrap()).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("larger"), "{e}");
    }
}
