//! Hiding sluice's own command line from other processes once it is
//! parsed (see [`super::main`]).

/// Overwrites the argument strings the kernel shows as
/// `/proc/self/cmdline` with `sluice` and NULs. Nothing reads them after
/// parsing (`std::env::args` would now give `["sluice", "", ...]`).
pub(super) fn hide_arguments() {
    let Some((start, end)) = argument_area() else {
        return;
    };
    if end <= start {
        return;
    }
    const NAME: &[u8] = b"sluice";
    let len = end - start;
    // The last byte stays NUL: the kernel then shows the area as it is
    // rather than reading on into the environment.
    let name = &NAME[..NAME.len().min(len.saturating_sub(1))];
    // SAFETY: [start, end) is this process's argument area on its initial
    // stack, as the kernel reports it in /proc/self/stat: mapped, writable
    // and ours. The strings argv[] points at live there; after parsing
    // nothing uses them but the kernel's /proc view, and they stay
    // NUL-terminated within the area.
    unsafe {
        let area = std::slice::from_raw_parts_mut(start as *mut u8, len);
        area.fill(0);
        area[..name.len()].copy_from_slice(name);
    }
}

/// `arg_start` and `arg_end` from /proc/self/stat (fields 48 and 49).
fn argument_area() -> Option<(usize, usize)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name start with the state, field 3.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(48 - 3);
    let start = fields.next()?.parse().ok()?;
    let end = fields.next()?.parse().ok()?;
    Some((start, end))
}
