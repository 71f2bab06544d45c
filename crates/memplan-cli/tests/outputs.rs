//! Every output that can carry a fragmented plan's pieces writes each piece's address
//! (the `exclusive` method, Deployment), and every output gives each range's end (`top`, §5).
//!
//! `tests/data/fragmented.json` is a graph whose `exclusive:fragmented` plan spreads the
//! block of tensor `t3` (32 bytes) over two pieces: `[80, 96)` and `[288, 304)`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use memplan::io::json::read_plan_json;
use memplan::{checker, Buffer, Problem};
use serde_json::{json, Value};

const GRAPH: &str = "crates/memplan-cli/tests/data/fragmented.json";

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

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

/// Plans `GRAPH` with `planner` into `dir/name` in `format`, with a base address.
fn plan_file(dir: &Path, planner: &str, format: &str, name: &str) -> (PathBuf, String) {
    let path = dir.join(name);
    let out = memplan(&[
        "plan",
        GRAPH,
        "--planner",
        planner,
        "-f",
        format,
        "--base",
        "0x1000",
        "-o",
        path.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{planner} -f {format}: {}",
        stderr(&out)
    );
    let text = std::fs::read_to_string(&path).unwrap();
    (path, text)
}

/// The problem a plan JSON's `buffers` describe (sizes and lifetimes, no exclusive pairs):
/// enough for `checker::check` to hold the plan to non-overlap and its extents' sums.
fn problem_of(value: &Value) -> Problem {
    let buffers = value["buffers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            Buffer::new(
                b["id"].as_str().unwrap(),
                b["size"].as_u64().unwrap(),
                b["start"].as_u64().unwrap(),
                b["end"].as_u64().unwrap(),
            )
        })
        .collect();
    Problem::from_buffers(buffers).unwrap()
}

/// `(offset, len)` of every piece of a tensor object of plan JSON, and its checked tops.
fn tensor_pieces(tensor: &Value) -> Vec<(u64, u64)> {
    let offset = tensor["offset"].as_u64().unwrap();
    let size = tensor["size"].as_u64().unwrap();
    let address = tensor["address"].as_u64().unwrap();
    match tensor.get("pieces") {
        None => {
            assert_eq!(tensor["top"].as_u64(), Some(offset + size), "{tensor}");
            assert_eq!(address, 0x1000 + offset, "{tensor}");
            vec![(offset, size)]
        }
        Some(pieces) => {
            assert_eq!(tensor.get("top"), None, "a split tensor has no single top");
            let pieces: Vec<(u64, u64)> = pieces
                .as_array()
                .unwrap()
                .iter()
                .map(|p| {
                    let (o, l) = (p["offset"].as_u64().unwrap(), p["len"].as_u64().unwrap());
                    assert_eq!(p["top"].as_u64(), Some(o + l), "{p}");
                    assert_eq!(p["address"].as_u64(), Some(0x1000 + o), "{p}");
                    (o, l)
                })
                .collect();
            assert!(pieces.len() >= 2, "{tensor}");
            assert_eq!(pieces[0].0, offset, "{tensor}");
            assert_eq!(pieces.iter().map(|p| p.1).sum::<u64>(), size, "{tensor}");
            pieces
        }
    }
}

#[test]
fn a_fragmented_plan_writes_every_piece_in_json_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let (path, text) = plan_file(dir.path(), "exclusive:fragmented", "json", "plan.json");
    let value: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["fragmented"], true);
    assert_eq!(value["arena_bytes"], 336);
    let t3 = value["buffers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["id"] == "t3")
        .unwrap();
    assert_eq!(
        t3["extents"],
        json!([{"offset": 80, "len": 16, "top": 96}, {"offset": 288, "len": 16, "top": 304}])
    );
    assert_eq!(t3.get("top"), None);
    // Every tensor: its pieces (a split one) or its one range, with tops and addresses;
    // here each block holds one tensor, so a tensor's pieces are its block's extents.
    let tensors = value["tensors"].as_array().unwrap();
    assert_eq!(tensors.len(), 7);
    for tensor in tensors {
        let pieces = tensor_pieces(tensor);
        let block = value["buffers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["id"] == tensor["block"])
            .unwrap();
        let extents: Vec<(u64, u64)> = block["extents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["offset"].as_u64().unwrap(), e["len"].as_u64().unwrap()))
            .collect();
        assert_eq!(pieces, extents, "{tensor}");
    }
    let split: Vec<&str> = tensors
        .iter()
        .filter(|t| t.get("pieces").is_some())
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(split, ["t3"]);

    // The library reads it back as a fragmented plan, and the checker accepts it.
    let problem = problem_of(&value);
    let plan = read_plan_json(&text, "plan.json", &problem).unwrap();
    assert!(plan.is_fragmented());
    let report = checker::check(&problem, &plan);
    assert!(report.is_valid(), "{:?}", report.violations);
    assert_eq!(report.arena_bytes, Some(336));
    // So does `memplan check`, against the exclusive problem it rebuilds.
    let out = memplan(&["check", GRAPH, path.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );

    // A wrong top is refused, naming the buffer.
    let broken = text.replace("\"top\": 304", "\"top\": 305");
    assert_ne!(broken, text);
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, broken).unwrap();
    let out = memplan(&["check", GRAPH, bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("buffer 't3', extents[1]: \"top\" 305 is not offset 288 + len 16"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_contiguous_plan_of_the_same_graph_gives_tops_and_no_pieces() {
    let dir = tempfile::tempdir().unwrap();
    let (path, text) = plan_file(dir.path(), "exclusive", "json", "plan.json");
    let value: Value = serde_json::from_str(&text).unwrap();
    assert!(!text.contains("\"pieces\"") && !text.contains("\"extents\""));
    for buffer in value["buffers"].as_array().unwrap() {
        let end = buffer["offset"].as_u64().unwrap() + buffer["size"].as_u64().unwrap();
        assert_eq!(buffer["top"].as_u64(), Some(end), "{buffer}");
    }
    for tensor in value["tensors"].as_array().unwrap() {
        assert_eq!(tensor_pieces(tensor).len(), 1);
    }
    let problem = problem_of(&value);
    let plan = read_plan_json(&text, "plan.json", &problem).unwrap();
    assert_eq!(plan.extents, None);
    assert!(checker::check(&problem, &plan).is_valid());
    let out = memplan(&["check", GRAPH, path.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    // The C header: single-range macros with a top, no piece macros.
    let (_, header) = plan_file(dir.path(), "exclusive", "c", "plan.h");
    assert!(
        header.contains("#define MEMPLAN_TOP_t3 UINT64_C("),
        "{header}"
    );
    assert!(!header.contains("PIECE") && !header.contains("MEMPLAN_FRAGMENTED 1"));
}

#[test]
fn the_solution_csv_refuses_a_fragmented_plan_and_names_the_formats_that_can() {
    let out = memplan(&[
        "plan",
        GRAPH,
        "--planner",
        "exclusive:fragmented",
        "-f",
        "csv",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("cannot carry the pieces of a fragmented plan")
            && err.contains("--format json")
            && err.contains("--format c"),
        "{err}"
    );
    // The table shows the pieces and a top for every buffer in one piece.
    let out = memplan(&["plan", GRAPH, "--planner", "exclusive:fragmented"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("offset  top"), "{text}");
    let t3 = text
        .lines()
        .find(|l| l.trim_start().starts_with("t3 "))
        .unwrap();
    assert!(t3.contains("80 ([80, 96) + [288, 304))") && t3.trim_end().ends_with('-'));
    let t4 = text
        .lines()
        .find(|l| l.trim_start().starts_with("t4 "))
        .unwrap();
    assert!(t4.trim_end().ends_with("304  336"), "{t4}");
}

/// The fragmented header: a C program built from it finds every byte of every tensor, and
/// a split tensor has no single-offset macro. Skipped without a C compiler.
#[test]
fn a_fragmented_c_header_gives_every_piece_and_compiles() {
    let dir = tempfile::tempdir().unwrap();
    let (_, header) = plan_file(dir.path(), "exclusive:fragmented", "c", "plan.h");
    let (_, json_text) = plan_file(dir.path(), "exclusive:fragmented", "json", "plan.json");
    for line in [
        "#define MEMPLAN_FRAGMENTED 1",
        "#define MEMPLAN_MAX_PIECES 2",
        "/* \"t3\" in block \"t3\", 32 bytes in 2 pieces */",
        "#define MEMPLAN_PIECES_t3 2",
        "#define MEMPLAN_PIECE_OFFSETS_t3 { UINT64_C(80), UINT64_C(288) }",
        "#define MEMPLAN_PIECE_LENGTHS_t3 { UINT64_C(16), UINT64_C(16) }",
        "#define MEMPLAN_PIECE_ADDRESSES_t3 { UINT64_C(0x1050), UINT64_C(0x1120) }",
        "#define MEMPLAN_OFFSET_t4 UINT64_C(304)",
        "#define MEMPLAN_TOP_t4 UINT64_C(336)",
        "#define MEMPLAN_PIECES_t4 1",
    ] {
        assert!(header.contains(line), "{line}\n{header}");
    }
    assert!(!header.contains("MEMPLAN_OFFSET_t3 ") && !header.contains("MEMPLAN_TOP_t3 "));

    let Some(cc) = ["cc", "gcc", "clang"].into_iter().find(|cc| {
        Command::new(cc)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    }) else {
        eprintln!("skipping: no C compiler (cc, gcc or clang) found on PATH");
        return;
    };
    // One table row per tensor, from the macros alone, printed as `name offset len`
    // per piece; the sizes are checked against the lengths in C.
    let value: Value = serde_json::from_str(&json_text).unwrap();
    let tensors = value["tensors"].as_array().unwrap();
    let mut program = String::from(
        "#include <stdio.h>\n#include \"plan.h\"\n#include \"plan.h\"\n\
         struct piece_list { const char *name; uint64_t size; int count; \
         uint64_t offset[MEMPLAN_MAX_PIECES]; uint64_t len[MEMPLAN_MAX_PIECES]; \
         uint64_t address[MEMPLAN_MAX_PIECES]; };\n\
         static const struct piece_list tensors[MEMPLAN_TENSOR_COUNT] = {\n",
    );
    let mut expected = String::new();
    for tensor in tensors {
        let name = tensor["name"].as_str().unwrap();
        program.push_str(&format!(
            "  {{ \"{name}\", MEMPLAN_SIZE_{name}, MEMPLAN_PIECES_{name}, \
             MEMPLAN_PIECE_OFFSETS_{name}, MEMPLAN_PIECE_LENGTHS_{name}, \
             MEMPLAN_PIECE_ADDRESSES_{name} }},\n"
        ));
        for (offset, len) in tensor_pieces(tensor) {
            expected.push_str(&format!("{name} {offset} {len} {:#x}\n", 0x1000 + offset));
        }
    }
    program.push_str(
        "};\n\
         int main(void) {\n\
           int i, k;\n\
           for (i = 0; i < MEMPLAN_TENSOR_COUNT; i++) {\n\
             uint64_t sum = 0;\n\
             for (k = 0; k < tensors[i].count; k++) {\n\
               sum += tensors[i].len[k];\n\
               printf(\"%s %llu %llu %#llx\\n\", tensors[i].name,\n\
                 (unsigned long long)tensors[i].offset[k], (unsigned long long)tensors[i].len[k],\n\
                 (unsigned long long)tensors[i].address[k]);\n\
             }\n\
             if (sum != tensors[i].size) return 1;\n\
           }\n\
           return (MEMPLAN_OFFSET_t4 + MEMPLAN_SIZE_t4 == MEMPLAN_TOP_t4\n\
                   && MEMPLAN_TOP_t4 <= MEMPLAN_ARENA_BYTES) ? 0 : 2;\n\
         }\n",
    );
    let source = dir.path().join("run.c");
    std::fs::write(&source, program).unwrap();
    for std in ["-std=c99", "-std=c11"] {
        let exe = dir.path().join("run");
        let out = Command::new(cc)
            .args([std, "-Wall", "-Wextra", "-Werror", "-pedantic"])
            .arg(&source)
            .arg("-o")
            .arg(&exe)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{std}: {}\n{header}",
            String::from_utf8_lossy(&out.stderr)
        );
        let run = Command::new(&exe).output().unwrap();
        assert_eq!(run.status.code(), Some(0), "{std}");
        assert_eq!(String::from_utf8(run.stdout).unwrap(), expected, "{std}");
    }
}
