//! The threads that help the calling thread through a batch: `threads - 1` of them, kept
//! awake a moment after each batch so that the next one finds them running.
//!
//! Why not the rayon pool: a pool thread asleep between two batches has to be woken, and on a
//! VM the idle vCPU it would run on is halted. The kernel then queues the woken thread behind
//! the calling thread on the caller's own CPU, and it started 0.5 ms after its batch (measured
//! on 4096-text calls of 1 MB, 3.4 ms each at two threads: 1.6 of 2 cores used). A helper of
//! the crew spins for `WARM` after its work, watching for the next batch, and only then parks.
//! OpenMP runtimes do the same between parallel regions (their "blocktime").

use std::any::Any;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::{Duration, Instant};

use super::per_process::{per_process, Slot};
use crate::error::{Error, Result};

/// How long a helper stays awake after its last batch: enough for a caller's work between two
/// batches (a digest of the ids, the next batch's strings), little enough to cost nothing much
/// when batches stop.
const WARM: Duration = Duration::from_millis(2);

/// Where the waits of a batch run: a binding releases the GIL there.
pub trait Release {
    fn run<T: Send>(&self, work: impl FnOnce() -> T + Send) -> T;
}

/// `Release` that keeps what the caller holds: the wait happens as it is.
pub struct Keep;

impl Release for Keep {
    fn run<T: Send>(&self, work: impl FnOnce() -> T + Send) -> T {
        work()
    }
}

/// The helpers of one process, for one thread count.
pub struct Crew {
    shared: Arc<Shared>,
    helpers: usize,
    /// One batch at a time: a second caller meanwhile encodes its batch alone.
    busy: Mutex<()>,
}

struct Shared {
    post: Mutex<Post>,
    /// Parked helpers wait here for a batch.
    posted: Condvar,
    /// The caller waits here for the helpers to leave its batch.
    left: Condvar,
    /// The post's batch number, read by spinning helpers without the lock.
    batch: AtomicU64,
    /// `Post::inside`, read by the spinning caller without the lock (written with it).
    inside: AtomicUsize,
    stop: AtomicBool,
}

/// The work of the current batch, while it lasts.
#[derive(Default)]
struct Post {
    batch: u64,
    work: Option<Work>,
    /// Helpers inside `work`: the caller returns only when none are.
    inside: usize,
    parked: usize,
    panic: Option<Box<dyn Any + Send>>,
}

/// The batch's work with its lifetime erased. Sound because `Crew::run` takes it back out of
/// the post and waits until no helper is inside it before returning, and a helper only enters
/// it by counting itself in, under the lock, while it is posted.
#[derive(Clone, Copy)]
struct Work(*const (dyn Fn() + Sync + 'static));

// SAFETY: the pointee is `Sync` and outlives every use (see `Work`).
unsafe impl Send for Work {}

impl Crew {
    fn start(helpers: usize) -> Result<Crew> {
        let shared = Arc::new(Shared {
            post: Mutex::default(),
            posted: Condvar::new(),
            left: Condvar::new(),
            batch: AtomicU64::new(0),
            inside: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
        });
        let mut crew = Crew {
            shared,
            helpers: 0,
            busy: Mutex::new(()),
        };
        for i in 0..helpers {
            let shared = Arc::clone(&crew.shared);
            // On an error `crew` is dropped, and the helpers started so far stop.
            std::thread::Builder::new()
                .name(format!("data_io-crew-{i}"))
                .spawn(move || shared.serve())
                .map_err(|e| Error::Config(format!("cannot start the encoder's threads: {e}")))?;
            crew.helpers += 1;
        }
        Ok(crew)
    }

    /// How many threads work on a batch: the helpers and the caller.
    pub fn threads(&self) -> usize {
        self.helpers + 1
    }

    /// Run `work` on every helper while the calling thread runs `caller`, then wait, in
    /// `release`, until the helpers have left it; a panic in either reaches the caller after
    /// the wait. `caller` must do the work itself too (call `work` until nothing is left): when
    /// another batch holds the crew, it is run alone.
    pub fn run<R>(
        &self,
        work: &(dyn Fn() + Sync),
        caller: impl FnOnce() -> R,
        release: &impl Release,
    ) -> R {
        let _turn = match self.busy.try_lock() {
            Ok(turn) => turn,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return caller(),
        };
        {
            // SAFETY: only the lifetime is erased; see `Work`.
            let erased: *const (dyn Fn() + Sync + 'static) =
                unsafe { std::mem::transmute(work as *const (dyn Fn() + Sync)) };
            let mut post = self.shared.lock();
            post.batch += 1;
            post.work = Some(Work(erased));
            self.shared.batch.store(post.batch, Ordering::Release);
            if post.parked > 0 {
                self.shared.posted.notify_all();
            }
        }
        let mine = catch_unwind(AssertUnwindSafe(caller));
        let theirs = release.run(|| {
            self.shared.lock().work = None;
            // The helpers still inside end within a chunk: the caller watches for that rather
            // than sleeping, since a sleeping caller, woken by the last helper, started again
            // only after its vCPU was (a halted vCPU takes tens of microseconds).
            spin_while(|| self.shared.inside.load(Ordering::Acquire) > 0);
            let mut post = self.shared.lock();
            while post.inside > 0 {
                post = self
                    .shared
                    .left
                    .wait(post)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            post.panic.take().map(SendPanic)
        });
        match (mine, theirs) {
            (Err(panic), _) => resume_unwind(panic),
            (Ok(_), Some(SendPanic(panic))) => resume_unwind(panic),
            (Ok(result), None) => result,
        }
    }
}

/// A helper's panic carried out of the wait (the payload is `Send`; the wrapper says so to the
/// closure's bounds).
struct SendPanic(Box<dyn Any + Send>);

impl Drop for Crew {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        let _post = self.shared.lock();
        self.shared.posted.notify_all();
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Post> {
        self.post.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A helper's life: wait for a batch (spinning for `WARM`, then parked), work on it, and
    /// again, until the crew is dropped.
    fn serve(&self) {
        let mut seen = 0;
        loop {
            spin_while(|| {
                self.batch.load(Ordering::Acquire) == seen && !self.stop.load(Ordering::Acquire)
            });
            let mut post = sleep_while(
                self.lock(),
                &self.posted,
                |post| post.batch == seen && !self.stop.load(Ordering::Acquire),
                |post| &mut post.parked,
            );
            if self.stop.load(Ordering::Acquire) {
                return;
            }
            seen = post.batch;
            let Some(work) = post.work else { continue }; // over before this helper came
            post.inside += 1;
            self.inside.store(post.inside, Ordering::Release);
            drop(post);
            // SAFETY: counted inside while posted; the caller waits for the count (see `Work`).
            let outcome = catch_unwind(AssertUnwindSafe(|| unsafe { (*work.0)() }));
            let mut post = self.lock();
            post.inside -= 1;
            self.inside.store(post.inside, Ordering::Release);
            if let Err(panic) = outcome {
                post.panic.get_or_insert(panic);
            }
            if post.inside == 0 {
                self.left.notify_all();
            }
        }
    }
}

/// `RAYON_NUM_THREADS` as rayon reads it: a positive count, or 0 for every core. A value that
/// is no count (`two`, `-1`) is every core, as rayon has it, said once on stderr: a user who
/// set it meant a number and would not know otherwise why every core is busy.
pub fn requested_threads() -> usize {
    let Ok(value) = std::env::var("RAYON_NUM_THREADS") else {
        return 0;
    };
    value.trim().parse::<usize>().unwrap_or_else(|_| {
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            eprintln!(
                "data_io: RAYON_NUM_THREADS={value:?} is not a number of threads; using every \
                 core (set a count, or 0 for every core)"
            );
        });
        0
    })
}

/// Spin while `waiting` says so, for `WARM` at most; another thread that wants this CPU gets
/// it meanwhile.
pub fn spin_while(waiting: impl Fn() -> bool) {
    let until = Instant::now() + WARM;
    while waiting() && Instant::now() < until {
        for _ in 0..32 {
            std::hint::spin_loop();
        }
        std::thread::yield_now();
    }
}

/// Sleep on `condvar` while `waiting` says so, counted meanwhile in `sleepers` (so that whoever
/// changes the state wakes the condvar only when someone sleeps on it).
pub fn sleep_while<'a, T>(
    mut guard: MutexGuard<'a, T>,
    condvar: &Condvar,
    waiting: impl Fn(&T) -> bool,
    sleepers: impl Fn(&mut T) -> &mut usize,
) -> MutexGuard<'a, T> {
    while waiting(&guard) {
        *sleepers(&mut guard) += 1;
        guard = condvar.wait(guard).unwrap_or_else(PoisonError::into_inner);
        *sleepers(&mut guard) -= 1;
    }
    guard
}

/// This process's crew for `RAYON_NUM_THREADS` threads in all (unset or 0: every core), started
/// on first use and kept (`per_process`); the variable is read at every call, like
/// `process_pool`.
pub fn process_crew() -> Result<Arc<Crew>> {
    static CREW: Slot<Crew> = Mutex::new(None);
    let threads = requested_threads();
    per_process(&CREW, threads, || {
        let all = if threads == 0 {
            std::thread::available_parallelism().map_or(1, usize::from)
        } else {
            threads
        };
        Crew::start(all.saturating_sub(1))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn every_thread_of_the_crew_and_the_caller_share_the_work() {
        let crew = Crew::start(3).expect("starts");
        for round in 0..200 {
            let next = AtomicUsize::new(0);
            let done: Vec<AtomicUsize> = (0..1000).map(|_| AtomicUsize::new(0)).collect();
            let work = || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(slot) = done.get(i) else { break };
                slot.fetch_add(1, Ordering::Relaxed);
            };
            let result = crew.run(
                &work,
                || {
                    work();
                    round
                },
                &Keep,
            );
            assert_eq!(result, round);
            assert!(
                done.iter().all(|d| d.load(Ordering::Relaxed) == 1),
                "each item once"
            );
            if round % 50 == 0 {
                // Long enough for the helpers to park: the next batch wakes them.
                std::thread::sleep(WARM * 3);
            }
        }
    }

    #[test]
    fn a_helpers_panic_reaches_the_caller_and_the_crew_goes_on() {
        let crew = Crew::start(1).expect("starts");
        let caller = std::thread::current().id();
        let work = move || assert_eq!(std::thread::current().id(), caller, "a helper panics");
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            // The caller waits long enough for the helper to enter (it may also miss the batch).
            crew.run(
                &work,
                || std::thread::sleep(Duration::from_millis(50)),
                &Keep,
            )
        }));
        assert!(
            outcome.is_err(),
            "the helper's panic is carried to the caller"
        );
        let again = crew.run(&|| {}, || 7, &Keep);
        assert_eq!(again, 7);
    }

    #[test]
    fn a_second_caller_meanwhile_does_without_the_crew() {
        let crew = Crew::start(1).expect("starts");
        let helped = AtomicUsize::new(0);
        let count = || {
            helped.fetch_add(1, Ordering::Relaxed);
        };
        // The inner batch runs while the outer one holds the crew: its caller alone does it.
        let inner = crew.run(&|| {}, || crew.run(&count, || 1, &Keep), &Keep);
        assert_eq!(inner, 1);
        assert_eq!(
            helped.load(Ordering::Relaxed),
            0,
            "no helper entered the inner batch"
        );
    }
}
