//! Every `unsafe` block of the preloadable pool: the exported allocation functions, the
//! system allocator found with `dlsym(RTLD_NEXT, …)`, the arena's `mmap`, the lock around
//! the pool, fork and exit handlers, and the global allocator Rust's own code (the
//! planner, the training thread) uses, which calls the system allocator directly so that
//! nothing recurses into the exported `malloc`.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::{Cell, UnsafeCell};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::fmt::Write as _;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};

use memplan_pool::process::{Pool, System};
use memplan_pool::settings::{self, Unplanned};

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
static REAL_ALIGNED_ALLOC: AtomicUsize = AtomicUsize::new(0);
/// glibc's `malloc_trim`, when the system allocator has one (0 otherwise).
static REAL_TRIM: AtomicUsize = AtomicUsize::new(0);
/// glibc's `mallopt`, when the system allocator has one (0 otherwise).
static REAL_MALLOPT: AtomicUsize = AtomicUsize::new(0);

/// 0: not started, 1: resolving the system's functions, 2: ready.
static STATE: AtomicU8 = AtomicU8::new(0);

/// The page size `valloc` and `pvalloc` align to.
const PAGE: usize = 4096;

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
    resolve(c"aligned_alloc", &REAL_ALIGNED_ALLOC);
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

/// The system's `aligned_alloc` (`memalign` where it has none).
fn real_aligned_alloc(align: usize, size: usize) -> *mut c_void {
    let f = REAL_ALIGNED_ALLOC.load(Ordering::Relaxed);
    if !ready() || f == 0 {
        return real_memalign(align, size);
    }
    // SAFETY: REAL_ALIGNED_ALLOC holds the system's `aligned_alloc`.
    unsafe { std::mem::transmute::<usize, MemalignFn>(f)(align, size) }
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
    fn page_exact(&self, on: bool, largest: usize) {
        if on {
            map_unplanned(THRESHOLD.load(Ordering::Relaxed));
        } else {
            relax_unplanned(largest);
        }
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
/// The pool stepped aside (it cannot plan this program): new requests go to the system
/// without the lock; only frees of arena blocks still reach the pool.
static ASIDE: AtomicBool = AtomicBool::new(false);
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
    ARENA_HI.fetch_max(addr.saturating_add(size), Ordering::Relaxed);
}

fn maybe_arena(addr: usize) -> bool {
    addr >= ARENA_LO.load(Ordering::Relaxed) && addr < ARENA_HI.load(Ordering::Relaxed)
}

/// A line of text on the stack (cut at its capacity), written with one `write(2)`: no
/// allocation, so it is safe inside the allocator.
struct Line {
    buf: [u8; 1024],
    len: usize,
}

impl Line {
    fn new() -> Line {
        Line {
            buf: [0; 1024],
            len: 0,
        }
    }

    /// Writes the line and a newline to file descriptor 2.
    fn emit(mut self) {
        let n = self.len.min(self.buf.len() - 1);
        self.buf[n] = b'\n';
        // SAFETY: `buf` is valid for `n + 1 <= buf.len()` bytes of reads.
        unsafe { libc::write(2, self.buf.as_ptr().cast(), n + 1) };
    }
}

impl std::fmt::Write for Line {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        // One byte is kept for the newline.
        let room = self.buf.len() - 1 - self.len;
        let n = s.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

fn stderr_line(text: &str) {
    let mut line = Line::new();
    let _ = line.write_str(text);
    line.emit();
}

/// The value of the environment variable `name`, without allocating (`getenv`); `None`
/// when unset or not UTF-8.
fn env(name: &str) -> Option<&'static str> {
    let mut cname = [0u8; 64];
    if name.len() >= cname.len() {
        return None;
    }
    cname[..name.len()].copy_from_slice(name.as_bytes());
    // SAFETY: `cname` is NUL-terminated (zeroed past `name`); getenv returns null or a
    // pointer into the environment, which this library never changes.
    let value = unsafe { libc::getenv(cname.as_ptr().cast::<c_char>()) };
    if value.is_null() {
        return None;
    }
    // SAFETY: a non-null `getenv` result is a NUL-terminated string that lives as long as
    // the environment entry (the program is assumed not to unset these variables).
    unsafe { CStr::from_ptr(value) }.to_str().ok()
}

fn setup_pool() {
    // Each bad value is named once, here (this runs once per process), and its default
    // used.
    let settings = settings::from_env(env, |bad| {
        let mut line = Line::new();
        let _ = write!(line, "{bad}");
        line.emit();
    });
    if !settings.on {
        return;
    }
    if settings.unplanned == Unplanned::Mmap {
        map_unplanned(settings.config.threshold);
    }
    let mut pool = Pool::new(RealSystem, settings.config);
    if settings.log {
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
        if settings.summary {
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

/// Undoes [`map_unplanned`] as far as glibc allows (its dynamic threshold cannot be
/// switched on again): the mmap threshold becomes what glibc's dynamic rule would have
/// made it after freeing the largest request seen (at least glibc's default 128 KiB, at
/// most its 32 MiB ceiling), the trim threshold twice that.
fn relax_unplanned(largest: usize) {
    const M_TRIM_THRESHOLD: c_int = -1;
    const M_MMAP_THRESHOLD: c_int = -3;
    let f = REAL_MALLOPT.load(Ordering::Relaxed);
    if f == 0 {
        return;
    }
    let mmap = largest
        .saturating_add(4095)
        .clamp(128 << 10, 32 << 20)
        .next_multiple_of(4096);
    for (param, value) in [(M_MMAP_THRESHOLD, mmap), (M_TRIM_THRESHOLD, 2 * mmap)] {
        let Ok(value) = c_int::try_from(value) else {
            continue;
        };
        // SAFETY: REAL_MALLOPT holds the system's `int mallopt(int param, int value)`.
        unsafe {
            std::mem::transmute::<usize, unsafe extern "C" fn(c_int, c_int) -> c_int>(f)(
                param, value,
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
    // The child has one thread and a consistent pool (the parent held the lock); the
    // parent's training thread is not in it.
    // SAFETY: the lock is held (taken by `fork_prepare`); this is the child's only thread.
    if let Some(pool) = unsafe { (*POOL.pool.get()).as_mut() } {
        pool.after_fork_in_child();
    }
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
    t != 0 && size >= t && !ASIDE.load(Ordering::Relaxed)
}

/// A number that tells this thread apart from the process's other live threads.
fn thread_token() -> usize {
    INSIDE
        .try_with(|inside| ptr::from_ref(inside) as usize)
        .unwrap_or(0)
}

fn pool_alloc(size: usize, align: usize) -> Option<*mut c_void> {
    let thread = thread_token();
    let (addr, owned, aside) = with_pool(|p| {
        let a = p.alloc_from(size, align, thread);
        (a, p.owns(a), p.aside())
    })?;
    if owned {
        note_arena(addr, size);
    }
    if aside {
        ASIDE.store(true, Ordering::Relaxed);
    }
    Some(addr as *mut c_void)
}

/// Frees `p` if it is the pool's (or a large block it records); false otherwise.
fn pool_free(p: *mut c_void) -> bool {
    let addr = p as usize;
    // Once the pool stepped aside, `large` is false (and the system's size is not even
    // asked): only arena blocks reach it.
    let candidate = maybe_arena(addr) || (large(usize::MAX) && large(real_usable(p)));
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

fn set_errno(code: c_int) {
    // SAFETY: `__errno_location` returns this thread's `errno`, valid for a write.
    unsafe { *libc::__errno_location() = code };
}

/// Sizes above this fail with `ENOMEM` at once, as glibc's do (`PTRDIFF_MAX`).
const MAX_SIZE: usize = isize::MAX as usize;

/// `size` bytes aligned to `align` (a power of two): the pool's when planned, else the
/// system's; null with `errno` `ENOMEM` when out of memory.
fn alloc_aligned(align: usize, size: usize) -> *mut c_void {
    if size > MAX_SIZE {
        set_errno(libc::ENOMEM);
        return ptr::null_mut();
    }
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

/// glibc's `memalign` rule: alignments up to 16 are `malloc`'s; larger ones that are no
/// power of two are rounded up to the next; above `SIZE_MAX / 2 + 1`, `EINVAL`.
fn memalign_checked(align: usize, size: usize) -> *mut c_void {
    if align <= 16 {
        return alloc_aligned(16, size);
    }
    match align.checked_next_power_of_two() {
        Some(align) => alloc_aligned(align, size),
        None => {
            set_errno(libc::EINVAL);
            ptr::null_mut()
        }
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
    let Some(bytes) = n.checked_mul(size).filter(|&b| b <= MAX_SIZE) else {
        set_errno(libc::ENOMEM);
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
    if size > MAX_SIZE {
        // As glibc: `p` stays valid and untouched.
        set_errno(libc::ENOMEM);
        return ptr::null_mut();
    }
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

/// `reallocarray`: `realloc(p, n * size)`, or null with `ENOMEM` when the product
/// overflows (`p` untouched).
///
/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn reallocarray(p: *mut c_void, n: usize, size: usize) -> *mut c_void {
    match n.checked_mul(size) {
        // SAFETY: as this function's contract.
        Some(bytes) => unsafe { realloc(p, bytes) },
        None => {
            set_errno(libc::ENOMEM);
            ptr::null_mut()
        }
    }
}

/// `posix_memalign`: `EINVAL` unless `align` is a power of two and a multiple of
/// `sizeof(void *)`; `ENOMEM` (and `*out` untouched) when out of memory.
///
/// # Safety
/// As the C function: `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int {
    if !align.is_power_of_two() || !align.is_multiple_of(std::mem::size_of::<usize>()) {
        return libc::EINVAL;
    }
    let p = alloc_aligned(align.max(16), size);
    if p.is_null() {
        return libc::ENOMEM;
    }
    // SAFETY: the caller passes a valid pointer.
    unsafe { *out = p };
    0
}

/// `aligned_alloc`. An alignment that is no power of two is the system's to judge (glibc
/// 2.36 treats it as `memalign` does, 2.38 refuses it with `EINVAL`): the request goes to
/// the system's own `aligned_alloc`.
///
/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    if align.is_power_of_two() {
        return memalign_checked(align, size);
    }
    real_aligned_alloc(align, size)
}

/// `memalign` (glibc's rule: see [`memalign_checked`]).
///
/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
    memalign_checked(align, size)
}

/// `valloc`.
///
/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn valloc(size: usize) -> *mut c_void {
    alloc_aligned(PAGE, size)
}

/// `pvalloc`: `size` rounded up to whole pages; null with `ENOMEM` when the rounding
/// overflows.
///
/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn pvalloc(size: usize) -> *mut c_void {
    match size.checked_next_multiple_of(PAGE) {
        Some(rounded) => alloc_aligned(PAGE, rounded),
        None => {
            set_errno(libc::ENOMEM);
            ptr::null_mut()
        }
    }
}

/// `malloc_usable_size`.
///
/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn malloc_usable_size(p: *mut c_void) -> usize {
    if p.is_null() {
        return 0;
    }
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
