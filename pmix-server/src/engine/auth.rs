//! Who a connecting process is: what a front-end proved ([`Auth`]), what a client is
//! registered with ([`Proofs`]), what the kernel says of a peer ([`PeerCreds`]). The engine's
//! `handle_hello` weighs one against the other.

/// Length of the per-client secret.
pub(crate) const SECRET_LEN: usize = 16;

/// What a front-end proved about a process that names itself, for [`Engine::handle_hello`](super::Engine::handle_hello).
///
/// The variants are what the proof rests on, not which personality made it: the engine
/// decides by that, and a new personality picks the variant of its proof.
#[derive(Debug)]
#[cfg_attr(test, derive(PartialEq))]
pub(crate) enum Auth {
    /// The process showed a secret, to be held against the one it was registered with (the
    /// native protocol: the secret reaches the process through its environment).
    Secret {
        secret: Vec<u8>,
        /// Who owns the peer's socket, when the operating system says so.
        creds: Option<PeerCreds>,
    },
    /// The front-end vouches for the name with a way in the server made for this one process:
    /// an inherited socket, or a one-time id handed out for it (PMI-1).
    Vouched {
        /// Credentials to hold against the registration's.
        creds: Option<PeerCreds>,
    },
    /// Nothing but the peer's uid and gid, as the kernel confirmed them: the protocol has no
    /// secret (OpenPMIx). Claims only a client registered with [`Proofs::by_uid`], and never
    /// one already claimed with a secret or a way made for it.
    Uid {
        creds: PeerCreds,
        /// The inode of the peer's socket, when the kernel can tell: a client whose host
        /// reports its process ([`crate::Server::client_started`]) is claimed only by that
        /// process or its descendants.
        socket: Option<u64>,
    },
}

impl Auth {
    /// How the claim was made, as a refusal names it.
    pub(super) fn claim(&self) -> Claim {
        match self {
            Auth::Secret { .. } => Claim::Secret,
            Auth::Vouched { .. } => Claim::Vouched,
            Auth::Uid { .. } => Claim::Uid,
        }
    }
}

/// How a registered client's name was claimed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Claim {
    Secret,
    Vouched,
    Uid,
}

impl std::fmt::Display for Claim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Claim::Secret => "with its secret",
            Claim::Vouched => "through the way made for it (PMI-1)",
            Claim::Uid => "by uid alone (the OpenPMIx port)",
        })
    }
}

/// What a client is registered with besides its ids: what may claim its name.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Proofs {
    /// The secret `setup_fork` hands out (the native protocol).
    pub(crate) secret: [u8; SECRET_LEN],
    /// Whether a claim by uid alone ([`Auth::Uid`], a libpmix client) may take the name.
    pub(crate) by_uid: bool,
    /// Whether the host reports the pid of the process it starts for the name
    /// ([`super::Engine::client_started`]): a claim by uid alone over a socket the kernel
    /// names is then taken only from that process or its descendants, and waits for the pid.
    pub(crate) lineage: bool,
}

/// The credentials of a connecting peer, as the operating system reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PeerCreds {
    pub(crate) uid: u32,
    pub(crate) gid: u32,
}

/// Compares secrets without leaking, through timing, how long a prefix matched.
pub(super) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
