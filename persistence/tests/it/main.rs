//! Integration tests of herd-persistence against real files, real SQLite and
//! real processes (the test binary re-executes itself as the child).

mod checkpoint;
mod faults;
mod ledger;
mod support;
