//! zlib's inflate, as `libz-rs-sys` (zlib's C interface, written in Rust) offers it, for what
//! flate2 does not expose: stopping at each deflate block's end (`Z_BLOCK`, with the bits of
//! the last byte the block left unread), and starting in the middle of a stream at a bit
//! offset (`inflatePrime`) with the 32 KiB of text before it as the window
//! (`inflateSetDictionary`), as zlib's `examples/zran.c` indexes a gzip file.

use std::io::{Error, ErrorKind};

use libz_rs_sys::{
    inflate, inflateEnd, inflateInit2_, inflatePrime, inflateSetDictionary, z_stream, zlibVersion,
    Z_BLOCK, Z_BUF_ERROR, Z_NEED_DICT, Z_NO_FLUSH, Z_OK, Z_STREAM_END,
};

/// What a stream's format is: a gzip member with its header and trailer (checked by zlib), or
/// raw deflate data (a stream entered in the middle: its trailer is the caller's to check).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wrapping {
    Gzip,
    Raw,
}

/// Where an `inflate` call stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Out of input or of room for output (or, with `to_block_end`, at a block's end).
    Paused,
    /// The stream's end (a gzip member's trailer checked).
    End,
}

/// What one `inflate` call did.
pub struct Inflated {
    pub consumed: usize,
    pub written: usize,
    pub stop: Result<Stop, Error>,
}

/// An inflate stream. Boxed: zlib's state points back at its `z_stream`, so it must not move.
pub struct Inflater {
    stream: Box<z_stream>,
}

// Safety: the stream's pointers are its own state's, or the input and output of the call in
// progress (set and used within one `inflate`); nothing is shared with another thread.
unsafe impl Send for Inflater {}

impl Inflater {
    pub fn new(wrapping: Wrapping) -> Result<Self, Error> {
        let mut stream = Box::<z_stream>::default();
        let bits = match wrapping {
            Wrapping::Gzip => 15 + 16,
            Wrapping::Raw => -15,
        };
        let size = std::mem::size_of::<z_stream>() as i32;
        // Safety: a default `z_stream` (its allocator set), zlib's own version string.
        let code = unsafe { inflateInit2_(&mut *stream, bits, zlibVersion(), size) };
        match code {
            Z_OK => Ok(Self { stream }),
            _ => Err(Error::other(format!("inflateInit2 failed ({code})"))),
        }
    }

    /// Feed `bits` (1 to 7) bits of `value` (its low ones) before the next input byte: the
    /// rest of a byte a block starts within.
    pub fn prime(&mut self, bits: u8, value: u8) -> Result<(), Error> {
        // Safety: an initialised stream.
        let code = unsafe { inflatePrime(&mut *self.stream, i32::from(bits), i32::from(value)) };
        check(code, "inflatePrime")
    }

    /// The text before the point a raw stream starts at, which its first blocks may copy from.
    pub fn set_window(&mut self, window: &[u8]) -> Result<(), Error> {
        let len = u32::try_from(window.len()).map_err(|_| Error::other("window too large"))?;
        // Safety: an initialised stream, and `len` bytes at `window`.
        let code = unsafe { inflateSetDictionary(&mut *self.stream, window.as_ptr(), len) };
        check(code, "inflateSetDictionary")
    }

    /// Inflate from `input` into `output`, to the end of the current block at most when
    /// `to_block_end`: the bytes consumed and written, and where it stopped, or (a damaged
    /// stream: `InvalidData` with zlib's message) why not. The counts hold either way.
    pub fn inflate(&mut self, input: &[u8], output: &mut [u8], to_block_end: bool) -> Inflated {
        let stream = &mut *self.stream;
        // zlib's counts are 32-bit: a call takes at most 4 GiB of either.
        let (offered, room) = (clamp(input.len()), clamp(output.len()));
        stream.next_in = input.as_ptr().cast_mut();
        stream.avail_in = offered;
        stream.next_out = output.as_mut_ptr();
        stream.avail_out = room;
        let flush = if to_block_end { Z_BLOCK } else { Z_NO_FLUSH };
        // Safety: `next_in`/`avail_in` and `next_out`/`avail_out` describe the two slices,
        // which outlive the call; zlib reads no input and writes no output past them.
        let code = unsafe { inflate(stream, flush) };
        let consumed = (offered - stream.avail_in) as usize;
        let written = (room - stream.avail_out) as usize;
        stream.next_in = std::ptr::null_mut();
        stream.next_out = std::ptr::null_mut();
        let stop = match code {
            // Z_BUF_ERROR: no progress was possible; more input (or room) is wanted, and the
            // caller knows which.
            Z_OK | Z_BUF_ERROR => Ok(Stop::Paused),
            Z_STREAM_END => Ok(Stop::End),
            Z_NEED_DICT => Err(Error::new(ErrorKind::InvalidData, "a preset dictionary")),
            _ => Err(Error::new(ErrorKind::InvalidData, self.message())),
        };
        Inflated {
            consumed,
            written,
            stop,
        }
    }

    /// zlib's `data_type` after a call that stopped at a block's end: bit 7 set at a block's
    /// end (or a member's header end), bit 6 when that block was the last, and the low three
    /// bits the unused bits of the last byte taken.
    pub fn data_type(&self) -> i32 {
        self.stream.data_type
    }

    fn message(&self) -> String {
        let msg = self.stream.msg;
        if msg.is_null() {
            return "invalid deflate data".into();
        }
        // Safety: zlib's messages are static, NUL-terminated strings.
        let text = unsafe { std::ffi::CStr::from_ptr(msg) };
        text.to_string_lossy().into_owned()
    }
}

impl Drop for Inflater {
    fn drop(&mut self) {
        // Safety: an initialised stream, ended once.
        unsafe { inflateEnd(&mut *self.stream) };
    }
}

fn clamp(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

fn check(code: i32, call: &str) -> Result<(), Error> {
    match code {
        Z_OK => Ok(()),
        _ => Err(Error::other(format!("{call} failed ({code})"))),
    }
}
