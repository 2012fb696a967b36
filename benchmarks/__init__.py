"""Benchmarks of catchup-assets: one module per question, each runnable as
`uv run python -m benchmarks.<name>`; `benchmarks/README.md` holds the latest figures.
What the questions share (clusters, meters, the report) is in `benchmarks/harness/`."""
