//! Every `unsafe` block of the preloadable pool: the exported allocation functions, the
//! system allocator found with `dlsym(RTLD_NEXT, …)`, the arena's `mmap`, the lock around
//! the pool, fork and exit handlers, and the global allocator Rust's own code (the
//! planner, the training thread) uses, which calls the system allocator directly so that
//! nothing recurses into the exported `malloc`.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::{Cell, UnsafeCell};
use std::ffi::{c_int, c_void, CStr};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};

use memplan_pool::online::Method;
use memplan_pool::process::{Config, Pool, System};

type MallocFn = unsafe extern "C" fn(usize) -> *mut c_void;
type FreeFn = unsafe extern "C" fn(*mut c_void);
type CallocFn = unsafe extern "C" fn(usize, usize) -> *mut c_void;
type ReallocFn = unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void;
type MemalignFn = unsafe extern "C" fn(usize, usize) -> *mut c_void;
type UsableFn = unsafe extern "C" fn(*mut c_void) -> usize;

/// The system allocator's functions (0 until resolved).
static REAL_MALLOC: AtomicUsize = AtomicUsize::new(0);
static REAL_FREE: AtomicUsize = AtomicUsize::new(0);
static REAL_CALLOC: AtomicUsize = AtomicUsize::new(0);
static REAL_REALLOC: AtomicUsize = AtomicUsize::new(0);
static REAL_MEMALIGN: AtomicUsize = AtomicUsize::new(0);
static REAL_USABLE: AtomicUsize = AtomicUsize::new(0);
/// glibc's `malloc_trim`, when the system allocator has one (0 otherwise).
static REAL_TRIM: AtomicUsize = AtomicUsize::new(0);
/// glibc's `mallopt`, when the system allocator has one (0 otherwise).
static REAL_MALLOPT: AtomicUsize = AtomicUsize::new(0);

/// 0: not started, 1: resolving the system's functions, 2: ready.
static STATE: AtomicU8 = AtomicU8::new(0);

/// Memory handed out while `dlsym` itself allocates (glibc's `dlsym` may call `calloc`),
/// before the system's functions are known. Never freed.
const BOOTSTRAP_BYTES: usize = 64 << 10;
#[repr(C, align(64))]
struct Bootstrap(UnsafeCell<[u8; BOOTSTRAP_BYTES]>);
// SAFETY: the buffer is only handed out in disjoint pieces, claimed with an atomic bump.
unsafe impl Sync for Bootstrap {}
static BOOTSTRAP: Bootstrap = Bootstrap(UnsafeCell::new([0; BOOTSTRAP_BYTES]));
static BOOTSTRAP_USED: AtomicUsize = AtomicUsize::new(0);

fn bootstrap_alloc(size: usize, align: usize) -> *mut c_void {
    let align = align.max(16);
    let mut used = BOOTSTRAP_USED.load(Ordering::Relaxed);
    loop {
        let start = used.next_multiple_of(align);
        let Some(end) = start.checked_add(size).filter(|&e| e <= BOOTSTRAP_BYTES) else {
            return ptr::null_mut();
        };
        match BOOTSTRAP_USED.compare_exchange(used, end, Ordering::AcqRel, Ordering::Relaxed) {
            // SAFETY: `start + size <= BOOTSTRAP_BYTES`, and the range was claimed by the
            // exchange above, so no other caller gets it.
            Ok(_) => return unsafe { BOOTSTRAP.0.get().cast::<u8>().add(start).cast() },
            Err(now) => used = now,
        }
    }
}

fn in_bootstrap(p: *mut c_void) -> bool {
    let base = BOOTSTRAP.0.get() as usize;
    (base..base + BOOTSTRAP_BYTES).contains(&(p as usize))
}

/// Resolves the system allocator's functions once.
fn init() {
    if STATE.load(Ordering::Acquire) == 2 {
        return;
    }
    if STATE
        .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        // Another thread is resolving (or this one, from inside dlsym): the caller uses
        // the bootstrap buffer until STATE is 2.
        return;
    }
    let resolve = |name: &CStr, slot: &AtomicUsize| {
        // SAFETY: `name` is a NUL-terminated symbol name; RTLD_NEXT asks for the next
        // definition after this library, i.e. the system allocator's.
        let f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
        slot.store(f as usize, Ordering::Release);
    };
    resolve(c"malloc", &REAL_MALLOC);
    resolve(c"free", &REAL_FREE);
    resolve(c"calloc", &REAL_CALLOC);
    resolve(c"realloc", &REAL_REALLOC);
    resolve(c"memalign", &REAL_MEMALIGN);
    resolve(c"malloc_usable_size", &REAL_USABLE);
    resolve(c"malloc_trim", &REAL_TRIM);
    resolve(c"mallopt", &REAL_MALLOPT);
    STATE.store(2, Ordering::Release);
    setup_pool();
}

fn ready() -> bool {
    if STATE.load(Ordering::Acquire) != 2 {
        init();
    }
    STATE.load(Ordering::Acquire) == 2 && REAL_MALLOC.load(Ordering::Relaxed) != 0
}

fn real_malloc(size: usize) -> *mut c_void {
    if !ready() {
        return bootstrap_alloc(size, 16);
    }
    // SAFETY: REAL_MALLOC holds the system's `malloc` (checked non-zero by `ready`).
    unsafe { std::mem::transmute::<usize, MallocFn>(REAL_MALLOC.load(Ordering::Relaxed))(size) }
}

fn real_calloc(n: usize, size: usize) -> *mut c_void {
    if !ready() {
        // The bootstrap buffer is zeroed and never reused.
        return n
            .checked_mul(size)
            .map_or(ptr::null_mut(), |b| bootstrap_alloc(b, 16));
    }
    // SAFETY: REAL_CALLOC holds the system's `calloc`.
    unsafe { std::mem::transmute::<usize, CallocFn>(REAL_CALLOC.load(Ordering::Relaxed))(n, size) }
}

fn real_free(p: *mut c_void) {
    if p.is_null() || in_bootstrap(p) || REAL_FREE.load(Ordering::Relaxed) == 0 {
        return;
    }
    // SAFETY: `p` came from the system allocator (not the bootstrap buffer, not an arena).
    unsafe { std::mem::transmute::<usize, FreeFn>(REAL_FREE.load(Ordering::Relaxed))(p) }
}

fn real_realloc(p: *mut c_void, size: usize) -> *mut c_void {
    if in_bootstrap(p) || !ready() {
        let new = real_malloc(size);
        if !new.is_null() && !p.is_null() {
            let base = BOOTSTRAP.0.get() as usize;
            let old = (base + BOOTSTRAP_BYTES).saturating_sub(p as usize);
            // SAFETY: both ranges are valid for `min(old, size)` bytes and distinct blocks.
            unsafe { ptr::copy_nonoverlapping(p.cast::<u8>(), new.cast::<u8>(), old.min(size)) };
        }
        return new;
    }
    // SAFETY: REAL_REALLOC holds the system's `realloc`; `p` is the system's or null.
    unsafe {
        std::mem::transmute::<usize, ReallocFn>(REAL_REALLOC.load(Ordering::Relaxed))(p, size)
    }
}

fn real_memalign(align: usize, size: usize) -> *mut c_void {
    if !ready() {
        return bootstrap_alloc(size, align);
    }
    // SAFETY: REAL_MEMALIGN holds the system's `memalign`.
    unsafe {
        std::mem::transmute::<usize, MemalignFn>(REAL_MEMALIGN.load(Ordering::Relaxed))(align, size)
    }
}

fn real_usable(p: *mut c_void) -> usize {
    if p.is_null() || in_bootstrap(p) || !ready() {
        return 0;
    }
    // SAFETY: REAL_USABLE holds the system's `malloc_usable_size`; `p` is the system's.
    unsafe { std::mem::transmute::<usize, UsableFn>(REAL_USABLE.load(Ordering::Relaxed))(p) }
}

/// The allocator of this library's own Rust code: the system's, directly.
struct Real;

// SAFETY: forwards to the system allocator, which returns blocks of at least `size` bytes
// aligned as asked (memalign for alignments above malloc's 16).
unsafe impl GlobalAlloc for Real {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= 16 {
            real_malloc(layout.size()).cast()
        } else {
            real_memalign(layout.align(), layout.size()).cast()
        }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= 16 {
            real_calloc(1, layout.size()).cast()
        } else {
            let p = real_memalign(layout.align(), layout.size()).cast::<u8>();
            if !p.is_null() {
                // SAFETY: `p` is a fresh block of `layout.size()` bytes.
                unsafe { ptr::write_bytes(p, 0, layout.size()) };
            }
            p
        }
    }
    unsafe fn dealloc(&self, p: *mut u8, _layout: Layout) {
        real_free(p.cast());
    }
    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.align() <= 16 {
            return real_realloc(p.cast(), new_size).cast();
        }
        let new = real_memalign(layout.align(), new_size).cast::<u8>();
        if !new.is_null() {
            // SAFETY: distinct blocks, both valid for the smaller size.
            unsafe { ptr::copy_nonoverlapping(p, new, layout.size().min(new_size)) };
            real_free(p.cast());
        }
        new
    }
}

#[global_allocator]
static GLOBAL: Real = Real;

/// The system as the pool sees it.
struct RealSystem;

impl System for RealSystem {
    fn alloc(&self, size: usize, align: usize) -> usize {
        if align <= 16 {
            real_malloc(size) as usize
        } else {
            real_memalign(align, size) as usize
        }
    }
    fn free(&self, addr: usize) {
        real_free(addr as *mut c_void);
    }
    fn map(&self, len: usize) -> usize {
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            0
        } else {
            p as usize
        }
    }
    fn unmap(&self, addr: usize, len: usize) {
        // SAFETY: `addr..addr+len` is a whole mapping made by `map`, with no live block.
        unsafe { libc::munmap(addr as *mut c_void, len) };
    }
    fn release(&self, addr: usize, len: usize) {
        // SAFETY: `addr..addr+len` is a page-aligned part of an arena mapping holding no
        // live block; MADV_DONTNEED drops its pages, which read as zeros if touched again.
        unsafe { libc::madvise(addr as *mut c_void, len, libc::MADV_DONTNEED) };
    }
    fn trim(&self) {
        let f = REAL_TRIM.load(Ordering::Relaxed);
        if f != 0 {
            // SAFETY: REAL_TRIM holds the system's `int malloc_trim(size_t pad)`.
            unsafe { std::mem::transmute::<usize, unsafe extern "C" fn(usize) -> c_int>(f)(0) };
        }
    }
}

/// The pool behind a spin lock that fork handlers can hold across `fork`.
struct Locked {
    busy: AtomicBool,
    pool: UnsafeCell<Option<Pool<RealSystem>>>,
}

// SAFETY: `pool` is only touched by the thread that set `busy` (see `with_pool`).
unsafe impl Sync for Locked {}

static POOL: Locked = Locked {
    busy: AtomicBool::new(false),
    pool: UnsafeCell::new(None),
};

/// Requests at least this large go to the pool (0: pool off or not set up yet).
static THRESHOLD: AtomicUsize = AtomicUsize::new(0);
/// Lowest and highest address any arena ever covered (a cheap test before the lock).
static ARENA_LO: AtomicUsize = AtomicUsize::new(usize::MAX);
static ARENA_HI: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread is inside the pool (re-entry goes to the system).
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

fn lock() {
    while POOL
        .busy
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        std::hint::spin_loop();
    }
}

fn unlock() {
    POOL.busy.store(false, Ordering::Release);
}

/// Runs `f` on the pool under the lock, unless this thread is already inside it.
fn with_pool<T>(f: impl FnOnce(&mut Pool<RealSystem>) -> T) -> Option<T> {
    if INSIDE.try_with(Cell::get).unwrap_or(true) {
        return None;
    }
    let _ = INSIDE.try_with(|i| i.set(true));
    lock();
    // SAFETY: the lock is held: no other thread touches the pool until `unlock`.
    let result = unsafe { (*POOL.pool.get()).as_mut() }.map(f);
    unlock();
    let _ = INSIDE.try_with(|i| i.set(false));
    result
}

fn note_arena(addr: usize, size: usize) {
    ARENA_LO.fetch_min(addr, Ordering::Relaxed);
    ARENA_HI.fetch_max(addr + size, Ordering::Relaxed);
}

fn maybe_arena(addr: usize) -> bool {
    addr >= ARENA_LO.load(Ordering::Relaxed) && addr < ARENA_HI.load(Ordering::Relaxed)
}

fn env_flag(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| v != "0" && v != "off" && !v.is_empty())
}

fn stderr_line(text: &str) {
    let line = format!("{text}\n");
    // SAFETY: writes `line`'s bytes to file descriptor 2.
    unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
}

fn setup_pool() {
    if std::env::var_os("MEMPLAN_POOL").is_some_and(|v| v == "0" || v == "off") {
        return;
    }
    let mut config = Config::default();
    if let Some(t) = std::env::var("MEMPLAN_POOL_THRESHOLD")
        .ok()
        .and_then(|t| t.parse().ok())
    {
        config.threshold = t;
    }
    if let Ok(p) = std::env::var("MEMPLAN_POOL_PLANNER") {
        config.method = Method::Offsets(p);
    }
    if let Ok(text) = std::env::var("MEMPLAN_POOL_PLAN") {
        match Method::parse(&text) {
            Ok(method) => config.method = method,
            Err(e) => {
                stderr_line(&format!(
                    "memplan pool: MEMPLAN_POOL_PLAN: {e}; the pool is off"
                ));
                return;
            }
        }
    }
    let unplanned = std::env::var("MEMPLAN_POOL_UNPLANNED").unwrap_or_default();
    match unplanned.as_str() {
        "" | "mmap" => map_unplanned(config.threshold),
        "heap" => {}
        other => {
            stderr_line(&format!(
                "memplan pool: MEMPLAN_POOL_UNPLANNED: `{other}` is neither `mmap` nor `heap`; the pool is off"
            ));
            return;
        }
    }
    let mut pool = Pool::new(RealSystem, config);
    if env_flag("MEMPLAN_POOL_LOG") {
        pool.log = Some(stderr_line);
    }
    let threshold = pool.threshold().max(1);
    lock();
    // SAFETY: the lock is held; the pool is set once.
    unsafe { *POOL.pool.get() = Some(pool) };
    unlock();
    THRESHOLD.store(threshold, Ordering::Release);
    // SAFETY: registering handlers with no arguments, defined below as `extern "C"`.
    unsafe {
        libc::pthread_atfork(Some(fork_prepare), Some(fork_parent), Some(fork_child));
        if env_flag("MEMPLAN_POOL_SUMMARY") {
            libc::atexit(summary_at_exit);
        }
    }
}

/// Has the system allocator map every request of at least `threshold` bytes on its own
/// and unmap it when freed (glibc: `mallopt(M_MMAP_THRESHOLD)`, which also stops glibc
/// from raising the threshold by itself), so that the large requests the pool leaves to
/// it (learning iterations, misses) hold exactly their own pages, never a heap
/// fragmented around them. Nothing happens under an allocator without `mallopt`.
fn map_unplanned(threshold: usize) {
    const M_MMAP_THRESHOLD: c_int = -3;
    let f = REAL_MALLOPT.load(Ordering::Relaxed);
    let Ok(value) = c_int::try_from(threshold) else {
        return;
    };
    if f != 0 {
        // SAFETY: REAL_MALLOPT holds the system's `int mallopt(int param, int value)`.
        unsafe {
            std::mem::transmute::<usize, unsafe extern "C" fn(c_int, c_int) -> c_int>(f)(
                M_MMAP_THRESHOLD,
                value,
            )
        };
    }
}

extern "C" fn fork_prepare() {
    lock();
}

extern "C" fn fork_parent() {
    unlock();
}

extern "C" fn fork_child() {
    // The child has one thread and a consistent pool (the parent held the lock).
    unlock();
}

extern "C" fn summary_at_exit() {
    if let Some(text) = with_pool(|p| p.summary()) {
        let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: getrusage fills the struct it is given.
        let faults = if unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) } == 0 {
            // SAFETY: initialised by the successful call above.
            unsafe { usage.assume_init() }.ru_minflt
        } else {
            -1
        };
        stderr_line(&format!("{text}; process minor faults {faults}"));
    }
}

fn large(size: usize) -> bool {
    let t = THRESHOLD.load(Ordering::Relaxed);
    t != 0 && size >= t
}

fn pool_alloc(size: usize, align: usize) -> Option<*mut c_void> {
    let addr = with_pool(|p| {
        let a = p.alloc(size, align);
        (a, p.owns(a))
    })?;
    if addr.1 {
        note_arena(addr.0, size);
    }
    Some(addr.0 as *mut c_void)
}

/// Frees `p` if it is the pool's (or a large block it records); false otherwise.
fn pool_free(p: *mut c_void) -> bool {
    let addr = p as usize;
    let candidate =
        maybe_arena(addr) || (THRESHOLD.load(Ordering::Relaxed) != 0 && large(real_usable(p)));
    if !candidate {
        return false;
    }
    with_pool(|pool| pool.free(addr)).unwrap_or(false)
}

fn pool_usable(p: *mut c_void) -> Option<usize> {
    if !maybe_arena(p as usize) {
        return None;
    }
    with_pool(|pool| pool.usable_size(p as usize)).flatten()
}

fn alloc_aligned(align: usize, size: usize) -> *mut c_void {
    if large(size) {
        if let Some(p) = pool_alloc(size, align) {
            return p;
        }
    }
    if align <= 16 {
        real_malloc(size)
    } else {
        real_memalign(align, size)
    }
}

/// `malloc`.
///
/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn malloc(size: usize) -> *mut c_void {
    alloc_aligned(16, size)
}

/// `free`.
///
/// # Safety
/// As the C function: `p` is null or a live block from this allocator.
#[no_mangle]
pub unsafe extern "C" fn free(p: *mut c_void) {
    if p.is_null() || in_bootstrap(p) {
        return;
    }
    if !pool_free(p) {
        real_free(p);
    }
}

/// `calloc`.
///
/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn calloc(n: usize, size: usize) -> *mut c_void {
    let Some(bytes) = n.checked_mul(size) else {
        return ptr::null_mut();
    };
    if large(bytes) {
        if let Some(p) = pool_alloc(bytes, 16) {
            if !p.is_null() {
                // SAFETY: a fresh block of `bytes` bytes (an arena range or the system's).
                unsafe { ptr::write_bytes(p.cast::<u8>(), 0, bytes) };
            }
            return p;
        }
    }
    real_calloc(n, size)
}

/// `realloc`.
///
/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    if p.is_null() {
        return alloc_aligned(16, size);
    }
    if in_bootstrap(p) {
        return real_realloc(p, size);
    }
    let ours = pool_usable(p);
    let old = ours.unwrap_or_else(|| real_usable(p));
    if ours.is_none() && !large(size) && !large(old) {
        return real_realloc(p, size);
    }
    if size == 0 {
        // SAFETY: `p` is a live block.
        unsafe { free(p) };
        return ptr::null_mut();
    }
    let new = alloc_aligned(16, size);
    if !new.is_null() {
        // SAFETY: distinct live blocks, valid for `min(old, size)` bytes.
        unsafe { ptr::copy_nonoverlapping(p.cast::<u8>(), new.cast::<u8>(), old.min(size)) };
        // SAFETY: `p` is a live block, freed once.
        unsafe { free(p) };
    }
    new
}

/// `posix_memalign`.
///
/// # Safety
/// As the C function: `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int {
    if !align.is_power_of_two() || align % std::mem::size_of::<usize>() != 0 {
        return libc::EINVAL;
    }
    let p = alloc_aligned(align, size);
    if p.is_null() && size != 0 {
        return libc::ENOMEM;
    }
    // SAFETY: the caller passes a valid pointer.
    unsafe { *out = p };
    0
}

/// `aligned_alloc`.
///
/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    if !align.is_power_of_two() {
        return ptr::null_mut();
    }
    alloc_aligned(align, size)
}

/// `memalign`.
///
/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
    if !align.is_power_of_two() {
        return ptr::null_mut();
    }
    alloc_aligned(align, size)
}

/// `valloc`.
///
/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn valloc(size: usize) -> *mut c_void {
    alloc_aligned(4096, size)
}

/// `pvalloc`.
///
/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn pvalloc(size: usize) -> *mut c_void {
    alloc_aligned(4096, size.next_multiple_of(4096))
}

/// `malloc_usable_size`.
///
/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn malloc_usable_size(p: *mut c_void) -> usize {
    pool_usable(p).unwrap_or_else(|| real_usable(p))
}

/// `memplan.pool.step()`: marks the end of a training iteration.
#[no_mangle]
pub extern "C" fn memplan_pool_step() {
    with_pool(|p| p.mark());
}

/// 1 when the pool is loaded and on (for `memplan.pool.active()`).
#[no_mangle]
pub extern "C" fn memplan_pool_active() -> c_int {
    ready();
    c_int::from(THRESHOLD.load(Ordering::Relaxed) != 0)
}

/// The summary line into `buf` (NUL-terminated, truncated to `len`); returns its length.
///
/// # Safety
/// `buf` is valid for `len` bytes of writes.
#[no_mangle]
pub unsafe extern "C" fn memplan_pool_summary(buf: *mut u8, len: usize) -> usize {
    let text = with_pool(|p| p.summary()).unwrap_or_default();
    if len > 0 && !buf.is_null() {
        let n = text.len().min(len - 1);
        // SAFETY: the caller gives `len` writable bytes; `n + 1 <= len`.
        unsafe {
            ptr::copy_nonoverlapping(text.as_ptr(), buf, n);
            *buf.add(n) = 0;
        }
    }
    text.len()
}
