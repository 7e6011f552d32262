//! The native welcome of each namespace, made once: the job image written into one sealed
//! memory file that every local client maps, and the welcome frame that points to it (or, where
//! the file cannot be made or a client cannot receive it, the frame carrying the image).

use std::collections::HashMap;
use std::ffi::CString;
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use pmix_types::Nspace;
use pmix_wire::{JobImage, WelcomeJob, encode_welcome};

use crate::memfd;

/// The longest memory-file name Linux takes is 249 bytes; longer names are cut (the name is
/// for people reading `/proc`).
const MEMFD_NAME_MAX: usize = 200;

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
#[derive(Default)]
pub(crate) struct Welcomes {
    made: HashMap<Nspace, Made>,
}

impl Welcomes {
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
        if made.image != *image {
            *made = Made {
                image: image.clone(),
                inline: None,
                shared: None,
                tried_shared: false,
            };
        }
        if can_pass_fds && !made.tried_shared {
            made.tried_shared = true;
            made.shared = shared(image);
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

/// The image in a sealed, read-only memory file, and the frame naming it.
fn shared(image: &JobImage) -> Option<(Arc<OwnedFd>, Arc<[u8]>)> {
    let bytes = image.bytes();
    let mut name = format!("pmix-job-{}", image.nspace()).into_bytes();
    name.truncate(MEMFD_NAME_MAX);
    name.retain(|&b| b != 0);
    let name = CString::new(name).ok()?;
    let fd = memfd::sealed(&name, bytes.len(), memfd::READ_ONLY_SEALS, |f| {
        f.write_all_at(bytes, 0)
    });
    match fd {
        Ok(fd) => {
            let len = bytes.len() as u64;
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
