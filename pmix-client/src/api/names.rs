//! Name publishing (`PMIx_Publish`, `PMIx_Lookup`, `PMIx_Unpublish`): data a process files
//! under a key for others to find by the key alone, without knowing who published it.
//!
//! The data lives with the server (or the host's name service); the client checks the
//! arguments, passes the directives through untouched and maps the reply: a lookup's results
//! back onto the keys in the order they were asked, the name-service statuses onto
//! [`Error::DuplicateKey`] and [`Error::NotPublished`].

use hashbrown::{HashMap, HashSet};
use pmix_types::{Info, Key, Proc, Status, Value};
use pmix_wire::{Reply, ReplyBody, Request};

use crate::call::{blocking, timeout_of};
use crate::{Client, Error};

/// One key's result of a [`Client::lookup`] (`pmix_pdata_t`): the value and the process that
/// published it, or neither for a key that was not found.
#[derive(Clone, Debug, PartialEq)]
pub struct Pdata {
    /// The key, as asked.
    pub key: Key,
    /// The published value; [`Value::Undef`] when the key was not found.
    pub value: Value,
    /// The publisher; `None` when the key was not found.
    pub proc: Option<Proc>,
}

impl Pdata {
    fn missing(key: Key) -> Pdata {
        Pdata {
            key,
            value: Value::Undef,
            proc: None,
        }
    }

    /// True if the key was found. A publisher may have published [`Value::Undef`] itself, so
    /// this looks at the publisher, not at the value.
    pub fn is_found(&self) -> bool {
        self.proc.is_some()
    }
}

/// Turns the caller's key strings into keys, naming the first bad one.
fn parse_keys(call: &str, keys: &[&str]) -> Result<Vec<Key>, Error> {
    keys.iter()
        .enumerate()
        .map(|(n, k)| Key::new(k).map_err(|e| Error::BadParam(format!("{call} key {n}: {e}"))))
        .collect()
}

/// Refuses what the server would refuse or could not make sense of, before anything is sent.
fn check_publish(data: &[Info]) -> Result<(), Error> {
    if data.is_empty() {
        return Err(Error::BadParam("publish with no data".into()));
    }
    let mut seen = HashSet::with_capacity(data.len());
    for i in data {
        if !seen.insert(i.key.as_str()) {
            return Err(Error::DuplicateKey(format!(
                "{:?} appears twice in one publish",
                i.key.as_str()
            )));
        }
    }
    Ok(())
}

/// `"a", "b"`, for error messages.
fn list(keys: &[Key]) -> String {
    let quoted: Vec<String> = keys.iter().map(|k| format!("{:?}", k.as_str())).collect();
    quoted.join(", ")
}

/// "`"a"`", or "at least one of `"a", "b"`": which of the keys a refusal of the whole call
/// concerns, as far as the client can tell (the status does not say).
fn one_of(keys: &[Key]) -> String {
    match keys {
        [one] => format!("{:?}", one.as_str()),
        _ => format!("at least one of {}", list(keys)),
    }
}

fn publish_result(reply: &Reply, keys: &[Key]) -> Result<(), Error> {
    match reply.status {
        Status::SUCCESS => Ok(()),
        Status::ERR_DUPLICATE_KEY => Err(Error::DuplicateKey(format!(
            "{} is already published in this range",
            one_of(keys)
        ))),
        status => Err(Error::from_status(status)),
    }
}

fn unpublish_result(reply: &Reply, keys: &[Key]) -> Result<(), Error> {
    match reply.status {
        Status::SUCCESS => Ok(()),
        Status::ERR_NOT_FOUND if keys.is_empty() => Err(Error::NotPublished(
            "nothing is published by this process".into(),
        )),
        Status::ERR_NOT_FOUND => Err(Error::NotPublished(one_of(keys))),
        status => Err(Error::from_status(status)),
    }
}

/// Maps a lookup's reply onto the keys asked, in their order. Entries for keys not asked, or
/// a second entry for a key, are the server's mistake and ignored; a key asked twice gets the
/// same answer twice.
fn lookup_result(reply: Reply, keys: &[Key]) -> Result<Vec<Pdata>, Error> {
    match reply.status {
        Status::SUCCESS => {}
        Status::ERR_NOT_FOUND => return Err(Error::NotPublished(list(keys))),
        status => return Err(Error::from_status(status)),
    }
    let found = match reply.body {
        ReplyBody::Lookup { found } => found,
        // A success without results has found nothing.
        _ => Vec::new(),
    };
    // Where each key is first asked: results land there and are copied to repeats.
    let mut first: HashMap<&str, usize> = HashMap::with_capacity(keys.len());
    let origin: Vec<usize> = keys
        .iter()
        .enumerate()
        .map(|(n, k)| *first.entry(k.as_str()).or_insert(n))
        .collect();
    let mut out: Vec<Pdata> = keys.iter().cloned().map(Pdata::missing).collect();
    for p in found {
        match first.get(p.key.as_str()).and_then(|&n| out.get_mut(n)) {
            Some(slot) if !slot.is_found() => {
                slot.value = p.value;
                slot.proc = Some(p.proc);
            }
            _ => tracing::debug!(
                "pmix-client: ignoring a lookup result for {:?}, not asked or given twice",
                p.key.as_str()
            ),
        }
    }
    for (n, &f) in origin.iter().enumerate() {
        // f < n for a repeat, so the first one is already final.
        if f != n {
            out[n] = out[f].clone();
        }
    }
    if out.iter().any(Pdata::is_found) {
        Ok(out)
    } else {
        Err(Error::NotPublished(list(keys)))
    }
}

impl Client {
    /// Publishes `data` under this process's name (`PMIx_Publish`), for any process in the
    /// range to find with [`Client::lookup`] by the key alone.
    ///
    /// `info` is passed to the server as is: `RANGE` (who may look it up, default session),
    /// `PERSISTENCE` (how long it lasts), `TIMEOUT`. A key already published in the range
    /// fails the whole call with [`Error::DuplicateKey`] (`ERR_DUPLICATE_KEY`), the first
    /// value kept, nothing of this call stored. Refused without a message to the server:
    /// empty `data` ([`Error::BadParam`]) and a key given twice ([`Error::DuplicateKey`]).
    pub fn publish(&self, data: &[Info], info: &[Info]) -> Result<(), Error> {
        self.check_blocking()?;
        check_publish(data)?;
        blocking(self.shared(), timeout_of(info), |done| {
            self.send_publish(data, info, done)
        })
    }

    /// [`Client::publish`] completing through `done` (`PMIx_Publish_nb`); `done` runs on the
    /// reader thread, or at once on the caller's if the call is refused before sending.
    pub fn publish_nb(
        &self,
        data: &[Info],
        info: &[Info],
        done: impl FnOnce(Result<(), Error>) + Send + 'static,
    ) {
        if let Err(e) = self.check().and_then(|()| check_publish(data)) {
            return done(Err(e));
        }
        self.send_publish(data, info, done);
        self.shared().kick();
    }

    fn send_publish(
        &self,
        data: &[Info],
        info: &[Info],
        done: impl FnOnce(Result<(), Error>) + Send + 'static,
    ) -> Option<u32> {
        let keys: Vec<Key> = data.iter().map(|i| i.key.clone()).collect();
        self.shared().submit(
            Request::Publish {
                data: data.to_vec(),
                info: info.to_vec(),
            },
            Box::new(move |r| done(r.and_then(|reply| publish_result(&reply, &keys)))),
        )
    }

    /// Looks up published `keys` (`PMIx_Lookup`): one [`Pdata`] per key, in the order asked,
    /// with the value and the process that published it; a key not found has
    /// [`Value::Undef`] and no process.
    ///
    /// Succeeds if any key was found; if none was, fails with [`Error::NotPublished`]
    /// (`ERR_NOT_FOUND`). `info` is passed to the server as is: `RANGE` (where to look),
    /// `WAIT` (wait until all keys, or the given number of them, are published) and
    /// `TIMEOUT` (how long to wait: the server then fails the call with `ERR_TIMEOUT`, and
    /// should it not answer, this call gives up one second later on its own). `WAIT` without
    /// `TIMEOUT` waits as long as the connection lives. No key, or an invalid one, is
    /// [`Error::BadParam`] without a message to the server.
    pub fn lookup(&self, keys: &[&str], info: &[Info]) -> Result<Vec<Pdata>, Error> {
        self.check_blocking()?;
        let keys = lookup_keys(keys)?;
        blocking(self.shared(), timeout_of(info), |done| {
            self.send_lookup(keys, info, done)
        })
    }

    /// [`Client::lookup`] completing through `done` (`PMIx_Lookup_nb`); `done` runs on the
    /// reader thread, or at once on the caller's if the call is refused before sending. The
    /// server enforces `TIMEOUT`; a lost connection completes `done`.
    pub fn lookup_nb(
        &self,
        keys: &[&str],
        info: &[Info],
        done: impl FnOnce(Result<Vec<Pdata>, Error>) + Send + 'static,
    ) {
        match self.check().and_then(|()| lookup_keys(keys)) {
            Ok(keys) => {
                self.send_lookup(keys, info, done);
                self.shared().kick();
            }
            Err(e) => done(Err(e)),
        }
    }

    fn send_lookup(
        &self,
        keys: Vec<Key>,
        info: &[Info],
        done: impl FnOnce(Result<Vec<Pdata>, Error>) + Send + 'static,
    ) -> Option<u32> {
        let asked = keys.clone();
        self.shared().submit(
            Request::Lookup {
                keys,
                info: info.to_vec(),
            },
            Box::new(move |r| done(r.and_then(|reply| lookup_result(reply, &asked)))),
        )
    }

    /// Withdraws keys this process published (`PMIx_Unpublish`); no keys withdraws all of
    /// them. `info` (`RANGE`, `TIMEOUT`) is passed to the server as is.
    ///
    /// All or nothing: a key that is not published fails the call with
    /// [`Error::NotPublished`] (`ERR_NOT_FOUND`), one another process published with
    /// `ERR_NO_PERMISSIONS`, and nothing is withdrawn then. An invalid key is
    /// [`Error::BadParam`] without a message to the server.
    pub fn unpublish(&self, keys: &[&str], info: &[Info]) -> Result<(), Error> {
        self.check_blocking()?;
        let keys = parse_keys("unpublish", keys)?;
        blocking(self.shared(), timeout_of(info), |done| {
            self.send_unpublish(keys, info, done)
        })
    }

    /// [`Client::unpublish`] completing through `done` (`PMIx_Unpublish_nb`); `done` runs on
    /// the reader thread, or at once on the caller's if the call is refused before sending.
    pub fn unpublish_nb(
        &self,
        keys: &[&str],
        info: &[Info],
        done: impl FnOnce(Result<(), Error>) + Send + 'static,
    ) {
        match self.check().and_then(|()| parse_keys("unpublish", keys)) {
            Ok(keys) => {
                self.send_unpublish(keys, info, done);
                self.shared().kick();
            }
            Err(e) => done(Err(e)),
        }
    }

    fn send_unpublish(
        &self,
        keys: Vec<Key>,
        info: &[Info],
        done: impl FnOnce(Result<(), Error>) + Send + 'static,
    ) -> Option<u32> {
        let asked = keys.clone();
        self.shared().submit(
            Request::Unpublish {
                keys,
                info: info.to_vec(),
            },
            Box::new(move |r| done(r.and_then(|reply| unpublish_result(&reply, &asked)))),
        )
    }
}

fn lookup_keys(keys: &[&str]) -> Result<Vec<Key>, Error> {
    if keys.is_empty() {
        return Err(Error::BadParam("lookup with no keys".into()));
    }
    parse_keys("lookup", keys)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use pmix_types::{Nspace, Rank};
    use pmix_wire::Published;

    use super::*;

    fn keys(ks: &[&str]) -> Vec<Key> {
        ks.iter().map(|k| Key::new(k).unwrap()).collect()
    }

    fn publ(k: &str, v: u32, rank: u32) -> Published {
        Published {
            proc: Proc::new(Nspace::new("ns").unwrap(), Rank(rank)),
            key: Key::new(k).unwrap(),
            value: Value::Uint32(v),
        }
    }

    fn found(found: Vec<Published>) -> Reply {
        Reply {
            status: Status::SUCCESS,
            body: ReplyBody::Lookup { found },
        }
    }

    #[test]
    fn results_follow_the_asked_order_and_stray_entries_are_ignored() {
        let asked = keys(&["a", "b", "c", "a"]);
        let reply = found(vec![
            publ("c", 3, 2),
            publ("stray", 9, 9),
            publ("a", 1, 0),
            publ("a", 7, 7),
        ]);
        let out = lookup_result(reply, &asked).unwrap();
        let got: Vec<(&str, Option<u32>, Option<u32>)> = out
            .iter()
            .map(|d| {
                (
                    d.key.as_str(),
                    d.value.as_u32(),
                    d.proc.as_ref().map(|p| p.rank.0),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("a", Some(1), Some(0)),
                ("b", None, None),
                ("c", Some(3), Some(2)),
                ("a", Some(1), Some(0)),
            ]
        );
        assert_eq!(out[1].value, Value::Undef);
    }

    #[test]
    fn nothing_usable_found_is_not_published() {
        let asked = keys(&["a"]);
        for reply in [
            found(vec![]),
            found(vec![publ("stray", 1, 0)]),
            Reply::status(Status::SUCCESS),
            Reply::status(Status::ERR_NOT_FOUND),
        ] {
            let e = lookup_result(reply, &asked).unwrap_err();
            assert!(matches!(e, Error::NotPublished(_)), "{e:?}");
            assert_eq!(e.status(), Status::ERR_NOT_FOUND);
        }
        let e = lookup_result(Reply::status(Status::ERR_TIMEOUT), &asked).unwrap_err();
        assert_eq!(e.status(), Status::ERR_TIMEOUT);
    }

    #[test]
    fn publish_checks() {
        assert!(matches!(check_publish(&[]), Err(Error::BadParam(_))));
        let i = Info::new(Key::new("k").unwrap(), 1u32);
        let j = Info::new(Key::new("j").unwrap(), 1u32);
        check_publish(&[i.clone(), j.clone()]).unwrap();
        let e = check_publish(&[i.clone(), j, i]).unwrap_err();
        assert!(matches!(e, Error::DuplicateKey(_)), "{e:?}");
        assert_eq!(e.status(), Status::ERR_DUPLICATE_KEY);
    }
}
