//! What every binding shares: the crate's `Error` mapped once onto Python's classes, reports
//! as JSON, and work run without the GIL that a Ctrl-C can stop.

use numpy::PyArray1;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyType;
use serde::Serialize;

use crate::error::Error;
use crate::reader::OnError;

pub(super) fn to_py_err(py: Python<'_>, error: Error) -> PyErr {
    // The kind -> exception class map is written once, in Python (`errors.error_class`).
    let message = error.to_string();
    match py
        .import("data_io.errors")
        .and_then(|m| m.call_method1("error_class", (error.kind().name(),)))
        .and_then(|c| c.cast_into::<PyType>().map_err(PyErr::from))
    {
        Ok(class) => PyErr::from_type(class, message),
        Err(import_error) => import_error,
    }
}

pub(super) fn to_json<T: Serialize>(value: &T) -> PyResult<String> {
    serde_json::to_string(value).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

pub(super) fn parse_on_error(value: &str) -> Result<OnError, Error> {
    match value {
        "fail" => Ok(OnError::Fail),
        "skip" => Ok(OnError::Skip),
        other => Err(Error::Config(format!(
            "on_error must be \"fail\" or \"skip\", not {other:?}"
        ))),
    }
}

/// `work` without the GIL, on a thread of its own, while this thread asks Python for
/// signals every tenth of a second: on Ctrl-C (or any signal handler that raises) the work is
/// asked to stop (`interrupt`), awaited, and the handler's exception (`KeyboardInterrupt`)
/// raised in place of its result. A short call costs one thread start; none waits the tenth.
pub(super) fn interruptible<T: Send>(
    py: Python<'_>,
    work: impl FnOnce() -> Result<T, Error> + Send,
) -> PyResult<T> {
    use std::sync::{Condvar, Mutex};
    use std::time::Duration;
    let finished = (Mutex::new(false), Condvar::new());
    std::thread::scope(|scope| {
        let worker = scope.spawn(|| {
            // Said done however the work ends (a panic too), so the waiting below stops.
            struct Done<'a>(&'a (Mutex<bool>, Condvar));
            impl Drop for Done<'_> {
                fn drop(&mut self) {
                    *self.0 .0.lock().unwrap_or_else(|e| e.into_inner()) = true;
                    self.0 .1.notify_all();
                }
            }
            let _done = Done(&finished);
            work()
        });
        let wait = || {
            let (lock, signal) = &finished;
            let done = lock.lock().unwrap_or_else(|e| e.into_inner());
            let (done, _) = signal
                .wait_timeout_while(done, Duration::from_millis(100), |done| !*done)
                .unwrap_or_else(|e| e.into_inner());
            *done
        };
        let outcome = loop {
            if py.detach(wait) {
                break Ok(());
            }
            if let Err(signal) = py.check_signals() {
                break Err(signal);
            }
        };
        if outcome.is_err() {
            crate::interrupt::set(true);
        }
        let result = py.detach(|| worker.join());
        crate::interrupt::set(false);
        outcome?;
        match result {
            Ok(result) => result.map_err(|e| to_py_err(py, e)),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

/// `encode_batch`'s result: the ids (uint32) and the per-text offsets (int64).
pub(super) type IdsAndOffsets<'py> = (Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<i64>>);
