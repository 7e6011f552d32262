//! The shape of the tree: vertices `0..size` in a `radix`-ary heap, vertex 0 the root.
//!
//! The parent of `v > 0` is `(v - 1) / radix`; its children are `v * radix + 1 ..= v * radix +
//! radix` (those below `size`). Every message follows the tree: towards a vertex in its own
//! subtree, down through the child whose subtree holds it; otherwise up.

/// A vertex of the tree: the root (0) or a daemon.
pub type Vertex = u32;

/// The tree of one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Topology {
    size: u32,
    radix: u32,
}

/// What a message towards some vertex does next at a given vertex.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hop {
    /// It has arrived.
    Here,
    /// It goes up, to the parent.
    Up,
    /// It goes down, to this child.
    Down(Vertex),
}

impl Topology {
    /// A tree of `size` vertices (at least 1) and fan-out `radix` (at least 1).
    pub fn new(size: u32, radix: u32) -> Topology {
        Topology {
            size: size.max(1),
            radix: radix.max(1),
        }
    }

    /// Number of vertices.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The fan-out.
    pub fn radix(&self) -> u32 {
        self.radix
    }

    /// The parent of `v`; `None` for the root.
    pub fn parent(&self, v: Vertex) -> Option<Vertex> {
        (v > 0).then(|| (v - 1) / self.radix)
    }

    /// The children of `v`, in order.
    pub fn children(&self, v: Vertex) -> impl Iterator<Item = Vertex> + use<> {
        let first = u64::from(v) * u64::from(self.radix) + 1;
        let end = (first + u64::from(self.radix)).min(u64::from(self.size));
        // Below `size`, hence below u32::MAX.
        (first..end.max(first)).map(|c| c as Vertex)
    }

    /// Number of links between the root and `v`.
    pub fn depth_of(&self, mut v: Vertex) -> u32 {
        let mut d = 0;
        while let Some(p) = self.parent(v) {
            v = p;
            d += 1;
        }
        d
    }

    /// The depth of the deepest vertex.
    pub fn depth(&self) -> u32 {
        self.depth_of(self.size - 1)
    }

    /// Whether `w` is in the subtree of `v` (`v` itself included).
    pub fn in_subtree(&self, v: Vertex, mut w: Vertex) -> bool {
        if w >= self.size {
            return false;
        }
        loop {
            if w == v {
                return true;
            }
            if w < v {
                return false;
            }
            match self.parent(w) {
                Some(p) => w = p,
                None => return false,
            }
        }
    }

    /// Where a message at `at`, bound for `to`, goes next.
    pub fn hop(&self, at: Vertex, to: Vertex) -> Hop {
        if at == to {
            return Hop::Here;
        }
        // Walk up from `to` until the child of `at` on the way, if `at` is an ancestor.
        let mut w = to;
        while let Some(p) = self.parent(w) {
            if p == at {
                return Hop::Down(w);
            }
            if p < at {
                break;
            }
            w = p;
        }
        Hop::Up
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heap_of_radix_k() {
        let t = Topology::new(10, 3);
        assert_eq!(t.parent(0), None);
        assert_eq!(t.parent(1), Some(0));
        assert_eq!(t.parent(4), Some(1));
        assert_eq!(t.children(0).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(t.children(2).collect::<Vec<_>>(), [7, 8, 9]);
        assert_eq!(t.children(3).count(), 0);
        assert_eq!(t.depth(), 2);
        assert!(t.in_subtree(1, 6));
        assert!(!t.in_subtree(2, 6));
        assert!(t.in_subtree(0, 9));
        assert!(!t.in_subtree(0, 10));
    }

    #[test]
    fn every_route_reaches_its_target_through_the_tree() {
        for (size, radix) in [(1, 2), (2, 1), (17, 2), (40, 3), (100, 16)] {
            let t = Topology::new(size, radix);
            for from in 0..size {
                for to in 0..size {
                    let mut at = from;
                    let mut hops = 0;
                    loop {
                        match t.hop(at, to) {
                            Hop::Here => break,
                            Hop::Up => at = t.parent(at).expect("the root never sends up"),
                            Hop::Down(c) => {
                                assert_eq!(t.parent(c), Some(at));
                                at = c
                            }
                        }
                        hops += 1;
                        assert!(hops <= 2 * t.depth(), "{from}->{to} loops");
                    }
                }
            }
        }
    }
}
