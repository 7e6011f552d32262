//! Writing to the local syslog daemon the way the C library's `syslog(3)` does: one datagram
//! per message on the Unix socket `/dev/log`, in the traditional format (`<PRI>TAG[PID]: MSG`,
//! RFC 3164 without the timestamp, which the daemon adds on receipt).
//!
//! `PMIXRS_SYSLOG_SOCKET` names another socket (the tests use their own); pmixrun reads it
//! at each message.

use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;

/// The variable naming the socket to use instead of `/dev/log`.
pub(crate) const SOCKET_VAR: &str = "PMIXRS_SYSLOG_SOCKET";

/// The facility pmixrun logs as: `LOG_USER`.
const FACILITY_USER: u8 = 1;

/// Where messages go: `PMIXRS_SYSLOG_SOCKET`, else `/dev/log`.
fn socket_path() -> PathBuf {
    std::env::var_os(SOCKET_VAR)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/dev/log"))
}

/// The datagram for `message` at `severity` (0, emergency, to 7, debug), from `tag`. The
/// message is a process's words: its control characters (a newline that would start a forged
/// `<0>` line, an escape sequence for a terminal, a NUL that ends the record early) are
/// written as `\xHH`, and a backslash as `\\`, so what reaches the log is one line that
/// says exactly what was sent.
pub(crate) fn datagram(severity: u8, tag: &str, message: &str) -> String {
    let pri = u16::from(FACILITY_USER) * 8 + u16::from(severity.min(7));
    format!("<{pri}>{tag}[{}]: {}", std::process::id(), escaped(message))
}

fn escaped(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for c in message.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                use std::fmt::Write;
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// Sends `message` to the syslog daemon; false if there is none or it did not take it. The
/// socket does not block: a daemon that does not keep up loses the message rather than
/// stalling pmixrun.
pub(crate) fn send(severity: u8, message: &str) -> bool {
    let path = socket_path();
    let sent = UnixDatagram::unbound()
        .and_then(|s| {
            s.set_nonblocking(true)?;
            s.send_to(datagram(severity, "pmixrun", message).as_bytes(), &path)
        })
        .map_err(|e| tracing::debug!(path = %path.display(), "syslog: {e}"));
    sent.is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_priority_is_the_user_facility_and_the_severity() {
        let d = datagram(3, "pmixrun", "[0] hello");
        let want = format!("<11>pmixrun[{}]: [0] hello", std::process::id());
        assert_eq!(d, want);
        // Out of range severities are debug, never another facility.
        assert!(datagram(42, "t", "m").starts_with("<15>t["), "{d}");
    }

    #[test]
    fn control_characters_are_escaped() {
        let d = datagram(6, "t", "a\n<0>forged\u{1b}[31m\0end\\x\u{9b}é");
        let want = format!(
            "<14>t[{}]: a\\x0a<0>forged\\x1b[31m\\x00end\\\\x\\x9bé",
            std::process::id()
        );
        assert_eq!(d, want);
        assert!(!d.contains('\n') && !d.contains('\0'));
    }
}
