//! The native welcome of each namespace, made once: the job image written into one sealed
//! memory file that every local client maps, and the welcome frame that points to it (or, where
//! the file cannot be made or a client cannot receive it, the frame carrying the image).

use std::collections::HashMap;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use pmix_types::Nspace;
use pmix_wire::{JobImage, WelcomeJob, encode_welcome};

/// Makes the sealed, read-only file of an image (named after the first argument), given by
/// the I/O side (`memfd::read_only_copy`), so that this module stays sans-IO.
pub(crate) type ShareFn = fn(&str, &[u8]) -> io::Result<OwnedFd>;

/// A welcome to send: its frame, and the descriptor to pass with the frame's first byte.
pub(crate) struct WelcomeOut {
    pub(crate) frame: Arc<[u8]>,
    pub(crate) fd: Option<Arc<OwnedFd>>,
}

struct Made {
    /// The image the frames were made for (a namespace registered again has another).
    image: JobImage,
    inline: Option<Arc<[u8]>>,
    /// The memory file and the frame naming it; `None` when the file could not be made.
    shared: Option<(Arc<OwnedFd>, Arc<[u8]>)>,
    tried_shared: bool,
}

/// See the module documentation.
pub(crate) struct Welcomes {
    made: HashMap<Nspace, Made>,
    share: ShareFn,
}

impl Welcomes {
    /// Welcomes whose image files `share` makes.
    pub(crate) fn new(share: ShareFn) -> Welcomes {
        Welcomes {
            made: HashMap::new(),
            share,
        }
    }

    /// The welcome of a client of `image`'s namespace; `can_pass_fds` says whether its
    /// connection can carry a descriptor (a Unix socket). `None` (logged) if no frame can be
    /// made.
    pub(crate) fn welcome(&mut self, image: &JobImage, can_pass_fds: bool) -> Option<WelcomeOut> {
        let made = self
            .made
            .entry(image.nspace().clone())
            .or_insert_with(|| Made {
                image: image.clone(),
                inline: None,
                shared: None,
                tried_shared: false,
            });
        if !made.image.is_same(image) {
            *made = Made {
                image: image.clone(),
                inline: None,
                shared: None,
                tried_shared: false,
            };
        }
        if can_pass_fds && !made.tried_shared {
            made.tried_shared = true;
            made.shared = shared(image, self.share);
        }
        if let (true, Some((fd, frame))) = (can_pass_fds, &made.shared) {
            return Some(WelcomeOut {
                frame: frame.clone(),
                fd: Some(fd.clone()),
            });
        }
        if made.inline.is_none() {
            made.inline = frame(&WelcomeJob::Inline(image.clone()), image);
        }
        made.inline
            .clone()
            .map(|frame| WelcomeOut { frame, fd: None })
    }

    /// Forgets a namespace's welcome (its file closes once no connection still holds it).
    pub(crate) fn forget(&mut self, nspace: &Nspace) {
        self.made.remove(nspace);
    }
}

fn frame(job: &WelcomeJob, image: &JobImage) -> Option<Arc<[u8]>> {
    let mut out = Vec::new();
    match encode_welcome(job, &mut out) {
        Ok(()) => Some(out.into()),
        Err(e) => {
            tracing::error!(nspace = %image.nspace(), "cannot encode a welcome: {e}");
            None
        }
    }
}

/// The image in a sealed, read-only file, and the frame naming it.
fn shared(image: &JobImage, share: ShareFn) -> Option<(Arc<OwnedFd>, Arc<[u8]>)> {
    match share(&format!("pmix-job-{}", image.nspace()), image.bytes()) {
        Ok(fd) => {
            let len = image.bytes().len() as u64;
            let frame = frame(&WelcomeJob::Shared { len }, image)?;
            Some((Arc::new(fd), frame))
        }
        Err(e) => {
            tracing::info!(
                nspace = %image.nspace(),
                "job image not shared (clients get it inline): {e}"
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::BTreeMap;

    use pmix_types::{Info, Rank, attr};
    use pmix_wire::{HEADER_LEN, JobSpec, Welcome, decode_body};

    use super::*;

    fn image() -> JobImage {
        JobImage::build(&JobSpec {
            nspace: Nspace::new("w").unwrap(),
            session: vec![],
            job: vec![Info::attr(attr::JOB_SIZE, 2u32)],
            apps: vec![],
            app_of_rank: vec![(0, Rank(0))],
            size: 2,
            offset: 0,
            spawned: false,
            maps: None,
            given_nodes: vec![],
            given_procs: BTreeMap::new(),
        })
        .unwrap()
    }

    fn job_of(frame: &[u8]) -> WelcomeJob {
        match decode_body(&frame[HEADER_LEN..]).unwrap() {
            Welcome::Accepted { job, .. } => job,
            Welcome::Refused { .. } => panic!("refused"),
        }
    }

    fn no_files(_: &str, _: &[u8]) -> io::Result<OwnedFd> {
        Err(io::Error::other("no memory files here"))
    }

    #[test]
    fn clients_share_one_file_and_one_frame() {
        let mut w = Welcomes::new(crate::memfd::read_only_copy);
        let img = image();
        let a = w.welcome(&img, true).unwrap();
        let b = w.welcome(&img, true).unwrap();
        assert!(Arc::ptr_eq(&a.frame, &b.frame));
        let (fa, fb) = (a.fd.unwrap(), b.fd.unwrap());
        assert!(Arc::ptr_eq(&fa, &fb), "a second file for the same job");
        assert_eq!(
            job_of(&a.frame),
            WelcomeJob::Shared {
                len: img.bytes().len() as u64
            }
        );
        // A connection that cannot carry a descriptor gets the image inline.
        let c = w.welcome(&img, false).unwrap();
        assert!(c.fd.is_none());
        assert_eq!(job_of(&c.frame), WelcomeJob::Inline(img));
    }

    #[test]
    fn without_memory_files_the_image_goes_inline() {
        let mut w = Welcomes::new(no_files);
        let img = image();
        let a = w.welcome(&img, true).unwrap();
        assert!(a.fd.is_none());
        assert_eq!(job_of(&a.frame), WelcomeJob::Inline(img));
    }
}
