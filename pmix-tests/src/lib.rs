//! Multi-process integration and conformance tests for pmix-rs, and the test client programs
//! they start. Not a library for users.
