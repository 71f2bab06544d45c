//! Planning time on a long chain: a generated PipeDream profile of `LAYERS` layers in a
//! chain (`Input -> layer1 -> … -> layerN`, 1 ms forward, 2 ms backward, activation
//! sizes cycling over 1, 2, 4 and 8 MB), planned by `PLANNER` (`none`: the timing
//! analysis, the selection and one simulation; `method`: the method with every
//! improvement; `stated`: the method as stated; `lms`; `everything`) at a 5% step-time
//! overhead over a 12 GB/s link. Prints the time of each stage.
//!
//! `cargo run --release -p memplan-swap --example swap_chain [LAYERS] [PLANNER]`
//! (defaults: 10000, method); measure with `/usr/bin/time -v` (see `doc/swap.md`).

use std::fmt::Write;
use std::time::Instant;

use memplan_swap::pipedream::{parse, training_step};
use memplan_swap::planner::{plan, Goal, Improvements, Planner, Setup};
use memplan_swap::rewrite::Reduction;
use memplan_swap::select::{candidates, Params};
use memplan_swap::simulate::{simulate, Machine};
use memplan_swap::timing::analyse;

/// The profile text of a chain of `layers` layers after an `Input` layer.
fn chain(layers: usize) -> String {
    let mut text = String::new();
    let _ = writeln!(text, "node0 -- Input -- forward_compute_time=0.000, backward_compute_time=0.000, activation_size=1000000.000, parameter_size=0.000");
    for i in 1..=layers {
        let mb = 1u64 << (i % 4);
        let _ = writeln!(text, "node{i} -- Conv2d(8, 8) -- forward_compute_time=1.000, backward_compute_time=2.000, activation_size={}.000, parameter_size=1000.000", mb * 1_000_000);
    }
    for i in 1..=layers {
        let _ = writeln!(text, "\tnode{} -- node{i}", i - 1);
    }
    text
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let layers: usize = args.next().map_or(Ok(10_000), |a| a.parse())?;
    let which = args.next().unwrap_or_else(|| "method".into());
    let clock = Instant::now();
    let profile = parse(&chain(layers), "chain")?;
    let graph = training_step(&profile)?.graph;
    println!(
        "chain of {layers} layers: {} nodes, built in {:.3} s",
        graph.nodes().len(),
        clock.elapsed().as_secs_f64()
    );
    let machine = Machine::link(12e6);
    let t = Instant::now();
    let timing = analyse(&graph)?;
    let list = candidates(&graph, &timing, &Params::method(0.0, 0, None));
    println!(
        "timing and selection: {} candidates in {:.3} s",
        list.len(),
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let base = simulate(&graph, &machine)?;
    println!(
        "simulation: peak {} B, step {:.1} ms in {:.3} s",
        base.peak_bytes,
        base.step_ms,
        t.elapsed().as_secs_f64()
    );
    let planner = match which.as_str() {
        "none" => return Ok(()),
        "method" => Planner::Method(Improvements::ALL),
        "stated" => Planner::Method(Improvements::NONE),
        "lms" => Planner::Lms,
        "everything" => Planner::Everything,
        other => return Err(format!("unknown planner '{other}'").into()),
    };
    let setup = Setup {
        machine,
        reduction: Reduction::SWAP,
        goal: Goal::MaxOverhead(0.05),
        th_tts_ms: None,
        th_size_bytes: None,
        max_count: None,
    };
    let t = Instant::now();
    let out = plan(&graph, planner, &setup)?;
    println!(
        "{which}: peak {} B ({:.1}% lower), step {:.1} ms, {} tensors, {} simulations, {} in {:.3} s",
        out.run.peak_bytes,
        100.0 * (1.0 - out.run.peak_bytes as f64 / base.peak_bytes as f64),
        out.run.step_ms,
        out.tensors,
        out.evaluated,
        out.chosen,
        t.elapsed().as_secs_f64()
    );
    Ok(())
}
