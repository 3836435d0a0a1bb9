//! This thread's capability sets, read and written with the raw syscalls
//! (credentials are per thread in Linux). No allocation: the landlock
//! runner calls [`set`] between fork and exec.

use nix::libc;
use std::io;

/// `_LINUX_CAPABILITY_VERSION_3`: 64-bit sets in two data words.
const VERSION_3: u32 = 0x2008_0522;

/// `struct __user_cap_header_struct`.
#[repr(C)]
struct Header {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct`: one word of each set.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(super) struct Data {
    pub effective: u32,
    pub permitted: u32,
    pub inheritable: u32,
}

fn header() -> Header {
    Header {
        version: VERSION_3,
        pid: 0,
    }
}

/// This thread's sets, capabilities 0-31 in the first word.
pub(super) fn get() -> io::Result<[Data; 2]> {
    let mut header = header();
    let mut data = [Data::default(); 2];
    // SAFETY: header and data are live and laid out as version 3 wants
    // (two data words); the kernel writes into them.
    if unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(data)
}

/// Replaces this thread's sets with `data`.
pub(super) fn set(data: &[Data; 2]) -> io::Result<()> {
    let header = header();
    // SAFETY: as in `get`; the kernel only reads them.
    if unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether this thread has `cap` in its effective set.
pub(super) fn has(cap: u32) -> bool {
    get().is_ok_and(|d| d[(cap / 32) as usize].effective & (1 << (cap % 32)) != 0)
}
