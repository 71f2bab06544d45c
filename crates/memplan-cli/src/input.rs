//! Reading problems and plans from files, with the file named in every error.

use std::path::Path;

use anyhow::{Context, Result};
use memplan::io::{csv, json};
use memplan::{Plan, Problem};

/// Reads a whole file as UTF-8 text.
pub fn read_text(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read '{}'", path.display()))?;
    String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "'{}' is not UTF-8 text (invalid byte at position {}); memplan reads minimalloc CSV and plan JSON files",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })
}

/// Reads a problem from a minimalloc CSV file.
pub fn read_problem(path: &Path) -> Result<Problem> {
    let text = read_text(path)?;
    Ok(csv::read_problem(&text, &path.display().to_string())?)
}

/// Reads a plan for `problem`: plan JSON when the file starts with `{`, else a solution CSV.
pub fn read_plan(path: &Path, problem: &Problem) -> Result<Plan> {
    let text = read_text(path)?;
    let source = path.display().to_string();
    if text.trim_start().starts_with('{') {
        Ok(json::read_plan_json(&text, &source, problem)?)
    } else {
        Ok(csv::read_solution(&text, &source, problem)?)
    }
}
