//! Plan JSON: writing, reading back, key order and errors.

use memplan::io::json::{
    read_plan_json, read_plan_json_from, write_plan_json, JsonError, PlanSummary, FIXED_KEYS,
};
use memplan::plan::tensors::TensorAddress;
use memplan::{Buffer, BufferId, Plan, Problem};
use serde_json::{json, Map, Value};

fn problem() -> Problem {
    Problem::from_buffers(vec![
        Buffer::new("b1", 4, 0, 3),
        Buffer::new("b2", 4, 3, 9),
        Buffer::new("b3", 4, 0, 9),
    ])
    .unwrap()
}

fn plan() -> Plan {
    Plan::new(&problem(), vec![4, 4, 0]).unwrap()
}

fn summary() -> PlanSummary {
    let mut extra = Map::new();
    extra.insert("elapsed_ms".to_string(), json!(1.5));
    extra.insert("arena_bytes".to_string(), json!("shadow"));
    extra.insert("violations".to_string(), json!([]));
    PlanSummary {
        planner: "naive".to_string(),
        lower_bound_bytes: 8,
        alignment: 1,
        extra,
    }
}

#[test]
fn writes_the_documented_shape() {
    let text = write_plan_json(&problem(), &plan(), &summary(), None);
    assert!(text.ends_with("}\n"), "{text}");
    let value: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["planner"], "naive");
    assert_eq!(value["arena_bytes"], 8);
    assert_eq!(value["lower_bound_bytes"], 8);
    assert_eq!(value["alignment"], 1);
    assert_eq!(
        value["buffers"][1],
        json!({"id": "b2", "size": 4, "start": 3, "end": 9, "offset": 4, "top": 8})
    );
    assert_eq!(value["elapsed_ms"], 1.5);
    assert_eq!(value["violations"], json!([]));
    let ids: Vec<&str> = value["buffers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["b1", "b2", "b3"], "buffers in problem order");
}

#[test]
fn tensors_are_written_in_name_order_among_the_extra_keys() {
    let problem = problem();
    let tensors = vec![TensorAddress {
        name: "t".into(),
        block: BufferId(1),
        offset: 4,
        address: 0x1004,
        size: 4,
        pieces: None,
    }];
    let mut summary = summary();
    // Replaced by the addresses given.
    summary.extra.insert("tensors".to_string(), json!("stale"));
    summary.extra.insert("zeta".to_string(), json!(0));
    let text = write_plan_json(&problem, &plan(), &summary, Some(&tensors));
    let top_level_keys: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("  \"") && !l.starts_with("   "))
        .map(|l| l.trim_start().split('"').nth(1).unwrap())
        .collect();
    let extra = ["elapsed_ms", "tensors", "violations", "zeta"];
    assert_eq!(
        top_level_keys,
        [FIXED_KEYS.as_slice(), &extra].concat(),
        "{text}"
    );
    let value: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        value["tensors"],
        json!([{"address": 0x1004, "block": "b2", "name": "t", "offset": 4, "size": 4, "top": 8}])
    );
    // Without addresses, an extra `tensors` key is written as it is.
    let text = write_plan_json(&problem, &plan(), &summary, None);
    let value: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["tensors"], "stale");
}

#[test]
fn fixed_keys_come_first_in_order_then_extra() {
    let text = write_plan_json(&problem(), &plan(), &summary(), None);
    let top_level_keys: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("  \"") && !l.starts_with("   "))
        .map(|l| l.trim_start().split('"').nth(1).unwrap())
        .collect();
    assert_eq!(
        top_level_keys,
        [FIXED_KEYS.as_slice(), &["elapsed_ms", "violations"]].concat(),
        "{text}"
    );
    let buffer_keys: Vec<usize> = [
        "\"id\"",
        "\"size\"",
        "\"start\"",
        "\"end\"",
        "\"offset\"",
        "\"top\"",
    ]
    .iter()
    .map(|k| text.find(k).unwrap())
    .collect();
    assert!(buffer_keys.windows(2).all(|w| w[0] < w[1]), "{text}");
    // An extra key named like a fixed key does not shadow it.
    assert_eq!(text.matches("\"arena_bytes\"").count(), 1);
    assert!(!text.contains("shadow"));
}

#[test]
fn round_trips() {
    let (problem, plan) = (problem(), plan());
    let text = write_plan_json(&problem, &plan, &summary(), None);
    let back = read_plan_json(&text, "plan.json", &problem).unwrap();
    assert_eq!(back, plan);
}

#[test]
fn recomputes_the_arena_when_the_plan_claims_none() {
    let (problem, mut plan) = (problem(), plan());
    plan.arena_bytes = None;
    let text = write_plan_json(&problem, &plan, &summary(), None);
    let back = read_plan_json(&text, "plan.json", &problem).unwrap();
    assert_eq!(back.arena_bytes, Some(8));
    // A wrong claim is written as claimed, for the checker to catch.
    plan.arena_bytes = Some(99);
    let text = write_plan_json(&problem, &plan, &summary(), None);
    assert_eq!(
        read_plan_json(&text, "p", &problem).unwrap().arena_bytes,
        Some(99)
    );
}

#[test]
fn a_short_plan_writes_null_and_reads_back_as_an_error() {
    let problem = problem();
    let plan = Plan {
        offsets: vec![0],
        arena_bytes: None,
        extents: None,
    };
    let text = write_plan_json(&problem, &plan, &summary(), None);
    let value: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["arena_bytes"], Value::Null);
    assert_eq!(value["buffers"][2]["offset"], Value::Null);
    let err = read_plan_json(&text, "p", &problem).unwrap_err();
    assert!(err.message.contains("null"), "{err}");
    assert!(err.line.is_some(), "{err}");
}

#[test]
fn ignores_unknown_keys_and_accepts_any_buffer_order() {
    let text = r#"{"arena_bytes": 8, "note": "x", "buffers": [
        {"id": "b3", "size": 4, "start": 0, "end": 9, "offset": 0, "color": "red"},
        {"id": "b1", "size": 4, "start": 0, "end": 3, "offset": 4},
        {"id": "b2", "size": 4, "start": 3, "end": 9, "offset": 4}]}"#;
    assert_eq!(read_plan_json(text, "p", &problem()).unwrap(), plan());
}

#[track_caller]
fn bad(text: &str, position: Option<(usize, usize)>, words: &[&str]) -> JsonError {
    let err = read_plan_json(text, "plan.json", &problem()).expect_err(text);
    assert_eq!(err.source, "plan.json");
    assert_eq!(err.line.zip(err.column), position, "{err}");
    for word in words {
        assert!(err.message.contains(word), "'{word}' not in: {err}");
    }
    let shown = err.to_string();
    match position {
        Some((line, column)) => assert!(
            shown.starts_with(&format!("plan.json:{line}:{column}: ")),
            "{shown}"
        ),
        None => assert!(shown.starts_with("plan.json: "), "{shown}"),
    }
    err
}

#[test]
fn syntax_and_type_errors_have_a_position() {
    bad(
        "{\n  \"arena_bytes\": 8,\n  \"buffers\": [,]\n}",
        Some((3, 15)),
        &["expected"],
    );
    bad("", Some((1, 0)), &["EOF"]);
    bad("\"plan\"", Some((1, 1)), &["top level is a string"]);
    bad("\u{feff}[]", Some((1, 1)), &["top level is an array"]);
    bad("{\"buffers\": []", Some((1, 14)), &["EOF"]);
    bad(
        "{\"arena_bytes\": 8}",
        Some((1, 18)),
        &["missing field `buffers`"],
    );
    bad(
        "{\"arena_bytes\": -8, \"buffers\": []}",
        Some((1, 18)),
        &["-8"],
    );
    bad(
        "{\"arena_bytes\": 8, \"buffers\": [{\"id\": \"b1\", \"size\": 4}]}",
        Some((1, 54)),
        &["missing field `start`"],
    );
}

fn with_buffers(buffers: Value) -> String {
    json!({"planner": "x", "arena_bytes": 8, "lower_bound_bytes": 8, "alignment": 1, "buffers": buffers}).to_string()
}

#[test]
fn buffers_must_match_the_problem() {
    let b1 = json!({"id": "b1", "size": 4, "start": 0, "end": 3, "offset": 4});
    let b2 = json!({"id": "b2", "size": 4, "start": 3, "end": 9, "offset": 4});
    let b3 = json!({"id": "b3", "size": 4, "start": 0, "end": 9, "offset": 0});
    bad(
        &with_buffers(json!([b1, b2])),
        None,
        &["1 buffer(s)", "'b3'"],
    );
    bad(
        &with_buffers(
            json!([b1, b2, b3, {"id": "b4", "size": 1, "start": 0, "end": 1, "offset": 0}]),
        ),
        None,
        &["buffers[3]", "'b4'", "not a buffer"],
    );
    bad(
        &with_buffers(json!([b1, b2, b3, b1])),
        None,
        &["buffers[3]", "'b1'", "twice"],
    );
    let mut wrong = b3.clone();
    wrong["size"] = json!(5);
    bad(
        &with_buffers(json!([b1, b2, wrong])),
        None,
        &["'b3'", "size 5", "4 in the problem"],
    );
    let mut wrong = b2.clone();
    wrong["end"] = json!(10);
    bad(
        &with_buffers(json!([b1, wrong, b3])),
        None,
        &["'b2'", "end 10", "9 in the problem"],
    );
    let mut wrong = b1.clone();
    wrong["start"] = json!(1);
    bad(
        &with_buffers(json!([wrong, b2, b3])),
        None,
        &["'b1'", "start 1"],
    );
}

#[test]
fn missing_or_null_arena_is_no_claim() {
    let b = json!([
        {"id": "b1", "size": 4, "start": 0, "end": 3, "offset": 4},
        {"id": "b2", "size": 4, "start": 3, "end": 9, "offset": 4},
        {"id": "b3", "size": 4, "start": 0, "end": 9, "offset": 0}
    ]);
    let text = json!({"buffers": b}).to_string();
    assert_eq!(
        read_plan_json(&text, "p", &problem()).unwrap().arena_bytes,
        None
    );
    let text = json!({"buffers": b, "arena_bytes": null}).to_string();
    assert_eq!(
        read_plan_json(&text, "p", &problem()).unwrap().arena_bytes,
        None
    );
}

/// b3 spread over two extents around b1 (fragmented plans carry `extents` per buffer).
fn fragmented_plan() -> Plan {
    let e = |offset, len| memplan::Extent { offset, len };
    Plan::fragmented(
        &problem(),
        vec![vec![e(4, 4)], vec![e(4, 4)], vec![e(0, 4), e(8, 0)]],
    )
    .unwrap()
}

#[test]
fn fragmented_plans_write_and_read_back_their_extents() {
    let e = |offset, len| memplan::Extent { offset, len };
    let plan = Plan::fragmented(
        &problem(),
        vec![vec![e(8, 4)], vec![e(0, 4)], vec![e(4, 2), e(12, 2)]],
    )
    .unwrap();
    let text = write_plan_json(&problem(), &plan, &summary(), None);
    let value: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["arena_bytes"], 14);
    assert_eq!(
        value["buffers"][2]["extents"],
        json!([{"offset": 4, "len": 2, "top": 6}, {"offset": 12, "len": 2, "top": 14}])
    );
    assert_eq!(value["buffers"][2]["offset"], 4);
    // A buffer in several pieces has no single top; one in one piece has.
    assert_eq!(value["buffers"][2].get("top"), None);
    assert_eq!(value["buffers"][0]["top"], 12);
    assert_eq!(read_plan_json(&text, "p.json", &problem()).unwrap(), plan);
    // Contiguous plans write no extents and read back as contiguous.
    let text = write_plan_json(&problem(), &fragmented_plan(), &summary(), None);
    assert!(text.contains("\"extents\""));
    let contiguous = write_plan_json(&problem(), &self::plan(), &summary(), None);
    assert!(!contiguous.contains("\"extents\""), "{contiguous}");
    assert_eq!(
        read_plan_json(&contiguous, "p.json", &problem())
            .unwrap()
            .extents,
        None
    );
}

#[test]
fn a_fragmented_plan_lists_extents_for_every_buffer() {
    // Entries out of problem order are found by name.
    let text = write_plan_json(&problem(), &fragmented_plan(), &summary(), None);
    let mut value: Value = serde_json::from_str(&text).unwrap();
    value["buffers"].as_array_mut().unwrap().reverse();
    let reversed = value.to_string();
    assert_eq!(
        read_plan_json_from(reversed.as_bytes(), "p.json", &problem()).unwrap(),
        fragmented_plan()
    );
    assert_eq!(
        read_plan_json(&reversed, "p.json", &problem()).unwrap(),
        fragmented_plan()
    );
    let mut value: Value = serde_json::from_str(&text).unwrap();
    value["buffers"][1]
        .as_object_mut()
        .unwrap()
        .remove("extents");
    let err = read_plan_json(&value.to_string(), "p.json", &problem()).unwrap_err();
    assert!(
        err.message.contains("buffer 'b2' has no \"extents\""),
        "{err}"
    );
    value["buffers"][1]["extents"] = json!([{"offset": 4}]);
    let err = read_plan_json(&value.to_string(), "p.json", &problem()).unwrap_err();
    assert!(err.to_string().contains("len"), "{err}");
}

/// A fragmented plan's tensors: one split over b3's two extents, one inside one extent.
#[test]
fn fragmented_tensors_list_every_piece_and_the_plan_reads_back() {
    use memplan::plan::tensors::{addresses, TensorSlot};
    let e = |offset, len| memplan::Extent { offset, len };
    let problem = problem();
    let plan = Plan::fragmented(
        &problem,
        vec![vec![e(8, 4)], vec![e(0, 4)], vec![e(4, 2), e(12, 2)]],
    )
    .unwrap();
    assert!(memplan::checker::check(&problem, &plan).is_valid());
    let mut slots = TensorSlot::one_per_buffer(&problem);
    slots.push(TensorSlot {
        name: "b3_tail".into(),
        block: BufferId(2),
        offset_in_block: 2,
        size: 2,
    });
    let tensors = addresses(&problem, &plan, &slots, 0x100).unwrap();
    let text = write_plan_json(&problem, &plan, &summary(), Some(&tensors));
    let value: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        value["tensors"][2],
        json!({
            "address": 0x104, "block": "b3", "name": "b3", "offset": 4, "size": 4,
            "pieces": [
                {"address": 0x104, "len": 2, "offset": 4, "top": 6},
                {"address": 0x10c, "len": 2, "offset": 12, "top": 14}
            ]
        })
    );
    assert_eq!(
        value["tensors"][3],
        json!({"address": 0x10c, "block": "b3", "name": "b3_tail", "offset": 12, "size": 2, "top": 14})
    );
    assert_eq!(
        value["tensors"][0],
        json!({"address": 0x108, "block": "b1", "name": "b1", "offset": 8, "size": 4, "top": 12})
    );
    // The pieces' keys come in name order, like every other key of a tensor.
    let pieces = text.find("\"pieces\"").unwrap();
    assert!(text[..pieces].rfind("\"offset\"") > text[..pieces].rfind("\"name\""));
    let back = read_plan_json(&text, "p.json", &problem).unwrap();
    assert_eq!(back, plan);
    assert!(memplan::checker::check(&problem, &back).is_valid());
}

#[test]
fn tops_are_optional_and_checked_when_given() {
    let problem = problem();
    // Without `top` (files written before it existed), contiguous and fragmented.
    let text = write_plan_json(&problem, &plan(), &summary(), None);
    let mut value: Value = serde_json::from_str(&text).unwrap();
    for buffer in value["buffers"].as_array_mut().unwrap() {
        assert!(buffer.as_object_mut().unwrap().remove("top").is_some());
    }
    assert_eq!(
        read_plan_json(&value.to_string(), "p", &problem).unwrap(),
        plan()
    );
    let text = write_plan_json(&problem, &fragmented_plan(), &summary(), None);
    let mut old: Value = serde_json::from_str(&text).unwrap();
    for buffer in old["buffers"].as_array_mut().unwrap() {
        buffer.as_object_mut().unwrap().remove("top");
        for extent in buffer["extents"].as_array_mut().unwrap() {
            assert!(extent.as_object_mut().unwrap().remove("top").is_some());
        }
    }
    assert_eq!(
        read_plan_json(&old.to_string(), "p", &problem).unwrap(),
        fragmented_plan()
    );
    // A wrong top names the buffer and says what it should be.
    value["buffers"][1]["top"] = json!(9);
    let err = read_plan_json(&value.to_string(), "plan.json", &problem).unwrap_err();
    assert_eq!(
        err.to_string(),
        "plan.json: buffers[1]: buffer 'b2' has \"top\" 9 but offset 4 + size 4 = 8; \
         \"top\" is the end of its bytes (exclusive), offset + size"
    );
    value["buffers"][1]["top"] = json!(8);
    value["buffers"][1]["offset"] = json!(u64::MAX);
    let err = read_plan_json(&value.to_string(), "plan.json", &problem).unwrap_err();
    assert!(
        err.message.contains("'b2'") && err.message.contains("2^64"),
        "{err}"
    );
    // An extent's top; a single top for a buffer in several extents.
    let mut value: Value = serde_json::from_str(&text).unwrap();
    value["buffers"][2]["extents"][1]["top"] = json!(7);
    let err = read_plan_json(&value.to_string(), "plan.json", &problem).unwrap_err();
    assert!(
        err.message
            .contains("buffer 'b3', extents[1]: \"top\" 7 is not offset 8 + len 0"),
        "{err}"
    );
    let mut value: Value = serde_json::from_str(&text).unwrap();
    value["buffers"][2]["top"] = json!(8);
    let err = read_plan_json(&value.to_string(), "plan.json", &problem).unwrap_err();
    assert!(
        err.message
            .contains("buffer 'b3' lies in 2 extents and has no single \"top\""),
        "{err}"
    );
}

/// Streaming a plan JSON from a reader gives the plan reading its text gives, contiguous
/// or fragmented, with a byte-order mark or without; and the same refusals.
#[test]
fn a_streamed_plan_is_the_plan_of_the_text() {
    use memplan::io::json::{read_plan_summary, read_plan_summary_from};
    for plan in [plan(), fragmented_plan()] {
        let text = write_plan_json(&problem(), &plan, &summary(), None);
        let from_text = read_plan_json(&text, "p.json", &problem()).unwrap();
        for bytes in [
            text.clone().into_bytes(),
            [&b"\xef\xbb\xbf"[..], text.as_bytes()].concat(),
        ] {
            let streamed = read_plan_json_from(&bytes[..], "p.json", &problem()).unwrap();
            assert_eq!(streamed, from_text);
            let summary = read_plan_summary_from(&bytes[..], "p.json").unwrap();
            assert_eq!(summary, read_plan_summary(&text, "p.json").unwrap());
        }
    }
    let text = write_plan_json(&problem(), &fragmented_plan(), &summary(), None);
    let mut value: Value = serde_json::from_str(&text).unwrap();
    value["buffers"][1]
        .as_object_mut()
        .unwrap()
        .remove("extents");
    let bad = value.to_string();
    let e = read_plan_json_from(bad.as_bytes(), "p.json", &problem()).unwrap_err();
    assert_eq!(e, read_plan_json(&bad, "p.json", &problem()).unwrap_err());
    // The other way round: extents after a buffer without them.
    value["buffers"][0]
        .as_object_mut()
        .unwrap()
        .remove("extents");
    value["buffers"][1]["extents"] = json!([{"offset": 4, "len": 4}]);
    let bad = value.to_string();
    let e = read_plan_json_from(bad.as_bytes(), "p.json", &problem()).unwrap_err();
    assert!(
        e.message.contains("buffers[1]") && e.message.contains("have none"),
        "{e}"
    );
    for (text, wanted) in [
        ("[1, 2]", "the top level is an array"),
        ("{\"arena_bytes\": 8}", "missing field `buffers`"),
        ("{\"buffers\": [{\"id\": \"zz\", \"size\": 4, \"start\": 0, \"end\": 1, \"offset\": 0}]}", "not a buffer of the problem"),
        ("{\"buffers\": [", "EOF"),
        ("", "EOF"),
    ] {
        let e = read_plan_json_from(text.as_bytes(), "p.json", &problem()).unwrap_err();
        assert!(e.to_string().contains(wanted), "{text}: {e}");
    }
}

/// The streamed reader's bounds: the whole input, and any one value, each a clear error.
#[test]
fn a_streamed_json_input_is_bounded_in_length_and_in_each_value() {
    use memplan::io::file::JsonCap;
    // `text` streamed under a cap of `limit` bytes in all and 64 bytes a value.
    let read = |text: &str, limit: u64| {
        read_plan_json_from(
            JsonCap::new(text.as_bytes(), limit, 64),
            "p.json",
            &problem(),
        )
    };
    let text = write_plan_json(&problem(), &fragmented_plan(), &summary(), None);
    let n = text.len() as u64;
    assert!(read(&text, n).is_ok());
    let e = read(&text, n - 1).unwrap_err();
    assert!(
        e.to_string().contains(&format!("larger than {}", n - 1)),
        "{e}"
    );
    let long = format!("{{\"planner\": \"{}\", \"buffers\": []}}", "x".repeat(100));
    let e = read(&long, 1 << 20).unwrap_err();
    assert!(
        e.to_string()
            .contains("single JSON value longer than 64 bytes"),
        "{e}"
    );
    // Escaped quotes do not end a string early; a long number is one value too.
    let quoted = format!(
        "{{\"planner\": \"{}\", \"buffers\": []}}",
        "\\\"".repeat(40)
    );
    let e = read(&quoted, 1 << 20).unwrap_err();
    assert!(e.to_string().contains("longer than 64"), "{e}");
    let number = format!("{{\"arena_bytes\": {}, \"buffers\": []}}", "9".repeat(100));
    let e = read(&number, 1 << 20).unwrap_err();
    assert!(e.to_string().contains("longer than 64"), "{e}");
}
