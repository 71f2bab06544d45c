//! memplan's graph JSON format (documented in `doc/graph-json.md`): reader and writer.
//!
//! ```json
//! {
//!   "name": "tiny",
//!   "inputs": ["x"],
//!   "outputs": ["y"],
//!   "values": [
//!     {"name": "x", "dtype": "FLOAT", "shape": [1, 4]},
//!     {"name": "y", "dtype": "FLOAT", "bytes": 16}
//!   ],
//!   "nodes": [
//!     {"name": "relu", "op": "Relu", "inputs": ["x"], "outputs": ["y"]}
//!   ]
//! }
//! ```
//!
//! A value's `kind` defaults to `input` when it is listed in `inputs` and to `activation`
//! otherwise. A node input `""` is an omitted optional input. Attributes map JSON to
//! [`Attribute`]: an integer is `Int`, any other number `Float`, a string `String`, an
//! array of integers `Ints` (also the empty array), an array with any non-integer number
//! `Floats`, an array of strings `Strings`, and an object
//! `{"dtype", "dims", "ints" | "floats"}` a `Tensor`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value as Json};

use crate::ir::{
    shape_bytes, Attribute, DType, Graph, GraphError, Tensor, TensorData, Value, ValueId, ValueKind,
};

/// What is wrong with a graph JSON file: the file, where in it, and what to fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}: {location}: {message}")]
pub struct JsonGraphError {
    /// The file (or other source) name given to the reader.
    pub source_name: String,
    /// Where: `line 3 column 5`, or a JSON path such as `nodes[2] 'conv'.inputs[1]`.
    pub location: String,
    /// What is wrong and what would fix it.
    pub message: String,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct FileGraph {
    #[serde(default)]
    name: String,
    #[serde(default)]
    inputs: Vec<String>,
    #[serde(default)]
    outputs: Vec<String>,
    #[serde(default)]
    values: Vec<FileValue>,
    #[serde(default)]
    nodes: Vec<FileNode>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    control_edges: Vec<(String, String)>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct FileValue {
    name: String,
    dtype: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    shape: Option<Vec<u64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kind: Option<ValueKind>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct FileNode {
    #[serde(default)]
    name: String,
    op: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    domain: String,
    #[serde(default)]
    inputs: Vec<String>,
    #[serde(default)]
    outputs: Vec<String>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    attributes: Map<String, Json>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    latency_ms: Option<f64>,
}

/// Reads a graph from graph JSON; `source` names the file in errors.
pub fn read_graph_json(text: &str, source: &str) -> Result<Graph, JsonGraphError> {
    let fail = |location: String, message: String| JsonGraphError {
        source_name: source.to_string(),
        location,
        message,
    };
    let text = memplan::io::json_object(text).map_err(|found| {
        fail(
            "line 1".into(),
            format!("the top level is {found}; a graph JSON is one object with \"values\" and \"nodes\" (see doc/graph-json.md)"),
        )
    })?;
    let file: FileGraph = serde_json::from_str(text).map_err(|e| {
        let message = e.to_string();
        // serde_json appends " at line L column C"; move it to the location.
        match message.rfind(" at line ") {
            Some(i) => fail(message[i + 4..].to_string(), message[..i].to_string()),
            None => fail("file".into(), message),
        }
    })?;
    let mut graph = Graph::new(file.name.clone());
    for (index, v) in file.values.iter().enumerate() {
        let at = format!("values[{index}] '{}'", v.name);
        let dtype = DType::from_name(&v.dtype).ok_or_else(|| {
            let valid: Vec<&str> = DType::ALL.iter().map(|t| t.name()).collect();
            fail(
                format!("{at}.dtype"),
                format!("unknown dtype '{}'; valid: {}", v.dtype, valid.join(", ")),
            )
        })?;
        let kind = v.kind.unwrap_or(if file.inputs.contains(&v.name) {
            ValueKind::Input
        } else {
            ValueKind::Activation
        });
        let value = match (&v.shape, v.bytes) {
            (None, None) => {
                return Err(fail(
                    at,
                    "a value needs a \"shape\" or a \"bytes\" (or both)".into(),
                ))
            }
            (None, Some(bytes)) => Value::with_bytes(v.name.clone(), dtype, bytes, kind),
            (Some(shape), bytes) => {
                let computed = shape_bytes(dtype, shape).ok_or_else(|| {
                    fail(
                        format!("{at}.shape"),
                        format!("the byte size of shape {shape:?} of {dtype} is not a 64-bit number (overflow, or STRING without \"bytes\")"),
                    )
                });
                match (computed, bytes) {
                    (Ok(c), Some(b)) if c != b => {
                        return Err(fail(
                            format!("{at}.bytes"),
                            format!("{b} does not match shape {shape:?} of {dtype}, which gives {c} bytes; fix one or drop \"bytes\""),
                        ))
                    }
                    (Ok(c), _) => {
                        let mut value = Value::with_bytes(v.name.clone(), dtype, c, kind);
                        value.shape = Some(shape.clone());
                        value
                    }
                    (Err(_), Some(b)) => Value::with_bytes(v.name.clone(), dtype, b, kind),
                    (Err(e), None) => return Err(e),
                }
            }
        };
        graph
            .add_value(value)
            .map_err(|e| fail(at.clone(), graph_message(e)))?;
    }
    let lookup = |graph: &Graph, name: &str, at: String| {
        graph.value_by_name(name).ok_or_else(|| {
            fail(
                at,
                format!("unknown value '{name}'; declare it in \"values\""),
            )
        })
    };
    for (index, n) in file.nodes.iter().enumerate() {
        let at = format!("nodes[{index}] '{}'", n.name);
        let mut inputs = Vec::with_capacity(n.inputs.len());
        for (slot, name) in n.inputs.iter().enumerate() {
            inputs.push(if name.is_empty() {
                None
            } else {
                Some(lookup(&graph, name, format!("{at}.inputs[{slot}]"))?)
            });
        }
        let mut outputs = Vec::with_capacity(n.outputs.len());
        for (slot, name) in n.outputs.iter().enumerate() {
            outputs.push(lookup(&graph, name, format!("{at}.outputs[{slot}]"))?);
        }
        let mut attributes = BTreeMap::new();
        for (key, value) in &n.attributes {
            let attribute = attribute_from_json(value)
                .map_err(|message| fail(format!("{at}.attributes.{key}"), message))?;
            attributes.insert(key.clone(), attribute);
        }
        if let Some(latency) = n.latency_ms {
            if !(latency.is_finite() && latency >= 0.0) {
                return Err(fail(
                    format!("{at}.latency_ms"),
                    format!("{latency} is not a time; give milliseconds >= 0"),
                ));
            }
        }
        let id = graph
            .add_node(n.name.clone(), n.op.clone(), inputs, outputs, attributes)
            .map_err(|e| fail(at.clone(), graph_message(e)))?;
        graph.set_domain(id, n.domain.clone());
        graph.set_latency(id, n.latency_ms);
    }
    let names =
        |graph: &Graph, list: &[String], field: &str| -> Result<Vec<ValueId>, JsonGraphError> {
            list.iter()
                .enumerate()
                .map(|(i, name)| lookup(graph, name, format!("{field}[{i}]")))
                .collect()
        };
    let inputs = names(&graph, &file.inputs, "inputs")?;
    let outputs = names(&graph, &file.outputs, "outputs")?;
    graph
        .set_inputs(inputs)
        .and_then(|_| graph.set_outputs(outputs))
        .map_err(|e| fail("file".into(), graph_message(e)))?;
    for (index, (from, to)) in file.control_edges.iter().enumerate() {
        let at = format!("control_edges[{index}]");
        let node = |name: &str| {
            graph.node_by_name(name).ok_or_else(|| {
                fail(
                    at.clone(),
                    format!("unknown node '{name}'; name a node of \"nodes\""),
                )
            })
        };
        let (from, to) = (node(from)?, node(to)?);
        graph
            .add_control_edge(from, to)
            .map_err(|e| fail(at.clone(), graph_message(e)))?;
    }
    Ok(graph)
}

fn graph_message(error: GraphError) -> String {
    error.to_string()
}

fn attribute_from_json(value: &Json) -> Result<Attribute, String> {
    let float = |v: &Json| v.as_f64().ok_or_else(|| format!("{v} is not a number"));
    Ok(match value {
        Json::Number(n) => match n.as_i64() {
            Some(i) => Attribute::Int(i),
            None => Attribute::Float(float(value)?),
        },
        Json::String(s) => Attribute::String(s.clone()),
        Json::Array(items) => {
            if items.iter().all(|v| v.as_i64().is_some()) {
                Attribute::Ints(items.iter().filter_map(Json::as_i64).collect())
            } else if items.iter().all(Json::is_number) {
                Attribute::Floats(items.iter().map(float).collect::<Result<_, _>>()?)
            } else if items.iter().all(Json::is_string) {
                Attribute::Strings(
                    items
                        .iter()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect(),
                )
            } else {
                return Err("an attribute array must hold only numbers or only strings".into());
            }
        }
        Json::Object(map) => Attribute::Tensor(tensor_from_json(map)?),
        Json::Bool(_) | Json::Null => {
            return Err("an attribute is a number, a string, an array of numbers or strings, or a tensor object".into())
        }
    })
}

fn tensor_from_json(map: &Map<String, Json>) -> Result<Tensor, String> {
    for key in map.keys() {
        if !["dtype", "dims", "ints", "floats"].contains(&key.as_str()) {
            return Err(format!(
                "unknown tensor field '{key}'; a tensor has \"dtype\", \"dims\" and \"ints\" or \"floats\""
            ));
        }
    }
    let dtype_name = map
        .get("dtype")
        .and_then(Json::as_str)
        .ok_or("a tensor needs a \"dtype\" string")?;
    let dtype =
        DType::from_name(dtype_name).ok_or_else(|| format!("unknown dtype '{dtype_name}'"))?;
    let dims = match map.get("dims") {
        None => Vec::new(),
        Some(Json::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_u64()
                    .ok_or_else(|| format!("dim {v} is not a whole number"))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("\"dims\" must be an array of whole numbers".into()),
    };
    let list = |key: &str| match map.get(key) {
        Some(Json::Array(items)) => Ok(Some(items)),
        None => Ok(None),
        Some(_) => Err(format!("\"{key}\" must be an array")),
    };
    let data = match (list("ints")?, list("floats")?) {
        (Some(_), Some(_)) => return Err("give \"ints\" or \"floats\", not both".into()),
        (Some(items), None) => TensorData::Ints(
            items
                .iter()
                .map(|v| v.as_i64().ok_or_else(|| format!("{v} is not an integer")))
                .collect::<Result<_, _>>()?,
        ),
        (None, Some(items)) => TensorData::Floats(
            items
                .iter()
                .map(|v| v.as_f64().ok_or_else(|| format!("{v} is not a number")))
                .collect::<Result<_, _>>()?,
        ),
        (None, None) => TensorData::Unknown,
    };
    Ok(Tensor { dtype, dims, data })
}

fn attribute_to_json(attribute: &Attribute) -> Json {
    match attribute {
        Attribute::Int(i) => json!(i),
        Attribute::Ints(v) => json!(v),
        Attribute::Float(f) => json!(f),
        Attribute::Floats(v) => json!(v),
        Attribute::String(s) => json!(s),
        Attribute::Strings(v) => json!(v),
        Attribute::Tensor(t) => {
            let mut map = Map::new();
            map.insert("dtype".into(), json!(t.dtype.name()));
            map.insert("dims".into(), json!(t.dims));
            match &t.data {
                TensorData::Ints(v) => {
                    map.insert("ints".into(), json!(v));
                }
                TensorData::Floats(v) => {
                    map.insert("floats".into(), json!(v));
                }
                TensorData::Unknown => {}
            }
            Json::Object(map)
        }
    }
}

/// Writes a graph as graph JSON (pretty-printed, ending with a newline).
///
/// [`read_graph_json`] reads it back to an equal graph, except that values' known contents
/// ([`Value::data`]) are not written, an empty `Floats` attribute reads back as `Ints`, a
/// `Float` attribute with a whole value reads back as `Float` only because JSON keeps the
/// `.0`, and non-finite floats (not representable in JSON) are written as `null`, which
/// the reader rejects.
pub fn write_graph_json(graph: &Graph) -> String {
    let name_of = |id: ValueId| graph.value(id).name.clone();
    let file = FileGraph {
        name: graph.name.clone(),
        inputs: graph.inputs().iter().map(|&id| name_of(id)).collect(),
        outputs: graph.outputs().iter().map(|&id| name_of(id)).collect(),
        values: graph
            .values()
            .iter()
            .map(|v| FileValue {
                name: v.name.clone(),
                dtype: v.dtype.name().to_string(),
                bytes: if v.shape.is_some() {
                    None
                } else {
                    Some(v.bytes)
                },
                shape: v.shape.clone(),
                kind: Some(v.kind),
            })
            .collect(),
        nodes: graph
            .nodes()
            .iter()
            .map(|n| FileNode {
                name: n.name.clone(),
                op: n.op_type.clone(),
                domain: n.domain.clone(),
                inputs: n
                    .inputs
                    .iter()
                    .map(|i| i.map(name_of).unwrap_or_default())
                    .collect(),
                outputs: n.outputs.iter().map(|&id| name_of(id)).collect(),
                attributes: n
                    .attributes
                    .iter()
                    .map(|(k, a)| (k.clone(), attribute_to_json(a)))
                    .collect(),
                latency_ms: n.latency_ms,
            })
            .collect(),
        control_edges: graph
            .control_edges()
            .iter()
            .map(|&(a, b)| (graph.node(a).name.clone(), graph.node(b).name.clone()))
            .collect(),
    };
    let mut text = serde_json::to_string_pretty(&file).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_of_every_kind_round_trip() {
        let text = r#"{
          "name": "attrs",
          "values": [{"name": "y", "dtype": "FLOAT", "shape": []},
                     {"name": "s", "dtype": "STRING", "bytes": 40, "kind": "input"}],
          "inputs": ["s"],
          "outputs": ["y"],
          "nodes": [{"name": "n", "op": "Custom", "domain": "com.example", "inputs": ["s", ""], "outputs": ["y"],
                     "latency_ms": 1.5,
                     "attributes": {"i": -3, "f": 1.0, "is": [1, 2], "fs": [0.5, 2], "s": "same",
                                    "ss": ["a", "b"], "empty": [],
                                    "t": {"dtype": "INT64", "dims": [2], "ints": [1, -1]},
                                    "tf": {"dtype": "FLOAT", "dims": [], "floats": [0.25]},
                                    "tu": {"dtype": "FLOAT", "dims": [1000]}}}]
        }"#;
        let g = read_graph_json(text, "attrs.json").unwrap();
        let node = &g.nodes()[0];
        let a = &node.attributes;
        assert_eq!(a["i"], Attribute::Int(-3));
        assert_eq!(a["f"], Attribute::Float(1.0));
        assert_eq!(a["is"], Attribute::Ints(vec![1, 2]));
        assert_eq!(a["fs"], Attribute::Floats(vec![0.5, 2.0]));
        assert_eq!(a["s"], Attribute::String("same".into()));
        assert_eq!(a["ss"], Attribute::Strings(vec!["a".into(), "b".into()]));
        assert_eq!(a["empty"], Attribute::Ints(vec![]));
        assert_eq!(
            a["t"],
            Attribute::Tensor(Tensor {
                dtype: DType::Int64,
                dims: vec![2],
                data: TensorData::Ints(vec![1, -1])
            })
        );
        assert!(matches!(&a["tu"], Attribute::Tensor(t) if t.data == TensorData::Unknown));
        assert_eq!(node.inputs[1], None);
        assert_eq!(node.domain, "com.example");
        assert_eq!(node.latency_ms, Some(1.5));
        let y = g.value(g.value_by_name("y").unwrap());
        assert_eq!((y.bytes, y.shape.as_deref()), (4, Some(&[][..])));
        assert_eq!(
            g.value(g.value_by_name("s").unwrap()).kind,
            ValueKind::Input
        );
        let written = write_graph_json(&g);
        assert_eq!(read_graph_json(&written, "again").unwrap(), g);
    }

    #[test]
    fn bad_attributes_and_latencies_are_named() {
        let node =
            |extra: &str| format!(r#"{{"nodes": [{{"name": "n", "op": "Relu", {extra}}}]}}"#);
        let cases = [
            (
                node(r#""attributes": {"b": true}"#),
                "nodes[0] 'n'.attributes.b",
            ),
            (
                node(r#""attributes": {"t": {"dtype": "NOPE"}}"#),
                "unknown dtype 'NOPE'",
            ),
            (
                node(r#""attributes": {"t": {"dtype": "FLOAT", "ints": [1], "floats": [1]}}"#),
                "not both",
            ),
            (
                node(r#""attributes": {"t": {"dtype": "FLOAT", "extra": 1}}"#),
                "unknown tensor field 'extra'",
            ),
            (node(r#""latency_ms": -1"#), "nodes[0] 'n'.latency_ms"),
        ];
        for (text, needle) in cases {
            let err = read_graph_json(&text, "x.json").unwrap_err().to_string();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }
}
