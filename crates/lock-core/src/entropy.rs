//! Bytes from the OS random generator, fetched a kilobyte at a time.
//!
//! Every acquire needs 24 fresh bytes for its hold. Asking the OS for them
//! one hold at a time costs a system call per acquire (about 300 ns where
//! glibc serves `getrandom` from the kernel, before 2.41), a tenth of a
//! fencing-off acquire's client time. Each thread keeps a pool of bytes
//! the OS gave it and hands each byte out once; the pool is refilled from
//! the OS when it runs dry. The bytes are the OS generator's own: no
//! user-space generator stretches them.
//!
//! A forked child starts with a copy of its parent's pool, and would hand
//! out the same bytes as its parent: two holds with one value, which is two
//! holders of one lock. A fork handler (`pthread_atfork`) counts forks, and a
//! pool filled before the last fork is thrown away unused. A child made by a
//! raw `clone` system call, which runs no fork handler, is not covered; such
//! a child cannot safely run Rust code that allocates either.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

/// How many bytes the OS is asked for at a time: 42 holds' worth. The
/// kernel's cost grows with the bytes (about 2.5 ns a byte here), so a
/// bigger pool saves little more than this one does.
const POOL_BYTES: usize = 1024;

/// How many forks this process (and its parents) has been through, as far
/// as the fork handler saw.
static FORKS: AtomicU64 = AtomicU64::new(0);

/// Bytes the OS gave this thread that no one has used yet.
struct Pool {
    bytes: [u8; POOL_BYTES],
    /// `bytes[next..]` are unused.
    next: usize,
    /// [`FORKS`] when the pool was filled.
    forks: u64,
}

thread_local! {
    static POOL: RefCell<Pool> = const {
        RefCell::new(Pool {
            bytes: [0; POOL_BYTES],
            next: POOL_BYTES,
            forks: 0,
        })
    };
}

/// Fills `out` with bytes from the OS generator that no one else in this
/// process, or any process forked from it, has been given.
pub(crate) fn fill(out: &mut [u8]) -> Result<(), getrandom::Error> {
    // Large requests are not what a hold needs, and not worth a pool's
    // bytes; without a fork handler, no pool is safe to keep.
    if out.len() > POOL_BYTES / 4 || !forks_watched() {
        return getrandom::fill(out);
    }
    POOL.try_with(|pool| pool.borrow_mut().take(out))
        // A thread that is ending has no pool left.
        .unwrap_or_else(|_| getrandom::fill(out))
}

impl Pool {
    fn take(&mut self, out: &mut [u8]) -> Result<(), getrandom::Error> {
        let forks = FORKS.load(Ordering::Acquire);
        if forks != self.forks || self.bytes.len() - self.next < out.len() {
            // Marked empty first, so that a failed fill leaves no byte to
            // hand out twice. The count was read before the fill: a fork
            // during the fill changes it, and the next take fills again.
            self.next = self.bytes.len();
            getrandom::fill(&mut self.bytes)?;
            self.next = 0;
            self.forks = forks;
        }
        let end = self.next + out.len();
        let taken = &mut self.bytes[self.next..end];
        out.copy_from_slice(taken);
        // A copy of this memory (a core dump, a fork) holds no used byte.
        taken.fill(0);
        self.next = end;
        Ok(())
    }
}

/// Whether forks are counted: the fork handler is registered once per
/// process (a child inherits it); `false` if that failed.
#[cfg(unix)]
fn forks_watched() -> bool {
    static WATCHED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WATCHED.get_or_init(|| {
        // SAFETY: `pthread_atfork` only records the handler. The handler
        // runs in the child between `fork` and its return, where only
        // async-signal-safe work is allowed: it does one atomic add.
        #[allow(unsafe_code)]
        let status = unsafe { libc::pthread_atfork(None, None, Some(forked)) };
        status == 0
    })
}

/// No fork on this platform.
#[cfg(not(unix))]
fn forks_watched() -> bool {
    true
}

/// The fork handler, run in the child.
#[cfg(unix)]
extern "C" fn forked() {
    FORKS.fetch_add(1, Ordering::AcqRel);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_handed_out_once() {
        let mut seen = std::collections::HashSet::new();
        // Several pools' worth, in the sizes the holds and owners take.
        for round in 0..600 {
            let mut bytes = [0u8; 24];
            fill(&mut bytes[..8 + round % 17]).expect("os rng");
            assert!(seen.insert(bytes), "the same bytes twice: {bytes:?}");
        }
    }

    #[test]
    fn large_requests_go_to_the_os() {
        let mut first = vec![0u8; POOL_BYTES];
        let mut second = vec![0u8; POOL_BYTES];
        fill(&mut first).expect("os rng");
        fill(&mut second).expect("os rng");
        assert_ne!(first, second);
    }

    #[test]
    fn a_used_byte_is_wiped_from_the_pool() {
        let mut bytes = [0u8; 24];
        fill(&mut bytes).expect("os rng");
        POOL.with(|pool| {
            let pool = pool.borrow();
            assert!(pool.next >= bytes.len());
            assert!(pool.bytes[..pool.next].iter().all(|&byte| byte == 0));
        });
    }

    /// A forked child must not hand out what its parent hands out: with
    /// the pool copied into it, it would, and two processes would make
    /// holds with one value.
    #[cfg(unix)]
    #[test]
    fn a_forked_child_gets_bytes_its_parent_does_not() {
        // A pool with bytes left, in this thread, before the fork.
        let mut warm = [0u8; 24];
        fill(&mut warm).expect("os rng");
        let mut pipe = [0 as libc::c_int; 2];
        // SAFETY: `pipe` writes two descriptors into the array it is given.
        #[allow(unsafe_code)]
        let status = unsafe { libc::pipe(pipe.as_mut_ptr()) };
        assert_eq!(status, 0, "pipe: {}", std::io::Error::last_os_error());
        let [read_end, write_end] = pipe;
        // SAFETY: the child runs async-signal-safe code only until
        // `_exit`: a take from the pool (no allocation, no lock; the OS
        // call if it refills) and a `write`.
        #[allow(unsafe_code)]
        let child = unsafe { libc::fork() };
        assert!(child >= 0, "fork: {}", std::io::Error::last_os_error());
        if child == 0 {
            let mut bytes = [0u8; 24];
            let code = match fill(&mut bytes) {
                // SAFETY: `bytes` is valid for its length.
                #[allow(unsafe_code)]
                Ok(()) => unsafe {
                    let written = libc::write(write_end, bytes.as_ptr().cast(), bytes.len());
                    i32::from(written != 24)
                },
                Err(_) => 2,
            };
            // SAFETY: ends the child without running the parent's
            // destructors or the test harness's code.
            #[allow(unsafe_code)]
            unsafe {
                libc::_exit(code)
            };
        }
        let mut parents = [0u8; 24];
        fill(&mut parents).expect("os rng");
        let mut childs = [0u8; 24];
        // SAFETY: `childs` is valid for its length; the descriptors are
        // this test's own, closed once.
        #[allow(unsafe_code)]
        let (read, exit) = unsafe {
            libc::close(write_end);
            let read = libc::read(read_end, childs.as_mut_ptr().cast(), childs.len());
            libc::close(read_end);
            let mut status = 0;
            libc::waitpid(child, &mut status, 0);
            (read, status)
        };
        assert_eq!(read, 24, "the child sent {read} bytes (exit status {exit})");
        assert_eq!(exit, 0);
        assert_ne!(
            childs, parents,
            "a forked child was given its parent's bytes"
        );
    }
}
