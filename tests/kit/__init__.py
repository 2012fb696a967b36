"""The test kit: constants, builders and runners several test modules share, one module per topic."""
