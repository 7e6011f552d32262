//! Process groups (`PMIx_Group_construct`, `PMIx_Group_destruct`): collectives over the
//! members, answered by the server once every member has called them (and by its host when
//! members live on other nodes). Groups formed by invitation are in `group_membership.rs`.

use pmix_types::{Info, Proc, Status};
use pmix_wire::{ReplyBody, Request};

use crate::call::{blocking, on_status, timeout_of};
use crate::{Client, Error};

/// A group as its construction left it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// The members, sorted (`PMIX_GROUP_MEMBERSHIP`).
    pub members: Vec<Proc>,
    /// The context id the server assigned (`PMIX_GROUP_CONTEXT_ID`), when it was asked for
    /// with `GROUP_ASSIGN_CONTEXT_ID`: unique among the groups of the run.
    pub context_id: Option<u64>,
}

fn check_group(grp: &str, procs: &[Proc]) -> Result<(), Error> {
    if grp.is_empty() {
        return Err(Error::BadParam("a group needs an id".into()));
    }
    if procs.is_empty() {
        return Err(Error::BadParam("a group needs members".into()));
    }
    Ok(())
}

impl Client {
    /// Constructs group `grp` of `procs` (`PMIx_Group_construct`): every member calls it with
    /// the same id and members (rank `WILDCARD` for a whole namespace, this process among
    /// them), and it returns once all have. Directives: `GROUP_ASSIGN_CONTEXT_ID` (a context
    /// id in the answer), `GROUP_INFO` (a data array of infos this member shares, kept under
    /// the context id: the others read them with [`Client::get`] qualified by
    /// `GROUP_CONTEXT_ID`), `TIMEOUT` (seconds; `ERR_TIMEOUT` when some member never came). A
    /// member that ends before it arrived fails the construction for everyone
    /// (`ERR_PROC_TERM_WO_SYNC`). No id or no members is [`Error::BadParam`], sent nowhere.
    pub fn group_construct(
        &self,
        grp: &str,
        procs: &[Proc],
        info: &[Info],
    ) -> Result<Group, Error> {
        self.check_blocking()?;
        check_group(grp, procs)?;
        blocking(self.shared(), timeout_of(info), |done| {
            self.send_construct(grp, procs, info, done)
        })
    }

    /// [`Client::group_construct`] completing through `done` (`PMIx_Group_construct_nb`).
    pub fn group_construct_nb(
        &self,
        grp: &str,
        procs: &[Proc],
        info: &[Info],
        done: impl FnOnce(Result<Group, Error>) + Send + 'static,
    ) {
        if let Err(e) = self.check().and_then(|()| check_group(grp, procs)) {
            return done(Err(e));
        }
        self.send_construct(grp, procs, info, done);
        self.shared().kick();
    }

    fn send_construct(
        &self,
        grp: &str,
        procs: &[Proc],
        info: &[Info],
        done: impl FnOnce(Result<Group, Error>) + Send + 'static,
    ) -> Option<u32> {
        let shared = self.shared_arc();
        let id = grp.to_owned();
        self.shared().submit(
            Request::GroupConstruct {
                grp: grp.to_owned(),
                procs: procs.to_vec(),
                info: info.to_vec(),
            },
            Box::new(move |r| {
                done(r.and_then(|reply| match (reply.status, reply.body) {
                    (
                        Status::SUCCESS,
                        ReplyBody::Group {
                            members,
                            context_id,
                        },
                    ) => {
                        shared.groups().insert(id, members.clone());
                        Ok(Group {
                            members,
                            context_id,
                        })
                    }
                    (Status::SUCCESS, other) => Err(Error::Protocol(format!(
                        "a group construction answered with {other:?}"
                    ))),
                    (status, _) => Err(Error::from_status(status)),
                }))
            }),
        )
    }

    /// Destructs group `grp` (`PMIx_Group_destruct`), a collective over the members it was
    /// constructed with (sent along: an OpenPMIx server wants them); `TIMEOUT` as for
    /// construction. A group this process did not construct (or destructed already) is
    /// `ERR_NOT_FOUND` ([`Error::Server`]) without a message to the server, as libpmix does.
    pub fn group_destruct(&self, grp: &str, info: &[Info]) -> Result<(), Error> {
        self.check_blocking()?;
        if grp.is_empty() {
            return Err(Error::BadParam("a group needs an id".into()));
        }
        let Some(procs) = self.shared().groups().get(grp).cloned() else {
            return Err(Error::from_status(Status::ERR_NOT_FOUND));
        };
        blocking(self.shared(), timeout_of(info), |done| {
            self.shared().submit(
                Request::GroupDestruct {
                    grp: grp.to_owned(),
                    procs,
                    info: info.to_vec(),
                },
                on_status(done),
            )
        })?;
        self.shared().groups().remove(grp);
        Ok(())
    }
}
