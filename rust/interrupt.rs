//! Ctrl-C during a long call (`tokenize`, `train-tokenizer`).
//!
//! Python notices a signal only when it runs Python code, and a call into the core runs
//! without the GIL for minutes or hours. The bindings run such a call on a thread of its own
//! and ask Python for signals every tenth of a second meanwhile; on Ctrl-C they set this flag,
//! which the long loops read between units of work (a batch of rows, a file, a round of
//! merges), stop, and leave only what a killed run leaves: temporaries the next run removes.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Error, Result};

static STOP: AtomicBool = AtomicBool::new(false);

/// Ask the call in progress to stop (the bindings, on Ctrl-C), or clear the request after it.
/// One flag for the process: a Ctrl-C stops every call in progress, as it stops the process.
pub fn set(stop: bool) {
    STOP.store(stop, Ordering::Relaxed);
}

/// `Err` once a stop was asked for: for the loops to return with `?`.
pub fn check() -> Result<()> {
    check_flag(&STOP)
}

fn check_flag(flag: &AtomicBool) -> Result<()> {
    if flag.load(Ordering::Relaxed) {
        return Err(Error::Output(
            "stopped by Ctrl-C; run the same command again to finish".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_seen_by_check_until_cleared() {
        // A flag of its own: the process-wide one would stop the tests running beside it.
        let flag = AtomicBool::new(false);
        assert!(check_flag(&flag).is_ok());
        flag.store(true, Ordering::Relaxed);
        let message = check_flag(&flag).expect_err("stopped").to_string();
        assert!(message.starts_with("stopped by Ctrl-C"), "{message}");
        flag.store(false, Ordering::Relaxed);
        assert!(check_flag(&flag).is_ok());
    }
}
