"""What the benchmarks share: the simulated and the real clusters they run on, the missions driven over them, the
meters, and the report every question writes. Nothing here is a question: those are the modules of `benchmarks/`."""
