//! Unit tests of the remote upstream.
