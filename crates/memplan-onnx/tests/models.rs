//! The seven real models of `../shared/models/`: every activation tensor's dtype, shape and
//! bytes equal the reference `<model>.tensors.csv` row of the same name, and the set of
//! activation tensors (graph inputs and node outputs, `Constant` outputs excluded) is the
//! reference's set.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use memplan_graph::ValueKind;
use memplan_onnx::{import_file, ImportOptions};

fn models_dir() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/models"
    ))
}

/// `name -> (dtype, shape, bytes)` from a reference `tensors.csv` (no quoted fields there).
fn reference(path: &Path) -> BTreeMap<String, (String, String, u64)> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut rows = BTreeMap::new();
    for line in text.lines().skip(1).filter(|l| !l.is_empty()) {
        let f: Vec<&str> = line.rsplitn(7, ',').collect();
        // rsplitn keeps commas inside the name (first column) intact.
        let (name, dtype, shape, bytes) = (f[6], f[5], f[4], f[3]);
        rows.insert(
            name.to_string(),
            (dtype.to_string(), shape.to_string(), bytes.parse().unwrap()),
        );
    }
    rows
}

fn check(model: &str) {
    let dir = models_dir();
    if !dir.exists() {
        eprintln!("skipping: ../shared not found");
        return;
    }
    let graph = import_file(
        &dir.join(format!("{model}.onnx")),
        &ImportOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{model}: {e}"));
    let want = reference(&dir.join(format!("{model}.tensors.csv")));
    let mut got = BTreeMap::new();
    for v in graph.values().iter().filter(|v| v.is_activation()) {
        let shape = v.shape.as_ref().expect("every activation has a shape");
        let shape: Vec<String> = shape.iter().map(u64::to_string).collect();
        got.insert(
            v.name.clone(),
            (v.dtype.name().to_string(), shape.join("x"), v.bytes),
        );
    }
    let mut mismatches = Vec::new();
    for (name, row) in &want {
        match got.get(name) {
            Some(g) if g == row => {}
            Some(g) => mismatches.push(format!("{name}: got {g:?}, reference {row:?}")),
            None => mismatches.push(format!("{name}: missing (reference {row:?})")),
        }
    }
    for name in got.keys().filter(|n| !want.contains_key(*n)) {
        mismatches.push(format!("{name}: not in the reference"));
    }
    assert!(
        mismatches.is_empty(),
        "{model}: {} of {} tensors differ:\n{}",
        mismatches.len(),
        want.len(),
        mismatches.join("\n")
    );
    // Kinds: node outputs are activations except Constant outputs; every node kept.
    let constants = graph
        .values()
        .iter()
        .filter(|v| v.kind == ValueKind::Constant)
        .count();
    let constant_nodes = graph
        .nodes()
        .iter()
        .filter(|n| n.op_type == "Constant")
        .count();
    assert_eq!(
        constants, constant_nodes,
        "{model}: one Constant value per Constant node"
    );
    eprintln!("{model}: {} of {} tensors match", want.len(), want.len());
}

#[test]
fn resnet18() {
    check("resnet18");
}

#[test]
fn resnet50() {
    check("resnet50");
}

#[test]
fn mobilenet_v2() {
    check("mobilenet_v2");
}

#[test]
fn squeezenet1_1() {
    check("squeezenet1_1");
}

#[test]
fn inception_v3() {
    check("inception_v3");
}

#[test]
fn vit_b_16() {
    check("vit_b_16");
}

#[test]
fn bert_base_like() {
    check("bert_base_like");
}

#[test]
fn node_counts_match_the_reference() {
    let dir = models_dir();
    if !dir.exists() {
        eprintln!("skipping: ../shared not found");
        return;
    }
    let text = std::fs::read_to_string(dir.join("reference.csv")).unwrap();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let graph = import_file(
            &dir.join(format!("{}.onnx", f[0])),
            &ImportOptions::default(),
        )
        .unwrap();
        assert_eq!(graph.nodes().len().to_string(), f[1], "{}: nodes", f[0]);
        // reference.csv counts node outputs that are not graph outputs.
        let inner: Vec<_> = graph
            .values()
            .iter()
            .enumerate()
            .filter(|(i, v)| {
                v.kind == ValueKind::Activation && !graph.outputs().iter().any(|o| o.index() == *i)
            })
            .map(|(_, v)| v)
            .collect();
        assert_eq!(
            inner.len().to_string(),
            f[2],
            "{}: activation tensors",
            f[0]
        );
        let sum: u64 = inner.iter().map(|v| v.bytes).sum();
        assert_eq!(sum.to_string(), f[3], "{}: activation bytes", f[0]);
        assert_eq!(
            max_live_in_file_order(&graph).to_string(),
            f[4],
            "{}: max-live in the file's node order",
            f[0]
        );
    }
}

/// Max-live bytes with the reference's rules: node i runs at step i + 1 (Constant nodes
/// included), graph inputs from step 0, a tensor lives from its producer's step to its last
/// reader's step inclusive, graph outputs to the last step. A check that the imported node
/// order and kinds are what the lifetime analysis needs.
fn max_live_in_file_order(graph: &memplan_graph::Graph) -> u64 {
    let steps = graph.nodes().len() + 2;
    let mut delta = vec![0i128; steps + 1];
    for (i, v) in graph.values().iter().enumerate() {
        if !v.is_activation() {
            continue;
        }
        let start = v.producer.map_or(0, |(n, _)| n.index() + 1);
        let mut end = v
            .consumers
            .iter()
            .map(|(n, _)| n.index() + 1)
            .max()
            .unwrap_or(start)
            + 1;
        if graph.outputs().iter().any(|o| o.index() == i) {
            end = graph.nodes().len() + 1;
        }
        delta[start] += i128::from(v.bytes);
        delta[end.max(start + 1)] -= i128::from(v.bytes);
    }
    let (mut live, mut best) = (0i128, 0i128);
    for d in delta {
        live += d;
        best = best.max(live);
    }
    best as u64
}
