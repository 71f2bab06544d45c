//! A spinner on stderr for runs that take more than a moment.

use std::sync::mpsc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How long a run may take before the spinner appears.
const DELAY: Duration = Duration::from_millis(300);

/// Runs `work`; if it takes longer than [`DELAY`], shows a spinner with `message` on
/// stderr (only when stderr is a terminal) until it finishes. Stdout is never touched.
pub fn with_spinner<T: Send>(message: String, work: impl FnOnce() -> T + Send) -> T {
    let (done, finished) = mpsc::channel::<()>();
    std::thread::scope(|scope| {
        scope.spawn(move || {
            if finished.recv_timeout(DELAY) != Err(mpsc::RecvTimeoutError::Timeout) {
                return;
            }
            let spinner = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            spinner.set_style(
                ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            spinner.set_message(message);
            spinner.enable_steady_tick(Duration::from_millis(100));
            let _ = finished.recv();
            spinner.finish_and_clear();
        });
        let result = work();
        let _ = done.send(());
        result
    })
}

/// Runs `work` with a bar on stderr over a time `limit` (only on a terminal, and only once
/// the run has taken [`DELAY`]): `label`, the bar, the time spent and left, and the last
/// message `work` gave through its callback. Silent when stderr is not a terminal.
pub fn with_time_bar<T: Send>(
    label: &str,
    limit: Duration,
    work: impl FnOnce(&(dyn Fn(String) + Sync)) -> T + Send,
) -> T {
    let limit_ms = limit.as_millis().max(1) as u64;
    let bar = ProgressBar::with_draw_target(Some(limit_ms), ProgressDrawTarget::hidden());
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{label} [{{bar:30}}] {{msg}} ({{elapsed}} of {} s)",
            limit.as_secs_f64()
        ))
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    let (done, finished) = mpsc::channel::<()>();
    let started = std::time::Instant::now();
    std::thread::scope(|scope| {
        let shown = &bar;
        scope.spawn(move || {
            if finished.recv_timeout(DELAY) != Err(mpsc::RecvTimeoutError::Timeout) {
                return;
            }
            // Drawn from now on, on a terminal only (indicatif's stderr target hides
            // itself elsewhere).
            shown.set_draw_target(ProgressDrawTarget::stderr());
            loop {
                shown.set_position((started.elapsed().as_millis() as u64).min(limit_ms));
                match finished.recv_timeout(Duration::from_millis(100)) {
                    Err(mpsc::RecvTimeoutError::Timeout) => continue,
                    _ => break,
                }
            }
            shown.finish_and_clear();
        });
        let message = |text: String| bar.set_message(text);
        let result = work(&message);
        let _ = done.send(());
        result
    })
}

/// Runs `work`, which calls its callback once per finished item of `total`, with a bar on
/// stderr (only on a terminal, and only once the run has taken [`DELAY`]): `label`, the
/// bar, the items done and the time left, estimated from the items' pace.
pub fn with_count_bar<T: Send>(
    label: &str,
    total: u64,
    work: impl FnOnce(&(dyn Fn() + Sync)) -> T + Send,
) -> T {
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{label} [{{bar:30}}] {{pos}}/{{len}} ({{elapsed}}, about {{eta}} left)"
        ))
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    let (done, finished) = mpsc::channel::<()>();
    std::thread::scope(|scope| {
        let shown = &bar;
        scope.spawn(move || {
            if finished.recv_timeout(DELAY) != Err(mpsc::RecvTimeoutError::Timeout) {
                return;
            }
            shown.set_draw_target(ProgressDrawTarget::stderr());
            shown.enable_steady_tick(Duration::from_millis(200));
            let _ = finished.recv();
            shown.finish_and_clear();
        });
        let tick = || bar.inc(1);
        let result = work(&tick);
        let _ = done.send(());
        result
    })
}
