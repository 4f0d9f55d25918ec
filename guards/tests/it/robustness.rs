//! Arbitrary input never panics and finishes within a budget.
