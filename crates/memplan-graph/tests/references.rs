//! The structure of two real models (see `tests/data/README.md`) against the reference
//! lifetimes and totals of `/work/shared/models`.

use std::path::Path;

use memplan::{checker, planner};
use memplan_graph::{analyse, read_graph_json, Graph, Options, Order};

fn load(name: &str) -> Graph {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    read_graph_json(&std::fs::read_to_string(path).unwrap(), name).unwrap()
}

/// `(model, activation tensors, sum of activation bytes, max-live, largest tensor)` from
/// `reference.csv`.
const TOTALS: &[(&str, usize, u64, u64, u64)] = &[
    ("resnet18", 48, 22984704, 6422528, 3211264),
    ("mobilenet_v2", 99, 52011392, 9633792, 4816896),
];

#[test]
fn totals_without_sharing_equal_the_references() {
    for &(model, tensors, sum, max_live, largest) in TOTALS {
        let g = load(&format!("{model}.json"));
        let a = analyse(&g, Order::File, Options::NONE).unwrap();
        let s = &a.stats;
        assert_eq!(s.activation_values, tensors, "{model}");
        assert_eq!(s.activation_bytes, sum, "{model}");
        assert_eq!(s.max_live_bytes, max_live, "{model}");
        assert_eq!(s.largest.map(|(_, b)| b), Some(largest), "{model}");
        let topo = analyse(&g, Order::Topological, Options::NONE).unwrap();
        assert_eq!(
            topo.order, a.order,
            "{model}: the file order is topological"
        );
        let shared = analyse(&g, Order::File, Options::default()).unwrap();
        assert!(shared.stats.max_live_bytes < max_live, "{model}");
        let plan = planner::by_name("best-of")
            .unwrap()
            .plan(&shared.problem)
            .unwrap();
        assert!(checker::check(&shared.problem, &plan).is_valid(), "{model}");
    }
}

#[test]
fn every_lifetime_equals_the_reference_csv() {
    let models = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/models");
    if !models.exists() {
        eprintln!("skipping: {} not found", models.display());
        return;
    }
    for &(model, ..) in TOTALS {
        let g = load(&format!("{model}.json"));
        let a = analyse(&g, Order::File, Options::NONE).unwrap();
        let reference =
            std::fs::read_to_string(models.join(format!("{model}.tensors.csv"))).unwrap();
        let mut lines = reference.lines().skip(1);
        for &id in &a.report_order {
            let info = &a.values[id.index()];
            let Some(l) = info.lifetime else { continue };
            let v = g.value(id);
            let ours = format!(
                "{},{},{},{},{},{},{}",
                v.name,
                v.dtype,
                v.shape
                    .as_ref()
                    .unwrap()
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join("x"),
                v.bytes,
                l.start,
                l.end,
                info.role.name()
            );
            assert_eq!(
                Some(ours.as_str()),
                lines.next().map(str::trim_end),
                "{model}"
            );
        }
        assert_eq!(
            lines.next(),
            None,
            "{model}: the reference has more tensors"
        );
    }
}
