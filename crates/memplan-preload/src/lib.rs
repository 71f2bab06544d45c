//! `libmemplan_preload.so`: memplan's tensor pool (the `pool` method) inside any process, with
//! one line:
//!
//! ```sh
//! LD_PRELOAD=target/release/libmemplan_preload.so python train.py
//! ```
//!
//! It exports `malloc`, `free`, `calloc`, `realloc`, `reallocarray`, `posix_memalign`,
//! `aligned_alloc`, `memalign`, `valloc`, `pvalloc` and `malloc_usable_size`, each with
//! glibc's NULL and `errno` at its size and alignment edges. Requests below a threshold go
//! straight to the system allocator (the next `malloc` in the link order, found with
//! `dlsym(RTLD_NEXT, …)`). Larger ones drive [`memplan_pool::process::Pool`]: recorded
//! until the request sequence repeats (or `memplan.pool.step()` marks iterations), then a
//! plan is trained on a background thread and later iterations are served from one arena
//! mapped once. Pointers are told apart by address range, never by a header.
//!
//! Environment:
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `MEMPLAN_POOL` | `0`/`off`: pass everything to the system | on |
//! | `MEMPLAN_POOL_THRESHOLD` | bytes from which a request is planned | 65536 |
//! | `MEMPLAN_POOL_PLANNER` | the memplan planner of an iteration | `best-of` |
//! | `MEMPLAN_POOL_PLAN` | `offsets[:PLANNER]` or `size-classes[:G[:ORDER[:packed]]]` | `offsets:best-of` |
//! | `MEMPLAN_POOL_UNPLANNED` | `mmap`: learning page-exact; `heap`: glibc's own policy | `mmap` |
//! | `MEMPLAN_POOL_SUMMARY` | `1`: a summary line on stderr at exit | off |
//! | `MEMPLAN_POOL_LOG` | `1`: a line on stderr at each change of phase | off |
//!
//! A value that is not accepted is named once on stderr (one `write(2)`, no allocation)
//! and the default is used (`memplan_pool::settings`). A program the pool cannot plan
//! (requests from threads interleaving, plans lost at once) makes it step aside after a
//! bounded number of attempts: the system then serves every new request without the lock.
//!
//! All `unsafe` code (the exported functions, `dlsym`, `mmap`, the lock, the allocator
//! Rust itself uses) is in the `sys` module.

mod sys;
