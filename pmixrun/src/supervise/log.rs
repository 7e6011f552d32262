//! `PMIx_Log`: the channels pmixrun serves, each message tagged with its source as
//! `--tag-output` tags output:
//!
//! - `LOG_STDOUT`, `LOG_STDERR`: on pmixrun's stdout or stderr, line by line;
//! - `LOG_SYSLOG`, `LOG_LOCAL_SYSLOG`, `LOG_GLOBAL_SYSLOG`: to the syslog daemon of pmixrun's
//!   node (`syslog.rs`: `/dev/log`, or `PMIXRS_SYSLOG_SOCKET`), at the severity of
//!   `LOG_SYSLOG_PRI` (default `LOG_ERR`, as the standard says), facility `LOG_USER`; pmixrun
//!   is the run's gateway, so the global syslog is its node's too, and in a multi-node run
//!   so is the local one;
//! - `LOG_JOB_RECORD`: the run's record is pmixrun's own report on stderr, a line
//!   `pmixrun: job record: [rank] message` (the value is the message, as the standard now
//!   has it, or `true` with the message in `LOG_MSG`, as OpenPMIx's header has it).
//!
//! Not served: `LOG_EMAIL` (pmixrun sends no mail) and `LOG_GLOBAL_DATASTORE` (it has no
//! store). Directives: `LOG_TIMESTAMP` (a `time_t`) or `LOG_GENERATE_TIMESTAMP` put the time,
//! in UTC, before each message; `LOG_ONCE` stops at the first channel, in the order of the
//! data, that took the message. As OpenPMIx's logging framework does, a request succeeds when
//! some channel took it, and fails with `ERR_NOT_AVAILABLE` when none could.

use std::time::{SystemTime, UNIX_EPOCH};

use pmix_types::{Value, attr};

use super::*;

/// The standard's default syslog severity: `LOG_ERR`.
const DEFAULT_SEVERITY: u8 = 3;

/// What the directives of a log request ask for.
struct Directives {
    once: bool,
    /// Seconds since the epoch to show, if any.
    timestamp: Option<i64>,
    severity: u8,
}

impl Directives {
    fn of(directives: &[Info]) -> Directives {
        let mut d = Directives {
            once: false,
            timestamp: None,
            severity: DEFAULT_SEVERITY,
        };
        for i in directives {
            match i.key.as_str() {
                attr::LOG_ONCE => d.once = i.flag().unwrap_or(false),
                attr::LOG_TIMESTAMP => {
                    d.timestamp = match i.value {
                        Value::Time(t) => Some(t),
                        ref v => v.as_i64(),
                    }
                }
                attr::LOG_GENERATE_TIMESTAMP if i.flag().unwrap_or(false) => {
                    let now = SystemTime::now().duration_since(UNIX_EPOCH);
                    let secs = now.map_or(0, |d| d.as_secs());
                    d.timestamp
                        .get_or_insert(i64::try_from(secs).unwrap_or(i64::MAX));
                }
                attr::LOG_SYSLOG_PRI => {
                    let pri = i.value.as_i64().and_then(|p| u8::try_from(p).ok());
                    d.severity = pri.filter(|p| *p <= 7).unwrap_or(DEFAULT_SEVERITY);
                }
                _ => {}
            }
        }
        d
    }
}

/// `secs` since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (proleptic Gregorian calendar, UTC).
pub(super) fn utc(secs: i64) -> String {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's days-to-civil: eras of 400 years from 0000-03-01.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

impl<J: Jobs> Supervisor<J> {
    /// `PMIx_Log` from `source`.
    pub(super) fn log(
        &mut self,
        source: &Proc,
        data: &[Info],
        directives: &[Info],
        done: Completion<()>,
    ) {
        let d = Directives::of(directives);
        let tag = self.tag(source);
        let stamp = d
            .timestamp
            .map(|t| format!("{} ", utc(t)))
            .unwrap_or_default();
        let text_of = |i: &Info| -> Option<String> {
            match &i.value {
                Value::String(s) => Some(s.clone()),
                // `true`: the message is the request's `LOG_MSG`.
                Value::Bool(true) => data
                    .iter()
                    .find(|m| m.key.as_str() == attr::LOG_MSG)
                    .and_then(|m| match &m.value {
                        Value::String(s) => Some(s.clone()),
                        Value::ByteObject(b) => Some(String::from_utf8_lossy(b).into_owned()),
                        _ => None,
                    }),
                _ => None,
            }
        };
        let mut served = false;
        for i in data {
            if served && d.once {
                break;
            }
            let key = i.key.as_str();
            let channel = matches!(
                key,
                attr::LOG_STDOUT
                    | attr::LOG_STDERR
                    | attr::LOG_SYSLOG
                    | attr::LOG_LOCAL_SYSLOG
                    | attr::LOG_GLOBAL_SYSLOG
                    | attr::LOG_JOB_RECORD
            );
            let Some(text) = channel.then(|| text_of(i)).flatten() else {
                continue;
            };
            let lines = text.lines().map(|l| format!("{tag} {stamp}{l}"));
            match key {
                attr::LOG_STDOUT | attr::LOG_STDERR => {
                    let stdout = key == attr::LOG_STDOUT;
                    lines.for_each(|l| self.jobs.write_log(stdout, &l));
                    served = true;
                }
                attr::LOG_JOB_RECORD => {
                    lines.for_each(|l| self.jobs.say(&format!("job record: {l}")));
                    served = true;
                }
                _ => {
                    // Every line must reach the daemon for the channel to count as served.
                    let mut all = true;
                    for l in lines {
                        all &= self.jobs.syslog(d.severity, &l);
                    }
                    served |= all;
                }
            }
        }
        done.complete(if served {
            Ok(())
        } else {
            Err(Status::ERR_NOT_AVAILABLE)
        });
    }
}
