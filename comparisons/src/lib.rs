//! Nothing to use here: this package only holds comparison benchmarks
//! (`benches/`). See `docs/BENCHMARKS.md`.
