//! One shared object per process and per thread count, for the encoder's threads (the rayon
//! pool, the crew).
//!
//! Keyed by process id: a DataLoader forks its workers, and a forked child inherits the
//! parent's object without its threads, so work handed to it could wait forever. A child makes
//! its own; the parent's is leaked there (its threads do not exist, so there is nothing to stop
//! or join). A new thread count replaces the object: the old one is dropped, its threads end.

use std::sync::{Arc, Mutex, PoisonError};

use crate::error::Result;

/// (process id, threads asked for, the object).
pub type Slot<T> = Mutex<Option<(u32, usize, Arc<T>)>>;

/// The object in `slot` for this process and `threads`, made by `make` when there is none.
pub fn per_process<T>(
    slot: &Slot<T>,
    threads: usize,
    make: impl FnOnce() -> Result<T>,
) -> Result<Arc<T>> {
    let pid = std::process::id();
    let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
    match slot.take() {
        Some((owner, wanted, kept)) if owner == pid && wanted == threads => {
            *slot = Some((owner, wanted, Arc::clone(&kept)));
            return Ok(kept);
        }
        Some((owner, _, replaced)) if owner == pid => drop(replaced),
        Some((_, _, inherited)) => std::mem::forget(inherited),
        None => {}
    }
    let made = Arc::new(make()?);
    *slot = Some((pid, threads, Arc::clone(&made)));
    Ok(made)
}
