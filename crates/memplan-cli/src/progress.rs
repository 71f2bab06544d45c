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
