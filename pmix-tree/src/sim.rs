//! A simulated network of vertices in virtual time (to come).
