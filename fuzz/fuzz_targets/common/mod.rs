//! For the targets whose code under test turns some panics into errors itself
//! (`reader/parquet.rs`'s `contained` around Parquet's plain column readers, `encoder.rs`
//! around `tokenizers`' loader): libfuzzer-sys's own panic hook aborts at every panic, before
//! unwinding, so such a contained panic would still be reported as a crash. Here the hook only
//! records the panic; a panic that escapes the project's API reaches `check`, which prints it
//! (message, place, backtrace) and aborts: a crash, as libFuzzer expects.

// Each target uses some of these: the rest would be dead code in it.
#![allow(dead_code)]

pub mod scratch;

use std::backtrace::Backtrace;
use std::sync::Mutex;

static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);

/// Replace the aborting hook by one that records the panic (call from `fuzz_target!`'s init).
pub fn record_panics() {
    std::panic::set_hook(Box::new(|info| {
        let text = format!("{info}\n{}", Backtrace::force_capture());
        *LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()) = Some(text);
    }));
}

/// Run `body`; a panic out of it is a crash.
pub fn check(body: impl FnOnce()) {
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).is_err() {
        let last = LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()).take();
        eprintln!(
            "panic out of the code under test: {}",
            last.unwrap_or_default()
        );
        std::process::abort();
    }
}
