//! The `pool` method of memplan: the profile-guided tensor pool for training.
//!
//! Training repeats the same iteration, so one recorded iteration predicts the next:
//!
//! ```text
//!  trace (CSV / bin) ──► Trace ──► train() ──► Plan (JSON) ──► Pool::new ──► alloc / free
//!                      iterations   size classes,             one arena,     plan hit, else
//!                                   cache blocks,             carved into    class block, else
//!                                   schedules                 the blocks     OS (with header)
//! ```
//!
//! * [`trace`]: reading and validating allocation traces, split into iterations.
//! * [`train`]: the plan trainer (size classes of interval `g`, cache blocks, traversal
//!   orders, borrowing from larger classes).
//! * [`pool`]: the runtime pool allocator, thread-safe, correct for any request sequence.
//! * [`online`]: the pool inside a running process: the iteration found from the request
//!   sequence itself, an offset plan trained by memplan's planners, serving that never
//!   hands out a range still in use.
//! * [`settings`]: the preloadable allocator's settings from `MEMPLAN_POOL_*`, bad values named.
//! * [`process`]: the state machine of the preloadable allocator (`memplan-preload`),
//!   generic over the system allocator it falls back to.
//!
//! The method and the measured results are in `doc/pool.md`; the trace formats in
//! `doc/traces.md`.

#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod online;
pub mod pool;
pub mod process;
pub mod settings;
pub mod trace;
pub mod train;

pub use pool::{Pool, PoolError, PoolOptions, PoolStats, Source};
pub use trace::{Event, ForeignFrees, Iteration, Op, ReadOptions, Trace, TraceError};
pub use train::{train, Order, Plan, Stats, TrainError, TrainOptions, DEFAULT_CLASS_INTERVAL};
