//! The attack suite of SPEC §24 (issue 38): each test reproduces one thing a
//! hostile client, a hostile server or a confined local process does, against
//! a real `xyd` with real children, and checks that xy fails closed. One
//! module per topic; each module's doc names the finding it attacks.

mod aggregate;
mod caps;
mod console;
mod flood;
mod parse;
mod peer;
mod sandbox;
mod stop;
