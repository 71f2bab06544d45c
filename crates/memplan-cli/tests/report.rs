//! `memplan report`: one page for every input memplan reads, the plans it draws held to
//! the independent checker again from the data embedded in the page, and its errors.
//!
//! The page itself is opened in a real Chromium by `python/tests/test_report_browser.py`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use memplan::{checker, Buffer, Lifetime, Plan, Problem};
use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn memplan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memplan"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("the memplan binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The JSON a page embeds.
fn page_data(page: &Path) -> Value {
    let html = std::fs::read_to_string(page).unwrap();
    let marker = "id=\"memplan-data\">";
    let start = html.find(marker).expect("the page embeds its data") + marker.len();
    let end = start + html[start..].find("</script>").unwrap();
    serde_json::from_str(&html[start..end]).expect("the embedded data is JSON")
}

fn numbers(value: &Value) -> Vec<u64> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect()
}

/// Every plan of the page rebuilt from the page's own data and checked: the verdict drawn
/// must be the checker's. Returns the planners' titles and their offsets.
fn recheck(data: &Value) -> Vec<(String, Vec<u64>, bool)> {
    let problems: Vec<Problem> = data["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let sizes = numbers(&p["size"]);
            let starts = numbers(&p["start"]);
            let ends = numbers(&p["end"]);
            let mut buffers: Vec<Buffer> = (0..sizes.len())
                .map(|i| {
                    let name = match &p["names"] {
                        Value::Null => i.to_string(),
                        names => names[i].as_str().unwrap().to_string(),
                    };
                    Buffer::new(name, sizes[i], starts[i], ends[i])
                })
                .collect();
            if let Value::Array(alignments) = &p["alignment"] {
                for (b, a) in buffers.iter_mut().zip(alignments) {
                    b.alignment = a.as_u64().unwrap();
                }
            }
            for fixed in p["fixed"].as_array().unwrap() {
                let f = numbers(fixed);
                buffers[f[0] as usize].fixed_offset = Some(f[1]);
            }
            for gap in p["gaps"].as_array().unwrap() {
                let g = numbers(gap);
                buffers[g[0] as usize]
                    .gaps
                    .push(Lifetime::new(g[1], g[2]).unwrap());
            }
            Problem::from_buffers(buffers).unwrap()
        })
        .collect();
    data["plans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|plan| {
            let problem = &problems[plan["problem"].as_u64().unwrap() as usize];
            let offsets = numbers(&plan["offset"]);
            let mut drawn = Plan::new(problem, offsets.clone()).unwrap();
            drawn.arena_bytes = plan["claimed_arena"].as_u64();
            let report = checker::check(problem, &drawn);
            let valid = plan["valid"].as_bool().unwrap();
            assert_eq!(
                report.is_valid(),
                valid,
                "{}: the page says valid={valid}, the checker {:?}",
                plan["title"],
                report.violations
            );
            assert_eq!(
                plan["violation_count"].as_u64().unwrap() as usize,
                report.violations.len()
            );
            assert_eq!(plan["arena"].as_u64(), report.arena_bytes);
            (plan["title"].as_str().unwrap().to_string(), offsets, valid)
        })
        .collect()
}

/// The offsets `memplan plan -f json` gives for `file` with `planner`.
fn planned_offsets(file: &str, planner: &str, dir: &Path) -> Vec<u64> {
    let out = dir.join(format!("{planner}.json"));
    let done = memplan(&[
        "plan",
        file,
        "-p",
        planner,
        "-f",
        "json",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(done.status.success(), "{}", text(&done.stderr));
    let plan: Value = serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap();
    plan["buffers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["offset"].as_u64().unwrap())
        .collect()
}

#[test]
fn every_input_kind_gets_a_page_with_checked_plans() {
    let dir = tempfile::tempdir().unwrap();
    let tflite = "crates/memplan-tflite/tests/data/branchy.tflite";
    let cases: [(&str, &[&str], &[&str]); 7] = [
        (
            "examples/small.csv",
            &["best-of", "naive"],
            &["best-of", "naive"],
        ),
        ("examples/mobilenet_v2.csv", &[], &["search"]),
        (
            "examples/memops.csv",
            &["greedy-size-firstfit"],
            &["greedy-size-firstfit"],
        ),
        ("examples/pool_trace.csv", &["best-of"], &["best-of"]),
        (
            "examples/small_cnn.json",
            &["best-of", "exclusive"],
            &["best-of", "exclusive"],
        ),
        (
            "crates/memplan-onnx/tests/data/small.onnx",
            &["best-of", "search"],
            &["best-of", "search"],
        ),
        (tflite, &[], &["tflm-greedy", "search"]),
    ];
    for (file, planners, titles) in cases {
        let page = dir.path().join("page.html");
        let mut args = vec!["report", file, "-o", page.to_str().unwrap()];
        for p in planners {
            args.extend(["-p", p]);
        }
        let done = memplan(&args);
        assert!(done.status.success(), "{file}: {}", text(&done.stderr));
        assert!(
            text(&done.stdout).contains("open it in a browser"),
            "{file}"
        );
        let data = page_data(&page);
        let plans = recheck(&data);
        let got: Vec<&str> = plans.iter().map(|(t, _, _)| t.as_str()).collect();
        assert_eq!(got, titles, "{file}");
        for (title, offsets, valid) in &plans {
            assert!(valid, "{file}: {title}");
            if !matches!(title.as_str(), "search" | "exclusive") {
                assert_eq!(
                    offsets,
                    &planned_offsets(file, title, dir.path()),
                    "{file}: {title} draws what `memplan plan` plans"
                );
            }
        }
        // Models say who produces each buffer.
        if file.ends_with(".onnx") || file.ends_with(".json") || file.ends_with(".tflite") {
            let producers = data["problems"][0]["producer"].as_array().unwrap();
            assert!(producers.iter().any(|p| p.as_i64().unwrap() >= 0), "{file}");
            assert!(!data["problems"][0]["ops"].as_array().unwrap().is_empty());
        }
    }
}

#[test]
fn a_plan_json_is_drawn_as_it_is_and_compared_plans_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let plan = d.join("plan.json");
    let done = memplan(&[
        "plan",
        "examples/small_cnn.json",
        "-f",
        "json",
        "-o",
        plan.to_str().unwrap(),
    ]);
    assert!(done.status.success());
    // The plan JSON alone.
    let page = d.join("plan.html");
    let done = memplan(&[
        "report",
        plan.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]);
    assert!(done.status.success(), "{}", text(&done.stderr));
    let plans = recheck(&page_data(&page));
    assert_eq!(plans.len(), 1);
    assert_eq!(plans[0].0, "plan.json (search)");

    // A broken copy: two buffers live together on the same bytes.
    let mut value: Value = serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    let buffers = value["buffers"].as_array_mut().unwrap();
    let (first_offset, second) = (buffers[1]["offset"].clone(), &mut buffers[2]);
    second["offset"] = first_offset;
    second.as_object_mut().unwrap().remove("top");
    let bad = d.join("bad.json");
    std::fs::write(&bad, value.to_string()).unwrap();
    // The solution CSV of naive, too.
    let naive = d.join("naive.csv");
    let done = memplan(&[
        "plan",
        "examples/small_cnn.json",
        "-p",
        "naive",
        "-f",
        "csv",
        "-o",
        naive.to_str().unwrap(),
    ]);
    assert!(done.status.success());
    let done = memplan(&[
        "report",
        "examples/small_cnn.json",
        "--compare",
        naive.to_str().unwrap(),
        "--compare",
        bad.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]);
    assert_eq!(done.status.code(), Some(1), "{}", text(&done.stderr));
    assert!(text(&done.stdout).contains("INVALID"));
    let data = page_data(&page);
    let plans = recheck(&data);
    let verdicts: Vec<(&str, bool)> = plans.iter().map(|(t, _, v)| (t.as_str(), *v)).collect();
    assert_eq!(
        verdicts,
        [
            ("search", true),
            ("naive.csv", true),
            ("bad.json (search)", false)
        ]
    );
    let violation = &data["plans"][2]["violations"][0];
    assert_eq!(violation["kind"], "overlap");
    assert!(violation["steps"].is_array() && violation["addresses"].is_array());
    // One problem table for all three plans.
    assert_eq!(data["problems"].as_array().unwrap().len(), 1);
}

#[test]
fn report_errors_name_the_file_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let page = d.join("page.html");
    let page = page.to_str().unwrap();
    let plan = d.join("plan.json");
    assert!(memplan(&[
        "plan",
        "examples/small.csv",
        "-f",
        "json",
        "-o",
        plan.to_str().unwrap()
    ])
    .status
    .success());
    let plan = plan.to_str().unwrap();
    let cases: [(&[&str], &str); 5] = [
        (
            &["report", plan, "-p", "search", "-o", page],
            "is a plan JSON",
        ),
        // A plan of another problem.
        (
            &[
                "report",
                "examples/small_cnn.json",
                "--compare",
                plan,
                "-o",
                page,
            ],
            "another problem",
        ),
        (
            &["report", "examples/small.csv", "-p", "nonsense", "-o", page],
            "nonsense",
        ),
        (
            &["report", "no/such/file.csv", "-o", page],
            "no/such/file.csv",
        ),
        (&["report", "examples/small.csv"], "--output"),
    ];
    for (args, needle) in cases {
        let done = memplan(args);
        assert_eq!(
            done.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&done.stderr)
        );
        let stderr = text(&done.stderr);
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    assert!(!Path::new(page).exists(), "no page is written on an error");
}
