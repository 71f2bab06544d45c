//! minimalloc CSV: reading, writing, every kind of bad input, and the shared benchmarks.

use std::path::Path;

use memplan::io::csv::{read_problem, read_solution, write_problem, write_solution, CsvError};
use memplan::{bound, checker, Buffer, Lifetime, Plan, Problem};
use proptest::prelude::*;

fn data(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn read(text: &str) -> Problem {
    read_problem(text, "test.csv").unwrap_or_else(|e| panic!("{e}"))
}

/// Reads `text`, expecting an error on `line` about `column` whose message contains every
/// word of `words`.
#[track_caller]
fn error(text: &str, line: usize, column: Option<&str>, words: &[&str]) -> CsvError {
    let err = match read_problem(text, "in.csv") {
        Ok(problem) => panic!("expected an error, read {problem:?}"),
        Err(err) => err,
    };
    check_error(&err, line, column, words);
    err
}

#[track_caller]
fn check_error(err: &CsvError, line: usize, column: Option<&str>, words: &[&str]) {
    assert_eq!(err.line, line, "{err}");
    assert_eq!(err.column.as_deref(), column, "{err}");
    for word in words {
        assert!(err.message.contains(word), "'{word}' not in: {err}");
    }
    let shown = err.to_string();
    let prefix = match column {
        Some(column) => format!("{}:{line}: column '{column}': ", err.source),
        None => format!("{}:{line}: ", err.source),
    };
    assert!(shown.starts_with(&prefix), "{shown}");
}

fn buffer(name: &str, size: u64, start: u64, end: u64) -> Buffer {
    Buffer::new(name, size, start, end)
}

// ---------------------------------------------------------------------------------------
// Well-formed input

#[test]
fn reads_the_minimalloc_example() {
    let problem = read(&data("input.12.csv"));
    assert_eq!(problem.len(), 5);
    assert_eq!(problem.buffers()[0], buffer("b1", 4, 0, 3));
    assert_eq!(problem.buffers()[4], buffer("b5", 4, 0, 21));
    assert_eq!(bound::max_live(&problem), Some(12));
}

#[test]
fn columns_may_come_in_any_order() {
    let a = read("id,lower,upper,size\nx,1,5,7\ny,0,2,3\n");
    let b = read("size,upper,id,lower\n7,5,x,1\n3,2,y,0\n");
    let c = read("lower,size,id,upper\n1,7,x,5\n0,3,y,2");
    assert_eq!(a, b);
    assert_eq!(a, c);
    assert_eq!(a.buffers()[1], buffer("y", 3, 0, 2));
}

#[test]
fn legacy_headers_are_accepted() {
    let expected = read("id,lower,upper,size\nx,1,5,7\n");
    for header in ["buffer,begin,upper,size", "buffer_id,start,upper,size"] {
        assert_eq!(read(&format!("{header}\nx,1,5,7\n")), expected, "{header}");
    }
    // `end` is inclusive: live on [1, 4 + 1).
    assert_eq!(read("id,start,end,size\nx,1,4,7\n"), expected);
    assert_eq!(read("ID,Lower,UPPER,Size\nx,1,5,7\n"), expected);
}

#[test]
fn legacy_end_makes_gap_ends_inclusive_too() {
    let problem = read(&data("legacy.csv"));
    let first = &problem.buffers()[0];
    assert_eq!(first.name, "1");
    assert_eq!(first.lifetime, Lifetime { start: 6, end: 12 });
    assert_eq!(first.alignment, 2);
    assert_eq!(first.gaps, vec![Lifetime { start: 7, end: 9 }]);
    let second = &problem.buffers()[1];
    assert_eq!(second.lifetime, Lifetime { start: 5, end: 15 });
    assert_eq!(
        second.gaps,
        vec![
            Lifetime { start: 9, end: 11 },
            Lifetime { start: 12, end: 14 }
        ]
    );
}

#[test]
fn gaps_are_half_open_space_separated_and_sorted() {
    let problem = read("id,lower,upper,size,gaps\na,0,20,4,12-14   2-4 \nb,0,5,1,\n");
    assert_eq!(
        problem.buffers()[0].gaps,
        vec![
            Lifetime { start: 2, end: 4 },
            Lifetime { start: 12, end: 14 }
        ]
    );
    assert!(problem.buffers()[1].gaps.is_empty());
    // Gaps may touch each other and the ends of the lifetime, as long as a step stays live.
    let touching = read("id,lower,upper,size,gaps\na,0,10,4,0-3 3-5 9-10\n");
    assert_eq!(touching.buffers()[0].gaps.len(), 3);
}

#[test]
fn alignment_offset_and_hint() {
    let problem = read(&data("all_columns.csv"));
    let b = problem.buffers();
    assert_eq!(b.len(), 4);
    assert_eq!(
        (b[0].alignment, b[0].hint, b[0].fixed_offset),
        (1, None, None)
    );
    assert_eq!(b[1].name, "with,comma");
    assert_eq!((b[1].alignment, b[1].hint), (8, Some(16)));
    assert_eq!(b[1].gaps, vec![Lifetime { start: 4, end: 6 }]);
    assert_eq!(b[2].name, "quoted \"name\"");
    assert_eq!((b[2].alignment, b[2].fixed_offset), (16, Some(32)));
    assert_eq!(b[3].name, "spaced");
    assert_eq!(b[3].hint, None);
    // Empty optional cells are absent; so is MiniMalloc's hint of -1.
    let p = read("id,lower,upper,size,alignment,offset,hint\na,0,1,1,,,\nb,0,1,1,,,-1\n");
    for b in p.buffers() {
        assert_eq!((b.alignment, b.fixed_offset, b.hint), (1, None, None));
    }
}

#[test]
fn dialect_bom_crlf_blank_lines_whitespace_trailing_commas() {
    let problem = read(&data("bom_crlf.csv"));
    assert_eq!(
        problem.buffers(),
        &[buffer("a", 4, 0, 3), buffer("b", 4, 3, 9)]
    );
    let spaced = read("\n\n  id , lower,\tupper , size  \n\n  x ,\t1 , 5,7  \n   \n");
    assert_eq!(spaced.buffers(), &[buffer("x", 7, 1, 5)]);
    let trailing = read("id,lower,upper,size\nx,1,5,7,\n");
    assert_eq!(trailing.buffers(), &[buffer("x", 7, 1, 5)]);
}

#[test]
fn quoted_cells_keep_commas_quotes_spaces_and_line_breaks() {
    let problem = read(
        "id,lower,upper,size\n\"a,b\",0,1,1\n\"say \"\"hi\"\"\",0,1,1\n  \" pad \"  ,0,1,1\n\"two\nlines\",0,1,1\n\"\",0,1,1\n",
    );
    let names: Vec<&str> = problem.buffers().iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["a,b", "say \"hi\"", " pad ", "two\nlines", ""]);
    // Line numbers keep counting through a quoted line break.
    error(
        "id,lower,upper,size\n\"two\nlines\",0,1,1\nbad,0,1,z\n",
        4,
        Some("size"),
        &["not a number"],
    );
    // Numbers may be quoted too.
    assert_eq!(
        read("id,lower,upper,size\nx,\"1\",\"5\",\"7\"\n").buffers(),
        &[buffer("x", 7, 1, 5)]
    );
}

#[test]
fn a_header_alone_is_an_empty_problem() {
    assert!(read("id,lower,upper,size\n").is_empty());
}

// ---------------------------------------------------------------------------------------
// Bad input: each error names the line and the column.

#[test]
fn empty_input_has_no_header() {
    for text in ["", "\n\n", "  \r\n", "\u{feff}"] {
        error(
            text,
            text.matches('\n').count() + 1,
            None,
            &["header", "id,lower,upper,size"],
        );
    }
}

#[test]
fn missing_required_column_is_named_with_the_columns_found() {
    error(
        "id,lower,size\nx,0,4\n",
        1,
        Some("upper"),
        &["missing", "end", "id, lower, size"],
    );
    error("lower,upper,size\n0,1,4\n", 1, Some("id"), &["buffer_id"]);
    error("\n\nid,upper,size\n", 3, Some("lower"), &["begin"]);
    error("id,lower,upper\n", 1, Some("size"), &["missing"]);
}

#[test]
fn duplicate_columns_are_rejected() {
    error(
        "id,lower,upper,size,size\n",
        1,
        Some("size"),
        &["duplicate", "twice"],
    );
    error(
        "id,lower,begin,upper,size\n",
        1,
        Some("begin"),
        &["duplicate", "'lower'"],
    );
    error("id,lower,upper,end,size\n", 1, Some("end"), &["'upper'"]);
    error("buffer,id,lower,upper,size\n", 1, Some("id"), &["'buffer'"]);
}

#[test]
fn unknown_and_unnamed_columns_are_rejected() {
    let err = error(
        "id,lower,upper,size,colour\n",
        1,
        Some("colour"),
        &[
            "unknown",
            "known columns",
            "alignment",
            "gaps",
            "hint",
            "offset",
        ],
    );
    assert!(err.to_string().contains("column 'colour'"));
    error("id,,lower,upper,size\n", 1, None, &["cell 2", "empty"]);
}

#[test]
fn rows_must_have_one_cell_per_column() {
    error(
        "id,lower,upper,size\nx,0,1\n",
        2,
        None,
        &["3 cells", "4 columns", "id, lower, upper, size"],
    );
    error(
        "id,lower,upper,size\nx,0,1,4,5\n",
        2,
        None,
        &["5 cells", "quote"],
    );
    // Only one trailing empty cell is forgiven.
    error("id,lower,upper,size\nx,0,1,4,,\n", 2, None, &["6 cells"]);
}

#[test]
fn non_numeric_negative_and_overflowing_numbers() {
    let h = "id,lower,upper,size,alignment,offset,hint\n";
    error(
        &format!("{h}x,zero,1,4,,,\n"),
        2,
        Some("lower"),
        &["'zero'", "not a number"],
    );
    error(
        &format!("{h}x,0,1.5,4,,,\n"),
        2,
        Some("upper"),
        &["'1.5'", "not a number"],
    );
    error(
        &format!("{h}x,0,1,+4,,,\n"),
        2,
        Some("size"),
        &["not a number"],
    );
    error(
        &format!("{h}x,0,1,1e3,,,\n"),
        2,
        Some("size"),
        &["not a number"],
    );
    error(
        &format!("{h}x,0,1,-4,,,\n"),
        2,
        Some("size"),
        &["'-4'", "negative"],
    );
    error(
        &format!("{h}x,0,1,4,-8,,\n"),
        2,
        Some("alignment"),
        &["negative"],
    );
    error(
        &format!("{h}x,0,1,4,,-8,\n"),
        2,
        Some("offset"),
        &["negative"],
    );
    error(
        &format!("{h}x,0,1,4,,,-2\n"),
        2,
        Some("hint"),
        &["negative"],
    );
    error(
        &format!("{h}x,0,1,18446744073709551616,,,\n"),
        2,
        Some("size"),
        &["64 bits", "18446744073709551615"],
    );
    error(
        &format!("{h}x,99999999999999999999999,1,4,,,\n"),
        2,
        Some("lower"),
        &["64 bits"],
    );
    // The largest value itself is fine.
    let p = read("id,lower,upper,size\nx,0,18446744073709551615,18446744073709551615\n");
    assert_eq!(p.buffers()[0].size, u64::MAX);
}

#[test]
fn required_cells_must_not_be_empty() {
    error(
        "id,lower,upper,size\nx,,1,4\n",
        2,
        Some("lower"),
        &["empty"],
    );
    error("id,lower,upper,size\nx,0,1,\n", 2, Some("size"), &["empty"]);
    error(
        "id,lower,upper,size\n,0,1,4\n",
        2,
        Some("id"),
        &["empty", "\"\""],
    );
}

#[test]
fn zero_size_is_read_and_zero_alignment_is_an_error() {
    let problem = read("id,lower,upper,size\nx,0,1,0\n");
    assert_eq!(problem.buffers()[0].size, 0);
    error(
        "id,lower,upper,size,alignment\nx,0,1,4,0\n",
        2,
        Some("alignment"),
        &["use 1"],
    );
}

#[test]
fn empty_lifetimes() {
    error(
        "id,lower,upper,size\na,0,2,1\nx,5,5,4\n",
        3,
        Some("upper"),
        &["not greater", "exclusive"],
    );
    error("id,lower,upper,size\nx,5,3,4\n", 2, Some("upper"), &["5"]);
    // With the inclusive `end`, end == start is one step, end < start is empty.
    assert_eq!(
        read("id,start,end,size\nx,5,5,4\n").buffers()[0]
            .lifetime
            .len(),
        1
    );
    error(
        "id,start,end,size\nx,5,4,4\n",
        2,
        Some("end"),
        &["before", "inclusive"],
    );
}

#[test]
fn inclusive_end_plus_one_overflow() {
    error(
        "id,start,end,size\nx,0,18446744073709551615,4\n",
        2,
        Some("end"),
        &["+ 1", "overflows"],
    );
}

#[test]
fn duplicate_ids_name_both_lines() {
    let err = error(
        "id,lower,upper,size\nx,0,1,4\ny,0,1,4\n\nx,2,3,4\n",
        5,
        Some("id"),
        &["'x'", "line 2", "unique"],
    );
    assert!(err.to_string().starts_with("in.csv:5: column 'id'"));
    // Control characters in ids are escaped in messages.
    error(
        "id,lower,upper,size\n\"a\nb\",0,1,1\n\"a\nb\",0,1,1\n",
        4,
        Some("id"),
        &["'a\\nb'", "line 2"],
    );
    // Quoting does not make ids different.
    error(
        "id,lower,upper,size\nx,0,1,1\n\"x\",0,1,1\n",
        3,
        Some("id"),
        &["line 2"],
    );
}

#[test]
fn fixed_offsets_must_be_aligned_and_fit() {
    error(
        "id,lower,upper,size,alignment,offset\nx,0,1,4,8,12\n",
        2,
        Some("offset"),
        &["12", "multiple", "8"],
    );
    error(
        "id,lower,upper,size,offset\nx,0,1,4,18446744073709551613\n",
        2,
        Some("offset"),
        &["overflows"],
    );
    // Exactly at the top of the address space is fine.
    let p = read("id,lower,upper,size,offset\nx,0,1,4,18446744073709551611\n");
    assert_eq!(p.buffers()[0].fixed_offset, Some(u64::MAX - 4));
}

#[test]
fn bad_gaps() {
    let h = "id,lower,upper,size,gaps\n";
    for (gaps, words) in [
        ("1-2-3", &["'1-2-3'", "more than one '-'"][..]),
        ("A-B", &["'A'", "not a number"]),
        ("5", &["no '-'"]),
        ("3-3", &["empty", "greater"]),
        ("4-2", &["empty"]),
        ("-1-2", &["bad gap"]),
        ("1-", &["not a number"]),
        ("1-2,3", &[]),
        ("1-99999999999999999999", &["64 bits"]),
        ("1-2@0:4", &["window", "@0:4", "remove the gap"]),
        ("12-14", &["not inside", "[0, 10)"]),
        ("2-5 4-6", &["overlap"]),
        ("0-10", &["whole lifetime"]),
        ("0-5 5-10", &["whole lifetime"]),
    ] {
        let text = format!("{h}x,0,10,4,{gaps}\n");
        let err = read_problem(&text, "in.csv").expect_err(gaps);
        if gaps == "1-2,3" {
            // The comma ends the cell: one cell too many.
            check_error(&err, 2, None, &["6 cells"]);
        } else {
            check_error(&err, 2, Some("gaps"), words);
        }
    }
    // With the legacy `end`, both gap bounds are inclusive.
    error(
        "id,start,end,size,gaps\nx,0,9,4,3-2\n",
        2,
        Some("gaps"),
        &["ends (2) before it starts (3)", "inclusive"],
    );
    error(
        "id,start,end,size,gaps\nx,0,9,4,0-9\n",
        2,
        Some("gaps"),
        &["whole lifetime"],
    );
}

#[test]
fn quote_errors() {
    error(
        "id,lower,upper,size\nx,0,1,4\n\"open,0,1,4\n\n",
        3,
        None,
        &["never closed"],
    );
    error(
        "id,lower,upper,size\nx\"y,0,1,4\n",
        2,
        None,
        &["inside the unquoted cell", "\"\""],
    );
    error(
        "id,lower,upper,size\n\"x\"y,0,1,4\n",
        2,
        None,
        &["after the closing quote"],
    );
}

#[test]
fn errors_use_the_header_spelling_of_the_column() {
    error(
        "id,begin,upper,size\nx,a,1,4\n",
        2,
        Some("begin"),
        &["not a number"],
    );
    error(
        "id,lower,upper,Size\nx,0,1,z\n",
        2,
        Some("Size"),
        &["not a number"],
    );
}

#[test]
fn source_name_is_in_the_message() {
    let err = read_problem("id,lower,upper,size\nx,0,1,z\n", "models/net.csv").unwrap_err();
    assert_eq!(err.source, "models/net.csv");
    assert!(
        err.to_string()
            .starts_with("models/net.csv:2: column 'size': "),
        "{err}"
    );
    let err: Box<dyn std::error::Error> = Box::new(err);
    assert!(!err.to_string().is_empty());
}

// ---------------------------------------------------------------------------------------
// Writing

#[test]
fn writer_emits_only_the_columns_needed() {
    let plain = read(&data("input.12.csv"));
    assert_eq!(write_problem(&plain), data("input.12.csv"));
    let mut aligned = buffer("a", 4, 0, 2);
    aligned.alignment = 4;
    let p = Problem::from_buffers(vec![aligned, buffer("b", 1, 1, 3)]).unwrap();
    assert_eq!(
        write_problem(&p),
        "id,lower,upper,size,alignment\na,0,2,4,4\nb,1,3,1,1\n"
    );
    let mut fixed = buffer("a", 4, 0, 2);
    fixed.fixed_offset = Some(8);
    let mut hinted = buffer("b", 1, 1, 5);
    hinted.hint = Some(3);
    hinted.gaps = vec![Lifetime { start: 2, end: 3 }, Lifetime { start: 3, end: 4 }];
    let p = Problem::from_buffers(vec![fixed, hinted]).unwrap();
    assert_eq!(
        write_problem(&p),
        "id,lower,upper,size,hint,gaps,offset\na,0,2,4,-1,,8\nb,1,5,1,3,2-3 3-4,\n"
    );
}

#[test]
fn writer_quotes_ids_only_when_needed() {
    let names = [
        "plain name",
        "a,b",
        "q\"q",
        " lead",
        "trail\t",
        "",
        "cr\rlf\n",
        "ünï",
    ];
    let buffers = names
        .iter()
        .enumerate()
        .map(|(i, n)| buffer(n, 1, i as u64, i as u64 + 1))
        .collect();
    let p = Problem::from_buffers(buffers).unwrap();
    let text = write_problem(&p);
    assert!(text.contains("\nplain name,0,1,1\n"), "{text}");
    assert!(text.contains("\n\"a,b\",1,"), "{text}");
    assert!(text.contains("\n\"q\"\"q\",2,"), "{text}");
    assert!(text.contains("\n\"\",5,"), "{text}");
    assert!(text.contains("\nünï,7,"), "{text}");
    assert_eq!(read(&text), p);
}

#[test]
fn conflicts_are_not_written() {
    let p = Problem::new(
        vec![buffer("a", 1, 0, 1), buffer("b", 1, 5, 6)],
        [(memplan::BufferId(0), memplan::BufferId(1))],
    )
    .unwrap();
    let back = read(&write_problem(&p));
    assert!(back.conflicts().is_empty());
    assert_eq!(back.buffers(), p.buffers());
}

// ---------------------------------------------------------------------------------------
// Solutions

#[test]
fn reads_the_minimalloc_example_solution() {
    let problem = read(&data("input.12.csv"));
    let plan = read_solution(&data("solution.12.csv"), "solution.12.csv", &problem).unwrap();
    assert_eq!(plan.offsets, vec![8, 8, 4, 4, 0]);
    assert_eq!(plan.arena_bytes, None);
    let report = checker::check(&problem, &plan);
    assert!(report.is_valid(), "{:?}", report.violations);
    assert_eq!(report.arena_bytes, Some(12));
    assert_eq!(write_solution(&problem, &plan), data("solution.12.csv"));
}

#[test]
fn solution_rows_are_matched_by_id_in_any_order() {
    let problem = read(&data("input.12.csv"));
    let shuffled = "size,offset,upper,lower,id\n4,0,21,0,b5\n4,8,3,0,b1\n4,4,21,9,b4\n4,4,9,0,b3\n4,8,9,3,b2\n";
    let plan = read_solution(shuffled, "s.csv", &problem).unwrap();
    assert_eq!(plan.offsets, vec![8, 8, 4, 4, 0]);
    // Legacy headers work in solutions as well.
    let legacy = "buffer,start,end,size,offset\nb1,0,2,4,8\nb2,3,8,4,8\nb3,0,8,4,4\nb4,9,20,4,4\nb5,0,20,4,0\n";
    assert_eq!(
        read_solution(legacy, "s.csv", &problem).unwrap().offsets,
        plan.offsets
    );
}

#[test]
fn solution_rows_in_order_then_not_are_matched_by_id() {
    // The reader matches rows by position while they follow the problem's order, then by
    // name: both halves of that must give the same plan as fully shuffled rows.
    let problem = read(&data("input.12.csv"));
    let partly = "id,lower,upper,size,offset\nb1,0,3,4,8\nb2,3,9,4,8\nb5,0,21,4,0\nb3,0,9,4,4\nb4,9,21,4,4\n";
    assert_eq!(
        read_solution(partly, "s.csv", &problem).unwrap().offsets,
        vec![8, 8, 4, 4, 0]
    );
    let repeated = "id,lower,upper,size,offset\nb1,0,3,4,8\nb2,3,9,4,8\nb1,0,3,4,8\n";
    let err = read_solution(repeated, "s.csv", &problem).unwrap_err();
    check_error(
        &err,
        4,
        Some("id"),
        &["'b1'", "already has a row on line 2"],
    );
}

#[test]
fn bad_solutions_name_the_buffer_and_field() {
    let problem = read(&data("input.12.csv"));
    let solution = data("solution.12.csv");
    let bad = |text: &str, line: usize, column: Option<&str>, words: &[&str]| {
        let err = read_solution(text, "s.csv", &problem).expect_err(text);
        check_error(&err, line, column, words);
    };
    bad(
        &data("input.12.csv"),
        1,
        Some("offset"),
        &["missing", "solution"],
    );
    bad(
        &solution.replace("b3,0,9,4,4", "b3,0,9,4,"),
        4,
        Some("offset"),
        &["'b3'", "no offset"],
    );
    bad(
        &solution.replace("b3,0,9,4,4", "b3,0,9,8,4"),
        4,
        Some("size"),
        &["'b3'", "size 8", "4 in the problem"],
    );
    bad(
        &solution.replace("b3,0,9,4,4", "b3,1,9,4,4"),
        4,
        Some("lower"),
        &["'b3'", "start 1"],
    );
    bad(
        &solution.replace("b3,0,9,4,4", "b3,0,10,4,4"),
        4,
        Some("upper"),
        &["'b3'", "end 10", "9 in the problem"],
    );
    bad(
        &solution.replace("b3,", "b9,"),
        4,
        Some("id"),
        &["'b9'", "not a buffer"],
    );
    bad(
        &format!("{solution}b1,0,3,4,0\n"),
        7,
        Some("id"),
        &["'b1'", "line 2"],
    );
    bad(
        &solution
            .replace("b2,3,9,4,8\n", "")
            .replace("b4,9,21,4,4\n", ""),
        4,
        None,
        &["2 buffer(s)", "'b2'", "'b4'"],
    );
    bad(
        &solution.replace("b3,0,9,4,4", "b3,0,9,4,18446744073709551614"),
        4,
        Some("offset"),
        &["overflows"],
    );
    let with_gaps = "id,lower,upper,size,gaps,offset\nb1,0,3,4,1-2,8\n";
    bad(with_gaps, 2, Some("gaps"), &["'b1'", "[1, 2)", "none"]);
}

#[test]
fn misaligned_or_overlapping_solutions_are_for_the_checker() {
    let mut a = buffer("a", 4, 0, 2);
    a.alignment = 4;
    let problem = Problem::from_buffers(vec![a, buffer("b", 4, 0, 2)]).unwrap();
    let plan = read_solution(
        "id,lower,upper,size,offset\na,0,2,4,2\nb,0,2,4,0\n",
        "s",
        &problem,
    )
    .unwrap();
    assert_eq!(plan.offsets, vec![2, 0]);
    assert!(!checker::check(&problem, &plan).is_valid());
}

#[test]
fn write_solution_tolerates_a_short_plan() {
    let problem = read(&data("input.12.csv"));
    let plan = Plan {
        offsets: vec![1],
        arena_bytes: None,
        extents: None,
    };
    let text = write_solution(&problem, &plan);
    assert!(text.ends_with("b5,0,21,4,\n"), "{text}");
    assert!(read_solution(&text, "s", &problem).is_err());
}

// ---------------------------------------------------------------------------------------
// Round trips

fn arb_name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z][a-z0-9_]{0,6}",
        "[ -~]{0,8}",
        "[a,\" \n\r\t\u{e9}\u{feff}]{0,5}",
    ]
}

fn arb_buffer() -> impl Strategy<Value = Buffer> {
    (
        arb_name(),
        prop_oneof![1u64..64, 1u64..=u64::MAX / 4],
        0u64..1000,
        2u64..200,
        proptest::collection::vec(0u64..200, 0..6),
        prop_oneof![Just(1u64), Just(2), Just(8), Just(64), 1u64..1000],
        proptest::option::of(0u64..1000),
        proptest::option::of(any::<u64>()),
    )
        .prop_map(|(name, size, start, len, cuts, alignment, fixed, hint)| {
            let mut cuts: Vec<u64> = cuts.into_iter().map(|c| c % len).collect();
            cuts.sort_unstable();
            cuts.dedup();
            let gaps = cuts
                .chunks_exact(2)
                .map(|pair| Lifetime {
                    start: start + pair[0],
                    end: start + pair[1],
                })
                .collect();
            Buffer {
                name,
                size,
                lifetime: Lifetime {
                    start,
                    end: start + len,
                },
                gaps,
                alignment,
                fixed_offset: fixed.map(|k| k * alignment),
                hint,
            }
        })
}

fn arb_problem() -> impl Strategy<Value = Problem> {
    proptest::collection::vec(arb_buffer(), 0..12).prop_map(|mut buffers| {
        let mut seen = std::collections::HashSet::new();
        for (i, b) in buffers.iter_mut().enumerate() {
            if !seen.insert(b.name.clone()) {
                b.name = format!("{}#{i}", b.name);
                seen.insert(b.name.clone());
            }
        }
        Problem::from_buffers(buffers).expect("generated problems are valid")
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn problems_round_trip(problem in arb_problem()) {
        let text = write_problem(&problem);
        let back = read_problem(&text, "rt.csv").map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(back, problem);
    }

    #[test]
    fn solutions_round_trip(problem in arb_problem(), seed in any::<u64>()) {
        let offsets: Vec<u64> = problem
            .buffers()
            .iter()
            .enumerate()
            .map(|(i, b)| (seed.rotate_left(i as u32) % 4096) * b.alignment)
            .collect();
        let plan = Plan {
            offsets,
            arena_bytes: None,
            extents: None,
        };
        let text = write_solution(&problem, &plan);
        let back = read_solution(&text, "rt.csv", &problem).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(back, plan);
    }

    #[test]
    fn crlf_and_padding_do_not_change_the_meaning(problem in arb_problem()) {
        let text = write_problem(&problem);
        if text.contains('"') {
            // Quoted ids may hold line breaks, which `lines()` would split.
            return Ok(());
        }
        // Padding every cell, CRLF line ends, a BOM and blank lines.
        let mut padded = String::from("\u{feff}\r\n");
        for line in text.lines() {
            padded.push_str(&line.split(',').map(|c| format!(" {c}\t")).collect::<Vec<_>>().join(","));
            padded.push_str("\r\n\r\n");
        }
        let back = read_problem(&padded, "padded.csv").map_err(|e| TestCaseError::fail(format!("{e}\n{padded}")))?;
        prop_assert_eq!(back, problem);
    }
}

mod common;
use common::{shared_benchmarks, BENCHMARKS};

#[test]
fn reads_every_shared_benchmark() {
    let Some(dir) = shared_benchmarks() else {
        return;
    };
    for &(file, buffers, max_live, total) in BENCHMARKS {
        let path = dir.join(file);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
        let problem = read_problem(&text, file).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(problem.len(), buffers, "{file}");
        assert_eq!(problem.total_size(), Some(total), "{file}");
        assert_eq!(bound::max_live(&problem), Some(max_live), "{file}");
        assert_eq!(
            read_problem(&write_problem(&problem), file).as_ref(),
            Ok(&problem),
            "{file}"
        );
    }
}

#[test]
fn a_solution_may_record_a_stricter_alignment_and_is_held_to_it() {
    let problem = read("id,lower,upper,size,alignment\na,0,2,4,4\nb,1,3,4,\n");
    // Alignment 8 (a multiple of a's 4 and b's 1): accepted, and the problem to check
    // against carries it.
    let (plan, aligned) = memplan::io::csv::read_solution_aligned(
        "id,lower,upper,size,alignment,offset\na,0,2,4,8,0\nb,1,3,4,8,8\n",
        "s.csv",
        &problem,
    )
    .unwrap();
    assert_eq!(plan.offsets, [0, 8]);
    assert_eq!(
        aligned
            .buffers()
            .iter()
            .map(|b| b.alignment)
            .collect::<Vec<_>>(),
        [8, 8]
    );
    assert!(memplan::checker::check(&aligned, &plan).is_valid());
    let (moved, aligned) = memplan::io::csv::read_solution_aligned(
        "id,lower,upper,size,alignment,offset\na,0,2,4,8,0\nb,1,3,4,8,4\n",
        "s.csv",
        &problem,
    )
    .unwrap();
    assert!(!memplan::checker::check(&aligned, &moved).is_valid());
    // Alignment 2 is not a multiple of a's 4: refused, naming buffer and column.
    let err = read_solution(
        "id,lower,upper,size,alignment,offset\na,0,2,4,2,0\nb,1,3,4,,8\n",
        "s.csv",
        &problem,
    )
    .unwrap_err();
    check_error(
        &err,
        2,
        Some("alignment"),
        &["'a'", "alignment 2", "multiple"],
    );
}
