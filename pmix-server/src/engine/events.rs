//! Events: delivered to the clients that registered for them, within their range; and the
//! event that tells a job one of its processes is gone.

use std::sync::Arc;

use pmix_types::{DataRange, Info, Proc, Rank, Status, Value, attr};
use pmix_wire::Event;

use super::host_ops::{HostCall, PendingHost};
use super::sessions::Conn;
use super::store::NsId;
use super::{ConnId, Engine, Output};

/// The processes of an event's `EVENT_CUSTOM_RANGE`: one proc or a data array of them.
pub(super) fn custom_range(event: &Event) -> Vec<Proc> {
    event
        .info
        .iter()
        .find(|i| i.key.as_str() == attr::EVENT_CUSTOM_RANGE)
        .map(|i| match &i.value {
            Value::Proc(p) => vec![p.clone()],
            Value::DataArray(a) => a
                .items()
                .iter()
                .filter_map(|v| v.as_proc().cloned())
                .collect(),
            _ => Vec::new(),
        })
        .unwrap_or_default()
}

impl Engine {
    /// Delivers `event` to every client that registered for its code and that `to` selects.
    pub(super) fn deliver(&mut self, event: &Event, to: impl Fn(&Engine, &Conn) -> bool) {
        let targets: Vec<ConnId> = self
            .sessions
            .active()
            .filter(|(_, c)| c.events.wants(event.code))
            .filter(|(_, c)| to(self, c))
            .map(|(k, _)| k)
            .collect();
        self.send_event(targets, event);
    }

    /// Sends `event` to each of `targets` (one copy shared).
    pub(super) fn send_event(&mut self, targets: Vec<ConnId>, event: &Event) {
        if targets.is_empty() {
            return;
        }
        let event = Arc::new(event.clone());
        for conn in targets {
            self.out.push_back(Output::Event {
                conn,
                event: event.clone(),
            });
        }
    }

    /// Delivers an event within its range, relative to its source, to everyone but
    /// `except` (the notifier's own connection).
    pub(super) fn notify(&mut self, event: &Event, except: Option<ConnId>) {
        self.deliver_to_tools(event, except, false);
        self.deliver_clients(event, except);
    }

    /// [`Engine::notify`] to clients only.
    fn deliver_clients(&mut self, event: &Event, except: Option<ConnId>) {
        let (source, range) = (event.source.clone(), event.range);
        let custom = custom_range(event);
        let skip = except
            .and_then(|c| self.sessions.conn(c))
            .map(|c| c.proc.clone());
        self.event_cache.keep(event);
        self.deliver(event, move |_, c| {
            skip.as_ref() != Some(&c.proc) && reaches_in(range, &source, &custom, &c.proc)
        });
    }

    /// A notification from a client or a tool (`PMIx_Notify_event`, its source already set
    /// to the notifier): delivered within its range, a `DEBUGGER_RELEASE` noted
    /// (`debug.rs`), passed to the host for `RM` (which answers it) and for ranges reaching
    /// other nodes; answered.
    pub(super) fn relay_notification(&mut self, conn: ConnId, id: u32, event: Event) {
        if event.code == Status::DEBUGGER_RELEASE {
            self.debugger_released(&event);
        }
        if event.range == DataRange::RM {
            return self.host_call(
                PendingHost::Status { conn, id },
                HostCall::NotifyEvent { event },
            );
        }
        self.notify(&event, Some(conn));
        if reaches_other_nodes(event.range) {
            // Other nodes' processes are the host's to reach; the notifier does not wait for
            // them (nor learn whether the host could).
            self.host_call(PendingHost::Nothing, HostCall::NotifyEvent { event });
        }
        self.reply_status(conn, id, Status::SUCCESS);
    }

    /// The host raises an event for this server's clients, within its range.
    pub(crate) fn host_notify(&mut self, event: &Event) {
        if self.host_debug_event(event) {
            return;
        }
        if self.group_event_from_host(event) {
            self.deliver_to_tools(event, None, true);
            self.deliver_clients(event, None);
        }
    }

    /// Tells the job of `gone`, and the jobs connected to it, that it ended with `status`.
    pub(super) fn announce_gone(&mut self, ns: NsId, gone: &Proc, status: Status) {
        let text = if status == Status::ERR_LOST_CONNECTION {
            format!("{gone} was lost with its node")
        } else {
            format!("{gone} ended without calling finalize")
        };
        let event = Event {
            code: status,
            source: self.nspaces.me().clone(),
            range: DataRange::NAMESPACE,
            info: vec![
                Info::attr(attr::EVENT_AFFECTED_PROC, gone.clone()),
                Info::attr(attr::EVENT_TEXT_MESSAGE, text),
            ],
        };
        self.deliver(&event, |eng, other| {
            other.ns == ns || eng.collectives.connected.are(ns, other.ns)
        });
    }
}

/// Whether an event of `range` raised by `source` reaches client `p` (`custom`: the
/// processes of a `CUSTOM` range).
fn reaches_in(range: DataRange, source: &Proc, custom: &[Proc], p: &Proc) -> bool {
    match range {
        DataRange::PROC_LOCAL => p == source,
        DataRange::NAMESPACE => p.nspace == source.nspace,
        DataRange::CUSTOM => custom
            .iter()
            .any(|c| c.nspace == p.nspace && (c.rank == Rank::WILDCARD || c.rank == p.rank)),
        _ => true,
    }
}

/// Whether `event` reaches client `p`, by its range.
pub(super) fn reaches(event: &Event, p: &Proc) -> bool {
    reaches_in(event.range, &event.source, &custom_range(event), p)
}

/// Whether an event of this range may concern processes of other nodes.
fn reaches_other_nodes(range: DataRange) -> bool {
    !matches!(
        range,
        DataRange::PROC_LOCAL | DataRange::LOCAL | DataRange::RM
    )
}
